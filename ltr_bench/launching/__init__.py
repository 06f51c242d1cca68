"""How a sweep's jobs run, for any Hydra sweeper (it knows no Optuna): ``launcher`` is the
``ltr_pool`` Hydra launcher (warm worker processes, batches or jobs in flight), ``worker`` what
runs in its workers (the warm-up, each job through Hydra's ``run_job``), ``pools`` the jobs as a
sweeper hands them out (in flight, or batches of any launcher), ``processes`` who a process is,
SIGTERM while jobs run, and the guard that stops the jobs of a sweeper that is gone."""
