"""Re-evaluating a study's top trials after the search: locks, the race, the runs and their pooling."""
