"""One run of a composed config: data -> protocol -> preprocessing -> ranker -> metrics -> MLflow.

:func:`run` is what ``ltr-bench`` executes per job. It checks the config before reading any data
(model/loss/optimizer/activation compatibility, top-level values), then either

- runs the protocol (``final``): per outer split, preprocess (fitted on train), fit, score vali
  and test, evaluate, log a ``fold`` MLflow run under a ``protocol`` parent; prints a results
  table and writes ``results.json`` into the Hydra output folder; or
- scores a sweep trial (``inner_cv``): inner k-fold CV by query on the training part, one
  ``trial`` MLflow run under the study's ``sweep`` run, never scoring test data.

It returns a :class:`RunResult`; ``RunResult.objective`` (the config's ``objective.metric`` on
``objective.split``, or the inner-CV mean) is what a sweeper optimises.

Modules: :mod:`~ltr_bench.runner.job` (the run), :mod:`~ltr_bench.runner.checks` (config
checks), :mod:`~ltr_bench.runner.context` (job context, threads, seeds),
:mod:`~ltr_bench.runner.pipeline` (preprocess, fit, score, evaluate),
:mod:`~ltr_bench.runner.outer` and :mod:`~ltr_bench.runner.inner_cv` (the two loops),
:mod:`~ltr_bench.runner.packaging` (the saved model), :mod:`~ltr_bench.runner.results` (results
table and ``results.json``), :mod:`~ltr_bench.runner.tags` (tags and dataset inputs),
:mod:`~ltr_bench.runner.plots` (learning curve).
"""

from ltr_bench.runner.checks import (
    check_compatibility,
    check_distributed,
    check_top_level,
)
from ltr_bench.runner.context import (
    JobContext,
    configure_threads,
    job_context,
    parallel_jobs,
    seed_everything,
    seed_for_repeat,
)
from ltr_bench.runner.job import run
from ltr_bench.runner.packaging import log_model, scoring_pipeline
from ltr_bench.runner.pipeline import (
    Fitted,
    Prepared,
    build_preprocessing,
    build_ranker,
    evaluate_split,
    fit_and_score,
    prepare,
)
from ltr_bench.runner.plots import plot_learning_curve
from ltr_bench.runner.results import (
    FoldResult,
    RunResult,
    TrialFailed,
    format_results,
    metric_names,
)
from ltr_bench.runner.tags import common_tags, dataset_inputs, package_version

__all__ = [
    "Fitted",
    "FoldResult",
    "JobContext",
    "Prepared",
    "RunResult",
    "TrialFailed",
    "build_preprocessing",
    "build_ranker",
    "check_compatibility",
    "check_distributed",
    "check_top_level",
    "common_tags",
    "configure_threads",
    "dataset_inputs",
    "evaluate_split",
    "fit_and_score",
    "format_results",
    "job_context",
    "log_model",
    "metric_names",
    "package_version",
    "parallel_jobs",
    "plot_learning_curve",
    "prepare",
    "run",
    "scoring_pipeline",
    "seed_everything",
    "seed_for_repeat",
]
