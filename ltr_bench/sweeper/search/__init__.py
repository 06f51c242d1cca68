"""The search: the space (override grammar -> Optuna distributions), the grid sampler, asking new
trials within the budget without repeats, the ask/run/tell loop, and the pruners of its jobs."""
