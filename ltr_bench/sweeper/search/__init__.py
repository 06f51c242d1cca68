"""The search: the space, the grid sampler, the ask/run/tell loop, the pruners."""
