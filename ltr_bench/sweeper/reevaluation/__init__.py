"""Re-evaluating a study's top trials after the search: the runs (locked, pooled) and the race."""
