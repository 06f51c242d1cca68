"""``ltr-bench-report``: tables, p-value heatmaps and CD diagrams from tracked MLflow runs.

Reads the finished fold runs of one experiment (no re-training), writes the report into
``--out`` and logs the same files as artifacts of a new run tagged ``ltr.role=report``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from ltr_bench import tracking_keys as tk
from ltr_bench.errors import UserError

ROLE_REPORT = tk.ROLE_REPORT
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
        "--experiment", required=True, help="Name of the MLflow experiment (the experiment_name config)."
    )
    parser.add_argument(
        "--out", default="report", help="Folder to write the report into (created; default: report/)."
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
        "--no-mlflow-artifacts",
        dest="log_to_mlflow",
        action="store_false",
        help="Only write the out folder; do not create the MLflow report run.",
    )
    return parser


def run(args: argparse.Namespace) -> int:
    """Build (and log) the report the parsed ``args`` ask for; print Table 1, notes, files, link."""
    from ltr_bench.report.make import make_report  # imported here so that --help stays fast

    report = make_report(args.tracking_uri, args.experiment, args.out, args.metrics,
                         protocol=args.protocol, eval_name=args.eval_name, split=args.split,
                         alpha=args.alpha, log_run=args.log_to_mlflow)
    print(report.table1_markdown)
    for note in report.notes:
        print(f"Note: {note}")
    print(f"\nWrote {len(report.files)} files into {report.out}/ (open report.html):")
    for path in report.files:
        print(f"  {path}")
    if report.run_id:
        print(f"Logged them as artifacts of MLflow run {report.run_id} ({tk.TAG_ROLE}={tk.ROLE_REPORT}).")
        print(report.link)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit code (2 for user errors)."""
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except UserError as err:
        print(f"ltr-bench-report: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ltr-bench-report: interrupted", file=sys.stderr)
        return 130
