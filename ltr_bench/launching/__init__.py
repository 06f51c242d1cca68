"""How a sweep's jobs run, for any Hydra sweeper (it knows no Optuna): ``pools`` runs them as
batches of Hydra's launcher or keeps them in flight in warm joblib workers, ``composing`` composes
their configs in a warm worker, ``processes`` tells who a process is and whether it is alive and
stops the jobs of a sweeper that is gone, ``hydra_private`` holds the private Hydra and joblib
names this needs."""
