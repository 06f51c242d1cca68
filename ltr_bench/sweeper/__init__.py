"""The project's Hydra sweeper on Optuna's ask/tell API (``hydra/sweeper=ltr_optuna``), generic for
any Hydra app: config surface in :mod:`~ltr_bench.sweeper.config`, the app's one way in
:mod:`~ltr_bench.sweeper.job`; ``search/`` and ``reevaluation/`` hold the two phases of a study,
``liveness`` the recovery of a gone worker's trials, ``storage`` where studies live,
and ``ltr_bench.launching`` how jobs run."""
