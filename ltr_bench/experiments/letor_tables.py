"""The papers' LETOR tables, each cell an ordinary tracked ``ltr-bench`` run.

- :func:`run_cells` (journal Table 2, Table 3 / ECML Table 2): every (dataset, row, column) cell
  is one protocol run of a composed config (``runner.run``: MLflow protocol + fold runs,
  ``results.json``); the table shows ``values`` (a split's metric such as ``test/ndcg@10``, or a
  run time such as ``time_fit_s``) as mean(SE) over the folds.
- Table 1 (:mod:`~ltr_bench.experiments.table1_sweeps`): a sweep per cell, its best configs refit
  and tested; its tables and figures are drawn with the helpers here.

Datasets are named by their config (``mq2008``, ``mq2007``, ``mslr_web10k``, ``letor``); the data
root comes from ``$LTR_DATA`` / ``dataset.root`` as for any run. Overrides given on the command
line (``threads=1``, ``tracking.*``, ``seed=...``) are passed on to every cell; keys of the
experiment's own ``cell_overrides`` (e.g. ``dataset.path=...`` for ``dataset=letor``) too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ltr_bench.experiments.common import (
    ExperimentRun,
    compose_run_config,
    override_key,
    plain,
    user_overrides,
)
from ltr_bench.experiments.results_key import spec_classes
from ltr_bench.stats import format_mean_se, mean_se

CELL_COLUMNS = ["dataset", "row", "column", "fold"]


# ------------------------------------------------------------------------------ shared helpers
def check_datasets(exp: ExperimentRun, datasets: list[str]) -> None:
    """Fail early, with the data-layer's one sentence, when a dataset's folder is missing."""
    from hydra.utils import instantiate

    for ds in datasets:
        cfg = compose_run_config(
            with_user([f"dataset={ds}", *plain(exp.spec.get("cell_overrides") or [])])
        )
        instantiate(cfg.dataset, _convert_="all")


def with_user(overrides: list[str]) -> list[str]:
    """``overrides`` plus the command line's (those not set by ``overrides`` already)."""
    own = {override_key(o) for o in overrides}
    forwarded = [o for o in user_overrides(own) if not override_key(o).startswith("hydra")]
    return [*forwarded, *overrides]


