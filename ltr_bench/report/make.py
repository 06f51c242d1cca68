"""The report as a function: collect the fold runs, build the files, log the ``report`` run.

What ``ltr-bench-report`` does, callable from code (an experiment driver) without going through
a command line or exit codes: :func:`make_report`. MLflow is reached only through
:mod:`ltr_bench.tracking`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ltr_bench import tracking_keys as tk
from ltr_bench.errors import UserError

if TYPE_CHECKING:
    from ltr_bench.report.build import Report

DEFAULT_METRICS = ("ndcg@10", "map")


def make_report(
    tracking_uri: str,
    experiment: str,
    out: str | Path,
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    protocol: str | None = None,
    eval_name: str | None = None,
    split: str = "test",
    alpha: float = 0.05,
    log_run: bool = True,
    rope: float = 0.01,
    baseline: str | None = None,
    per_query_fold: int | None = None,
) -> Report:
    """Build the report of ``experiment``'s fold runs into ``out``; with ``log_run`` also log its
    files as artifacts of a new run ``report <experiment>`` (``ltr.role=report``), whose id and
    UI link are set on the returned report. Raises :class:`UserError` on bad input."""
    from ltr_bench.report.build import build_report
    from ltr_bench.report.collect import collect_fold_runs

    if not 0.0 < alpha < 1.0:
        raise UserError(f"--alpha {alpha}: must be between 0 and 1.")
    if split not in ("test", "vali"):
        raise UserError(f"--split {split}: must be test or vali.")
    if rope < 0:
        raise UserError(f"--rope {rope}: must be >= 0.")
    runs = collect_fold_runs(tracking_uri, experiment, protocol, eval_name)
    per_query = None
    if baseline is not None:
        per_query = per_query_values(
            tracking_uri,
            runs.frame,
            metrics[0],
            split,
            baseline,
            per_query_fold,
            Path(out) / ".per_query_downloads",
        )
    report = build_report(
        runs, out, list(metrics), split, alpha, rope=rope, per_query=per_query, baseline=baseline
    )
    if log_run:
        options = {
            "report.metrics": " ".join(metrics),
            "report.split": split,
            "report.alpha": alpha,
            "report.protocol": protocol,
            "report.eval": eval_name,
            "report.rope": rope,
            "report.baseline": baseline,
        }
        report.run_id, report.link = _log_report_run(
            tracking_uri, experiment, report, options, len(runs.frame)
        )
    return report


def _log_report_run(
    tracking_uri: str, experiment: str, report: Report, options: dict[str, Any], n_runs: int
) -> tuple[str, str]:
    """A finished run ``report <experiment>`` holding the report's files (same sub-folders)."""
    from ltr_bench.tracking import Tracker, filter_eq

    tracker = Tracker(tracking_uri, experiment)
    tags = {
        tk.TAG_ROLE: tk.ROLE_REPORT,
        tk.TAG_PROTOCOL: options.get("report.protocol"),
        tk.TAG_EVAL: options.get("report.eval"),
    }
    with tracker.run(tk.report_run_name(experiment), tags) as run_id:
        tracker.log_params(run_id, {k: v for k, v in options.items() if v is not None})
        tracker.log_metrics(run_id, {tk.N_FOLD_RUNS: n_runs})
        for path in report.files:
            parent = path.parent.relative_to(report.out).as_posix()
            tracker.log_artifact(run_id, path, None if parent == "." else parent)
    link = tracker.experiment_link(filter_eq(tk.TAG_ROLE, tk.ROLE_REPORT), "report runs", run_id)
    return run_id, link


def report_options(args: Sequence[str]) -> dict[str, Any]:
    """Keyword arguments of :func:`make_report` from ``ltr-bench-report``-style options
    (``["--metrics", "ndcg@10", "map", "--split", "vali"]``, as experiment configs hold them)."""
    from ltr_bench.report.options import build_parser

    parser = build_parser()
    known = ["--experiment", "_", *args]
    try:
        ns = parser.parse_args(known)
    except SystemExit:
        raise UserError(
            f"report_args {list(args)}: not options of ltr-bench-report "
            "(see ltr-bench-report --help)"
        ) from None
    return {
        "metrics": ns.metrics,
        "protocol": ns.protocol,
        "eval_name": ns.eval_name,
        "split": ns.split,
        "alpha": ns.alpha,
        "rope": ns.rope,
        "baseline": ns.baseline,
        "per_query_fold": ns.per_query_fold,
    }


PER_QUERY_FILE = "per_query_metrics.csv"  # logged by every fold run (runner)


def per_query_values(
    tracking_uri: str,
    frame: Any,
    metric: str,
    split: str,
    baseline: str,
    fold: int | None,
    downloads: Path,
) -> dict[tuple[str, str, str, int], Any]:
    """Per (protocol, eval, dataset, fold): a queries x models frame of ``metric`` on ``split``,
    read from each fold run's ``per_query_metrics.csv`` (one split: ``fold``, else the first)."""
    import pandas as pd

    from ltr_bench.tracking import download_run_artifact

    if baseline not in set(frame["model"]):
        raise UserError(
            f"--baseline {baseline}: no fold runs of that model (models: "
            f"{', '.join(sorted(set(frame['model'])))})."
        )
    out = {}
    for (protocol, eval_name, dataset), runs in frame.groupby(
        ["protocol", "eval", "dataset"], sort=True
    ):
        chosen = int(runs["fold"].min()) if fold is None else int(fold)
        runs = runs[runs["fold"] == chosen]
        if baseline not in set(runs["model"]):
            continue
        columns = {}
        for model, run_id in zip(runs["model"], runs["run_id"]):
            try:
                path = download_run_artifact(
                    tracking_uri, run_id, PER_QUERY_FILE, downloads / run_id
                )
            # an older run without per-query values is left out (and noted)
            except Exception as exc:  # noqa: BLE001 - MLflow's error types vary
                columns[model] = exc
                continue
            values = pd.read_csv(path)
            values = values[values["split"] == split]
            if metric not in values:
                raise UserError(f"--metrics {metric}: not in {PER_QUERY_FILE} of run {run_id}.")
            columns[model] = values.set_index("qid")[metric]
        kept = {m: v for m, v in columns.items() if not isinstance(v, Exception)}
        if baseline in kept and len(kept) >= 2:
            out[(protocol, eval_name, dataset, chosen)] = pd.DataFrame(kept)
    return out
