"""Re-evaluating a study's top trials after the search, so that the winner is not chosen on the
noise that made it win: pooling and selection, locks that run each once across workers, the race
that drops a candidate which cannot catch up, and the loop that runs them."""
