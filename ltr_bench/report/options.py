"""The options of ``ltr-bench-report`` (its argument parser), apart from the console script, so
that :func:`ltr_bench.report.make.report_options` can read report options from experiment configs
without importing a command's entry point."""

from __future__ import annotations

import argparse
import os

DEFAULT_URI = "sqlite:///mlflow.db"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ltr-bench-report",
        description=(
            "Build the results report of an ltr-bench experiment from its tracked MLflow runs "
            "(no re-training): Table 1 (models x datasets x metrics, mean(SE) over folds, best "
            "marked) as Markdown/CSV/LaTeX, p-value heatmaps of the Nadeau-Bengio corrected "
            "t-test between every pair of models, Table 3 (run times), and a Friedman/Nemenyi "
            "critical-difference summary. Only runs tagged ltr.role=fold count."
        ),
        epilog="Example: ltr-bench-report --experiment letor --out report/ --metrics ndcg@10 map",
    )
    parser.add_argument(
        "--tracking-uri",
        default=os.environ.get("MLFLOW_TRACKING_URI", DEFAULT_URI),
        help="MLflow tracking URI of the store holding the runs "
        f"(default: $MLFLOW_TRACKING_URI, else {DEFAULT_URI}, the store ltr-bench writes).",
    )
    parser.add_argument(
        "--experiment",
        required=True,
        help="Name of the MLflow experiment (the experiment_name config).",
    )
    parser.add_argument(
        "--out",
        default="report",
        help="Folder to write the report into (created; default: report/).",
    )
    parser.add_argument(
        "--metrics",
        nargs="+",
        default=["ndcg@10", "map"],
        metavar="METRIC",
        help="Metrics for Table 1 and the tests, as named by ltr-bench (default: ndcg@10 map).",
    )
    parser.add_argument(
        "--protocol",
        default=None,
        help="Only use runs of this protocol, e.g. letor_folds or holdout (default: all, "
        "shown as separate row blocks).",
    )
    parser.add_argument(
        "--eval",
        dest="eval_name",
        default=None,
        help="Only use runs of this evaluation config, e.g. paper or graded (default: all).",
    )
    parser.add_argument(
        "--split",
        default="test",
        choices=["test", "vali"],
        help="Which split's metrics to report (default: test).",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        default=0.05,
        help="Significance level for marking p-values and the critical difference (default: 0.05).",
    )
    parser.add_argument(
        "--rope",
        type=float,
        default=0.01,
        help="Region of practical equivalence of the Bayesian correlated t-test: two models whose "
        "mean difference lies within +-ROPE are 'practically equivalent' (default: 0.01).",
    )
    parser.add_argument(
        "--baseline",
        default=None,
        metavar="MODEL",
        help="Per-query tests on one split (randomization and paired t-test, Holm-adjusted) and "
        "wins/ties/losses of every model against MODEL, from the runs' per_query_metrics.csv.",
    )
    parser.add_argument(
        "--per-query-fold",
        type=int,
        default=None,
        metavar="FOLD",
        help="The split of the per-query tests (0-based fold tag; default: the first fold).",
    )
    parser.add_argument(
        "--no-mlflow-artifacts",
        dest="log_to_mlflow",
        action="store_false",
        help="Only write the out folder; do not create the MLflow report run.",
    )
    return parser