def fold_rows(results: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per fold of a ``results.json``: every split's metrics and the run times."""
    rows = []
    for f in results["folds"]:
        row = {**base, "fold": f["name"]}
        for split, metrics in f["metrics"].items():
            row.update({f"{split}/{n}": v for n, v in metrics.items()})
        row.update(f["times"])
        # the split's sizes: the Nadeau-Bengio correction's n_test / n_train (the leaderboard)
        row.update({k: f[k] for k in ("n_train_queries", "n_test_queries") if f.get(k)})
        rows.append(row)
    return rows


def format_table(
    cells: pd.DataFrame,
    values: list[str],
    index: str = "row",
    columns: tuple[str, ...] = ("dataset", "column"),
) -> pd.DataFrame:
    """Wide table: one row per ``index`` label, one column per (columns..., value), each cell
    mean(SE) over the folds (the papers' notation)."""
    out: dict[str, dict[str, str]] = {}
    col_order: list[str] = []
    for keys, g in cells.groupby([index, *columns], sort=False):
        label, rest = keys[0], [str(k) for k in keys[1:] if str(k)]
        for v in values:
            name = " ".join([*rest, v]) if len(values) > 1 or not rest else " ".join(rest)
            m, se, _ = mean_se(g[v].to_numpy(dtype=float)) if v in g else (np.nan, np.nan, 0)
            out.setdefault(str(label), {})[name] = format_mean_se(m, se)
            if name not in col_order:
                col_order.append(name)
    frame = pd.DataFrame.from_dict(out, orient="index")[col_order]
    frame.index.name = index
    return frame.reset_index()


def plot_cells(exp: ExperimentRun, cells: pd.DataFrame, values: list[str], name: str) -> None:
    """Grouped bars of the mean over folds with SE error bars: one panel per (dataset, value)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    panels = [(ds, v) for ds in cells["dataset"].unique() for v in values if v in cells]
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 3.8), squeeze=False)
    for ax, (ds, v) in zip(axes[0], panels):
        part = cells[cells["dataset"] == ds]
        rows, cols = list(part["row"].unique()), list(part["column"].unique())
        width = 0.8 / max(1, len(cols))
        for j, c in enumerate(cols):
            stats = [
                mean_se(part[(part["row"] == r) & (part["column"] == c)][v].to_numpy(float))
                for r in rows
            ]
            ax.bar(
                np.arange(len(rows)) + j * width,
                [s[0] for s in stats],
                width,
                yerr=[0 if np.isnan(s[1]) else s[1] for s in stats],
                capsize=3,
                label=str(c) or None,
            )
        ax.set_xticks(np.arange(len(rows)) + width * (len(cols) - 1) / 2)
        ax.set_xticklabels(rows, rotation=20, fontsize=8)
        ax.set_title(f"{ds}: {v}", fontsize=9)
        if any(str(c) for c in cols):
            ax.legend(fontsize=7)
    fig.suptitle(str(exp.spec.get("title") or exp.name), fontsize=9)
    exp.save_figure(fig, name)


# ------------------------------------------------------------------------------ Tables 2 and 3
@spec_classes(
    deciding=[
        "datasets",
        "common",
        "rows",
        "columns",
        "values",
        "cell_overrides",
        "scale_overrides",
        "report",
        "report_args",
    ],
)
def run_cells(exp: ExperimentRun) -> pd.DataFrame:
    """The driver of cell tables (Table 2, Table 3): one protocol run per (dataset, row, column)."""
    from ltr_bench.runner import run as run_config

    spec = exp.spec
    datasets = [str(d) for d in plain(spec.datasets)]
    rows_spec, cols_spec = plain(spec.rows), plain(spec.get("columns") or {"": []})
    values = [str(v) for v in plain(spec["values"])]
    check_datasets(exp, datasets)
    base = [
        *plain(spec.common),
        *plain(spec.get("scale_overrides") or []),
        f"experiment_name={spec.mlflow_experiment}",
        *plain(spec.get("cell_overrides") or []),
    ]
    cells: list[dict[str, Any]] = []
    bar = exp.progress(len(datasets) * len(rows_spec) * len(cols_spec))
    for ds in datasets:
        for row, row_o in rows_spec.items():
            for col, col_o in cols_spec.items():
                overrides = with_user([f"dataset={ds}", *base, *(row_o or []), *(col_o or [])])
                cfg = compose_run_config(overrides)
                slug = "_".join(p for p in (ds, row, col) if p).replace(" ", "-").replace("/", "-")
                result = run_config(cfg, output_dir=exp.path(f"cells/{slug}"), verbose=False)
                res = (
                    json.loads(Path(result.results_path).read_text())
                    if result.results_path
                    else {
                        "folds": [
                            dict(name=f.name, metrics=f.metrics, times=f.times)
                            for f in result.folds
                        ]
                    }
                )
                cells += fold_rows(
                    res,
                    {
                        "dataset": ds,
                        "row": row,
                        "column": col,
                        "mlflow_run_id": result.mlflow_run_id,
                    },
                )
                shown = ", ".join(f"{v}={_run_value(result, v):.4g}" for v in values)
                bar.write(f"[{ds}] {row} {col}: {shown}")
                bar.update(1)
    bar.close()
    frame = pd.DataFrame(cells)
    exp.write_csv(frame, "cells.csv")
    table = format_table(frame, values)
    exp.write_csv(table, f"{exp.name}.csv")
    exp.write_text(markdown_table(table), f"{exp.name}.md")
    plot_cells(exp, frame, values, f"{exp.name}.png")
    if spec.get("report"):
        report_into(
            exp, str(spec.mlflow_experiment), "report", plain(spec.get("report_args") or [])
        )
    return table


def _run_value(result: Any, value: str) -> float:
    """A table value of a finished run: ``split/metric`` (mean over folds) or a summed run time."""
    split, _, metric = value.partition("/")
    if metric:
        return float(result.mean.get(split, {}).get(metric, np.nan))
    return float(result.times.get(value, np.nan))


def markdown_table(table: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, table.columns)) + " |"
    sep = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(map(str, r)) + " |" for r in table.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def report_into(exp: ExperimentRun, mlflow_experiment: str, subdir: str, args: list[str]) -> None:
    """The report of ``mlflow_experiment`` (``args``: ``ltr-bench-report`` options from the
    experiment config) into ``<out>/<subdir>``; its files become artifacts of the experiment's
    parent run."""
    if not exp.tracker.enabled:
        return
    from ltr_bench.report.make import make_report, report_options

    out = exp.path(subdir)
    make_report(
        str(exp.tracker.tracking_uri), mlflow_experiment, out, **report_options(args), log_run=False
    )
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        parent = path.parent.relative_to(exp.out_dir).as_posix()
        exp.log_file(path, parent)
