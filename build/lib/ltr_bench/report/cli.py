"""``ltr-bench-report``: tables, p-value heatmaps and CD diagrams from tracked MLflow runs.

Reads the finished fold runs of one experiment (no re-training), writes the report into
``--out`` and logs the same files as artifacts of a new run tagged ``ltr.role=report``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ltr_bench import tracking_keys as tk
from ltr_bench.errors import UserError

if TYPE_CHECKING:
    from ltr_bench.report.build import Report

ROLE_REPORT = "report"
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


def log_report_run(
    tracking_uri: str, experiment_id: str, args: argparse.Namespace, report: Report, n_runs: int
) -> str:
    """Create a finished run tagged ``ltr.role=report`` holding the report's files as artifacts
    (only the files this report wrote, in the same sub-folders)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri)
    run = client.create_run(
        experiment_id,
        run_name="report",
        tags={
            tk.TAG_ROLE: ROLE_REPORT,
            **({tk.TAG_PROTOCOL: args.protocol} if args.protocol else {}),
            **({tk.TAG_EVAL: args.eval_name} if args.eval_name else {}),
        },
    )
    run_id = run.info.run_id
    try:
        for key, value in {
            "report.metrics": " ".join(args.metrics),
            "report.split": args.split,
            "report.alpha": args.alpha,
            "report.n_fold_runs": n_runs,
        }.items():
            client.log_param(run_id, key, value)
        for path in report.files:
            parent = path.parent.relative_to(report.out).as_posix()
            client.log_artifact(run_id, str(path), artifact_path=None if parent == "." else parent)
    except BaseException:
        client.set_terminated(run_id, status="FAILED")
        raise
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def run(args: argparse.Namespace) -> int:
    # Imported here so that --help stays fast.
    from ltr_bench.report.build import build_report
    from ltr_bench.report.collect import collect_fold_runs

    if not 0.0 < args.alpha < 1.0:
        raise UserError(f"--alpha {args.alpha}: must be between 0 and 1.")
    runs = collect_fold_runs(args.tracking_uri, args.experiment, args.protocol, args.eval_name)
    report = build_report(runs, args.out, args.metrics, args.split, args.alpha)
    print(report.table1_markdown)
    for note in report.notes:
        print(f"Note: {note}")
    print(f"\nWrote {len(report.files)} files into {report.out}/:")
    for path in report.files:
        print(f"  {path}")
    if args.log_to_mlflow:
        run_id = log_report_run(args.tracking_uri, runs.experiment_id, args, report, len(runs.frame))
        print(f"Logged them as artifacts of MLflow run {run_id} ({tk.TAG_ROLE}={ROLE_REPORT}).")
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
