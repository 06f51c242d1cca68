"""The project's Hydra sweeper on Optuna's ask/tell API (``hydra/sweeper=ltr_optuna``): generic,
any Hydra app can use it; it talks to the app through config keys and the job's return value.

The config surface is :class:`~ltr_bench.sweeper.config.LtrOptunaSweeperConf` (every key with
its meaning; ``docs/reference/config/sweeper.md`` is generated from it): the hydra-optuna-sweeper
keys (``params`` in Hydra's override grammar, ``sampler``, ``direction``, ``n_trials``,
``n_jobs``, ``storage``, ``study_name``, ``max_failure_rate``) plus resuming and sharing
(``storage_dir``, ``study_per``, heartbeats), pruning (``hydra/sweeper/pruner``), parallel
trials (``asynchronous``, ``reproducible``), ``enqueue_*``, ``reevaluate`` and ``progress``.

The modules, by idea:

- ``sweeper`` the Hydra plugin class: one study after another; ``config`` the config surface
  and its checked form (``Settings``); ``state`` one study being swept (``StudyState``, handed
  to every step) and its setup;
- ``job`` the job's side, the only module the app imports: config keys, ``Objective``,
  ``TrialReporter``, refit planning (``refit``);
- ``search/`` the space, the grid sampler, asking within the budget, the ask/run/tell loop,
  the jobs' pruners; ``reevaluation/`` pooling, locks, the race, the loop;
- ``liveness`` worker identity, heartbeats, interrupted trials, orphaned jobs; ``storage``
  study names and databases; ``launching`` how jobs run (batches, jobs in flight, SIGTERM);
- ``trials`` what a trial's state means (budget, fail reasons); ``results`` what a study shows
  and leaves (progress line, summary, plots); ``optuna_private`` every private name used.
"""
