"""The project's Hydra sweeper on Optuna's ask/tell API (``hydra/sweeper=ltr_optuna``).

Config surface (the hydra-optuna-sweeper keys plus resumption/sharing keys)::

    defaults:
      - override hydra/sweeper: ltr_optuna
      - override hydra/sweeper/sampler: tpe     # tpe (default) | random | grid
    hydra:
      sweeper:
        direction: maximize          # or minimize
        n_trials: 30                 # per study, over all processes/resumptions; null: grid size or 20
        n_jobs: 1                    # trials at once (joblib workers: in flight; else one batch)
        asynchronous: true           # joblib: start the next trial as one ends (false: batches)
        reproducible: false          # true: fixed batches, pruning against earlier ones only
        storage: null                # null: sqlite:///<cwd>/<storage_dir>/<study_name>.db; or postgresql://...
        storage_dir: multirun/optuna
        study_name: null             # null: <hydra.job.name>[-<cli override>...]-<sampler>
        study_per: []                # e.g. [dataset.fold]: one study per value of fold=0,1,2,3,4
        max_failure_rate: 0.5        # abort when more than 50% of n_trials failed
        enqueue_defaults: false      # true: trial 0 = the composed config's values of the params
        enqueue_trials: []           # points to run first, e.g. [{model.lr: 0.001}]
        reevaluate: {top_k: 0}       # >0: re-run the k best trials (++sweep.reevaluation=true), pick by pooled value
                                     # (pruner: {...} races them fold by fold)
        sampler: {seed: 0}           # any option of the chosen Optuna sampler
        pruner: ...                  # hydra/sweeper/pruner=none|median|successive_halving|hyperband
        progress: true               # one live line per study (tqdm on a terminal, log lines otherwise)
        params:                      # Hydra's override grammar
          model.lr: tag(log, interval(1e-4, 1e-1))
          model.n_layers: range(2,6)
          activation: choice(tanh, sigmoid, linear)
          model.dropout: 0,0.2,0.5

Each job receives ``++sweep.trial_number=<n>`` and ``++sweep.study_name=<name>``; the job's return
value is the objective (an exception, NaN or None marks the trial FAIL and the sweep goes on). A
job may return ``objective.Objective(value, se=...)`` (a float subclass): its attributes become the
trial's user attributes and the summary counts the trials within one SE of the best.
``<hydra.sweep.dir>/optimization_results.yaml`` holds best value/params/overrides and the storage.

Modules: ``config`` (structured configs in Hydra's ConfigStore), ``search_space`` (override
grammar -> Optuna distributions), ``grid`` (exhaustive grid sampler), ``trials`` (budget counting,
interrupted-trial detection, heartbeats), ``storage`` (study names, default SQLite path),
``sweeper`` (the Sweeper: one study after another), ``study_setup`` (storage, study, sampler,
pruner and budget of a study), ``search_runs`` (the search loop), ``asking`` (new trials within
the budget), ``job_pool`` (jobs in flight in joblib workers, or batches of the Hydra launcher),
``launching`` (job overrides, a batch through the launcher, SIGTERM), ``telling`` (each job's
outcome to Optuna), ``reproducible`` (the pruner of the reproducible mode), ``summary``
(``optimization_results.yaml``), ``hooks`` (the app's ``sweep.on_*`` hooks),
``reevaluation_runs`` (running the top trials' re-evaluations), ``reevaluation`` (pooling and
selecting re-evaluated top trials), ``reevaluation_locks`` (locking re-evaluations through the
storage), ``reevaluation_racing`` (dropping candidates that cannot catch up), ``optuna_private`` (the private Optuna/Hydra names the sweeper needs, in one place),
``plots`` (history / importance PNGs), ``objective`` (a float with its standard error),
``pruning`` (pruners; a job's :class:`~ltr_bench.sweeper.pruning.TrialReporter`), ``progress``
(the per-study progress line), ``refit`` (reading a finished sweep back: the refit jobs of
``refit_best=<sweep dir>`` and every refit's results). Heavy imports stay lazy.
"""

from __future__ import annotations

from typing import Any

from ltr_bench.sweeper.config import LtrOptunaSweeperConf, register_configs
from ltr_bench.sweeper.sweeper import (
    RESULTS_FILE,
    STUDY_NAME_KEY,
    TRIAL_NUMBER_KEY,
    TooManyFailures,
)

__all__ = [
    "LtrOptunaSweeperConf",
    "register_configs",
    "RESULTS_FILE",
    "STUDY_NAME_KEY",
    "TRIAL_NUMBER_KEY",
    "TooManyFailures",
    "write_study_plots",
    "parse_search_space",
    "SearchSpace",
    "GridSearchSampler",
    "counts_toward_budget",
    "default_study_name",
]


_LAZY = {
    "write_study_plots": "ltr_bench.sweeper.plots",
    "parse_search_space": "ltr_bench.sweeper.search_space",
    "SearchSpace": "ltr_bench.sweeper.search_space",
    "GridSearchSampler": "ltr_bench.sweeper.grid",
    "counts_toward_budget": "ltr_bench.sweeper.trials",
    "default_study_name": "ltr_bench.sweeper.storage",
}


def __getattr__(name: str) -> Any:
    """Import Optuna-dependent helpers on first use (keeps Hydra's plugin scan fast)."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ltr_bench.sweeper' has no attribute '{name}'")
