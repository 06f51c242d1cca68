"""``ltr-bench-report``: tables, p-value heatmaps and CD diagrams from tracked MLflow runs.

Reads the finished fold runs of one experiment (no re-training), writes the report into
``--out`` and logs the same files as artifacts of a new run tagged ``ltr.role=report``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ltr_bench import tracking_keys as tk
from ltr_bench.cli.gc_policy import tune_garbage_collection
from ltr_bench.errors import UserError
from ltr_bench.report.options import build_parser

ROLE_REPORT = tk.ROLE_REPORT


def run(args: argparse.Namespace) -> int:
    """Build (and log) the report the parsed ``args`` ask for; print Table 1, notes, files, link."""
    from ltr_bench.report.make import make_report  # imported here so that --help stays fast

    report = make_report(
        args.tracking_uri,
        args.experiment,
        args.out,
        args.metrics,
        protocol=args.protocol,
        eval_name=args.eval_name,
        split=args.split,
        alpha=args.alpha,
        log_run=args.log_to_mlflow,
        rope=args.rope,
        baseline=args.baseline,
        per_query_fold=args.per_query_fold,
    )
    print(report.table1_markdown)
    for note in report.notes:
        print(f"Note: {note}")
    print(f"\nWrote {len(report.files)} files into {report.out}/ (open report.html):")
    for path in report.files:
        print(f"  {path}")
    if report.run_id:
        print(
            f"Logged them as artifacts of MLflow run {report.run_id} ({tk.TAG_ROLE}={tk.ROLE_REPORT})."
        )
        print(report.link)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit code (2 for user errors)."""
    tune_garbage_collection()
    args = build_parser().parse_args(argv)
    try:
        return run(args)
    except UserError as err:
        print(f"ltr-bench-report: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("ltr-bench-report: interrupted", file=sys.stderr)
        return 130


def console_main() -> int:
    """The ``ltr-bench-report`` console script: :func:`main` with the command line's arguments."""
    return main()
