"""Every name ltr-bench writes to or reads from MLflow: tags, roles, metric keys, run names.

MLflow metric keys may not contain ``@``, so ``ndcg@10`` on the test split is logged as
``test/ndcg_at_10``. The tracking layer writes with these helpers and the report reads with them,
so the two can never drift apart. Nothing here imports MLflow.

Metric keys:

- final values ``vali/<metric>``, ``test/<metric>`` (a fold run: that fold; a protocol run: the
  mean over folds, ``..._se`` its standard error), ``cv/<metric>`` (a sweep trial: the mean over
  inner folds), ``cv_fold/<metric>`` (one step per inner fold);
- per-epoch (per-round) learning curves ``curve/<name>`` (``curve/train_loss``, ``curve/lr``,
  ``curve/vali_ndcg_at_10``), step = epoch;
- run times ``time_read_s``, ``time_fit_s``, ``time_eval_s``; ``objective``;
- on a sweep run ``best_objective`` and the histories ``best_objective_so_far`` /
  ``trial_objective`` (step = trial number).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# ------------------------------------------------------------------------------------------ tags
# Tags set on every run (values are strings).
TAG_ROLE = "ltr.role"  # see the ROLE_* values below
TAG_MODEL = "ltr.model"  # the model config's name, e.g. "direct_ranker"
TAG_DATASET = "ltr.dataset"  # the dataset config's name, e.g. "mq2008"
TAG_PROTOCOL = "ltr.protocol"  # "single", "letor_folds", "holdout"
TAG_EVAL = "ltr.eval"  # the eval config's name: "paper", "graded" or "authors"
TAG_FOLD = "ltr.fold"  # outer fold / split index, 0-based, on "fold" runs
TAG_FOLD_NAME = "ltr.fold_name"  # the split's name as printed, e.g. "mq2008/Fold1"
TAG_FINGERPRINT = "ltr.dataset_fingerprint"
TAG_SEED = "ltr.seed"
TAG_VERSION = "ltr.version"
TAG_GIT_COMMIT = "ltr.git_commit"
TAG_INVOCATION = "ltr.invocation"  # one id per `ltr-bench` command (all jobs of a multirun)
TAG_EXPERIMENT_KEY = "ltr.experiment_key"  # hash of what decides an experiment's results
TAG_PRUNED = "ltr.pruned"  # "true" on a trial run the sweeper's pruner stopped early
TAG_FOLDS_DONE = "ltr.folds_done"  # the inner folds a pruned trial ran
TAG_STUDY = "ltr.study"  # Optuna study name, on sweep, trial and refit runs
TAG_TRIAL = "ltr.trial_number"  # Optuna trial number, on trial runs
TAG_REEVALUATION = "ltr.reevaluation"  # "true" on a re-evaluation of a top trial
TAG_REFIT = "ltr.refit"  # "true" on the protocol run that refits a sweep's best config
TAG_BEST_PREFIX = "ltr.best."  # ltr.best.<param>: a sweep's best parameters (tags: they may change)
TAG_BEST_TRIAL = "ltr.best_trial"
TAG_EXPERIMENT = "ltr.experiment"  # an experiment driver's name (table1, fig2a, ...)
TAG_SCALE = "ltr.scale"
# Facts about the machine or the data rather than choices: tags, so params stay comparable.
TAG_MACHINE_PREFIX = "ltr."  # + config key: ltr.threads, ltr.dataset.root, ...
TAG_DATA_PREFIX = "ltr.data."  # + dataset.describe() key / fold size
TAG_N_TRAIN_QUERIES = "ltr.data.n_train_queries"  # fold sizes, for the corrected t-test
TAG_N_TEST_QUERIES = "ltr.data.n_test_queries"
TAG_N_VALI_QUERIES = "ltr.data.n_vali_queries"
TAG_PREPROCESSING = "ltr.data.preprocessing"
TAG_HOST = "ltr.host"
# Hardware and software a run's times come from (ltr_bench.machine.facts.facts), on every run:
# ltr.hw.cpu_model, ltr.hw.cpus_logical, ltr.hw.cpus_physical, ltr.hw.memory_gib, ltr.hw.threads,
# ltr.hw.accelerator, ltr.hw.gpu_count, ltr.hw.gpu_model, ltr.hw.gpu_memory_gib, ltr.hw.cuda,
# ltr.hw.cuda_driver, ltr.hw.os; ltr.sw.python, ltr.sw.torch, ltr.sw.lightning, ltr.sw.lightgbm,
# ltr.sw.optuna, ltr.sw.mlflow; and ltr.hardware, the one-line summary Table 3 groups times by.
TAG_HW_PREFIX = "ltr.hw."
TAG_SW_PREFIX = "ltr.sw."
TAG_HARDWARE = "ltr.hardware"

ROLE_PROTOCOL = "protocol"  # one per ltr-bench run (parent of its folds)
ROLE_FOLD = "fold"  # one outer fold / hold-out split
ROLE_SWEEP = "sweep"  # one per Optuna study
ROLE_TRIAL = "trial"  # one sweep job
ROLE_REPORT = "report"  # one ltr-bench-report
ROLE_EXPERIMENT = "experiment"  # one experiment driver run (a table or figure)

# MLflow's own tags (filled through its run-context registry, or set here where it has none).
MLFLOW_PARENT = "mlflow.parentRunId"  # nesting: the UI shows children under it
MLFLOW_DESCRIPTION = "mlflow.note.content"  # the run's description: its command line
MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"
MLFLOW_GIT_BRANCH = "mlflow.source.git.branch"
MLFLOW_DATASET_CONTEXT = "mlflow.data.context"  # train / vali / test on a logged dataset input
EXPERIMENT_KIND = "mlflow.experimentKind"  # experiment tag; MLflow 3.x UIs read it
EXPERIMENT_KIND_ML = "custom_model_development"  # the "Machine learning" kind
# A saved view of the runs table (MLflow 3.17's experiment tag mlflow.sharedViewState.<id>, opened
# by ?viewStateShareKey=<id> or from the "Views" menu): the columns a comparison needs.
SAVED_VIEW_PREFIX = "mlflow.sharedViewState."
SAVED_VIEW_ID = "ltr-bench-metrics"
SAVED_VIEW_NAME = "ltr-bench: metrics"

# Legacy params (stores written before the fold sizes became tags); the report reads both.
PARAM_N_TRAIN_QUERIES = "data.n_train_queries"
PARAM_N_TEST_QUERIES = "data.n_test_queries"

# --------------------------------------------------------------------------------------- metrics
TIME_READ = "time_read_s"  # run times in seconds on "fold" runs (their sums on the parent)
TIME_FIT = "time_fit_s"
TIME_EVAL = "time_eval_s"
OBJECTIVE = "objective"
SE_SUFFIX = "_se"
CURVE_PREFIX = "curve/"
SPLIT_VALI = "vali"
SPLIT_TEST = "test"
SPLIT_CV = "cv"  # a trial's mean over inner folds
SPLIT_CV_FOLD = "cv_fold"  # one step per inner fold
BEST_OBJECTIVE = "best_objective"
BEST_SO_FAR = "best_objective_so_far"  # history, step = trial number
TRIAL_OBJECTIVE = "trial_objective"  # history, step = trial number
SEARCH_BEST_OBJECTIVE = "search_best_objective"  # the search's own best (with re-evaluation)
N_TRIALS_COMPLETE = "n_trials_complete"
N_TRIALS_FAILED = "n_trials_failed"
N_TRIALS_PRUNED = "n_trials_pruned"  # stopped early by the sweeper's pruner (racing)
N_TRIALS_REEVALUATED = "n_trials_reevaluated"
N_TRIALS_WITHIN_ONE_SE = "n_trials_within_one_se"
N_FOLD_RUNS = "n_fold_runs"  # on a report run

# --------------------------------------------------------------------------------------- params
# What a run's params are: its group choices (``model=direct_ranker``, ``loss=l2`` ...), every
# value of the hyperparameter groups, the top-level choices, and in the other groups only the
# values that differ from the chosen option's file (the option's name stands for the rest).
# Config metadata is never a param; machine facts (threads, paths) are tags. The whole resolved
# config is the artifact ``config.yaml``.
CHOICE_GROUPS = (
    "model",
    "dataset",
    "protocol",
    "eval",
    "loss",
    "optimizer",
    "activation",
    "trainer",
)
HYPERPARAMETER_GROUPS = ("model", "loss", "optimizer", "activation")
TOP_LEVEL_PARAMS = ("seed", "objective")
MACHINE_KEYS = ("threads", "dataset.root", "dataset.path", "dataset.cache_dir")

RUN_NAME_SEP = " · "

# Columns of the saved view (MLflow's column keys: <type>.`<key>`).
VIEW_COLUMNS = (
    "attributes.`Dataset`",
    "params.`model`",
    "params.`dataset`",
    "tags.`ltr.fold_name`",
    "metrics.`test/ndcg_at_10`",
    "metrics.`test/map`",
    "metrics.`vali/ndcg_at_10`",
    "metrics.`cv/ndcg_at_10`",
    "metrics.`best_objective`",
    "metrics.`time_fit_s`",
)


def metric_key(split: str, name: str) -> str:
    """MLflow key for a metric on a split: ``("test", "ndcg@10") -> "test/ndcg_at_10"``."""
    return f"{split}/{name.replace('@', '_at_')}"


def metric_name(key: str) -> tuple[str, str]:
    """Inverse of :func:`metric_key`: ``"test/ndcg_at_10" -> ("test", "ndcg@10")``."""
    split, _, name = key.partition("/")
    return split, name.replace("_at_", "@")


def curve_key(name: str) -> str:
    """MLflow key of a per-epoch value named by a ranker: ``vali_ndcg@10 -> curve/vali_ndcg_at_10``."""
    return CURVE_PREFIX + name.replace("@", "_at_").replace("/", "_")


def fact_tags(facts: Mapping[str, Any]) -> dict[str, str]:
    """A machine's facts (``ltr_bench.machine.facts.facts``) as ``ltr.hw.*``, ``ltr.sw.*`` and
    ``ltr.hardware`` tags; the host keeps its own tag ``ltr.host``."""
    out = {TAG_HARDWARE: str(facts.get("hardware", "unknown"))}
    for key, value in facts.items():
        if key == "versions" and isinstance(value, Mapping):
            out.update({TAG_SW_PREFIX + k: str(v) for k, v in value.items()})
        elif key == "host":
            out[TAG_HOST] = str(value)
        elif key != "hardware":
            out[TAG_HW_PREFIX + key] = str(value)
    return out


# ------------------------------------------------------------------------------------- run names
def fold_run_name(model: str, split: str, seed: int | None = None) -> str:
    """``direct_ranker · mq2008/Fold1`` (a refit's folds add `` · seed 0``)."""
    return RUN_NAME_SEP.join([model, split] + ([f"seed {seed}"] if seed is not None else []))


def protocol_run_name(model: str, scope: str, protocol: str) -> str:
    """``direct_ranker · mq2008 · letor_folds`` (scope: the one split's name, or the dataset)."""
    return RUN_NAME_SEP.join([model, scope, protocol])


def refit_run_name(model: str, scope: str, seed: int) -> str:
    """``refit direct_ranker · mq2008/Fold1 · seed 0``."""
    return "refit " + RUN_NAME_SEP.join([model, scope, f"seed {seed}"])


def sweep_run_name(model: str, scope: str, sampler: str | None) -> str:
    """``sweep direct_ranker · mq2008/Fold1 · tpe``."""
    return "sweep " + RUN_NAME_SEP.join([model, scope] + ([sampler] if sampler else []))


def trial_run_name(model: str, trial: int | None, reevaluation: bool = False) -> str:
    """``direct_ranker · trial 3`` (`` · re-evaluation`` for a re-evaluated top trial)."""
    parts = [model, f"trial {trial}" if trial is not None else "inner-cv"]
    return RUN_NAME_SEP.join(parts + (["re-evaluation"] if reevaluation else []))


def report_run_name(experiment: str) -> str:
    """``report <experiment>``."""
    return f"report {experiment}"
