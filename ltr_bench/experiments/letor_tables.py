"""The papers' LETOR tables, each cell an ordinary tracked ``ltr-bench`` run.

- :func:`run_cells` (journal Table 2, Table 3 / ECML Table 2): every (dataset, row, column) cell
  is one protocol run of a composed config (``runner.run``: MLflow protocol + fold runs,
  ``results.json``); the table shows ``values`` (a split's metric such as ``test/ndcg@10``, or a
  run time such as ``time_fit_s``) as mean(SE) over the folds.
- :func:`run_sweeps` (Table 1 of both papers): per protocol variant, dataset and model an Optuna
  sweep through the real CLI (``ltr-bench -m search=<model> ...``, one study per outer fold or
  hold-out split), the refit of every study's best config (what ``ltr-bench refit_best=<sweep
  dir>`` does, run in this process: one tracked ``final`` run per study), then the report
  (``make_report``) over the variant's MLflow experiment (Table 1, corrected t-test p-values,
  Friedman/Nemenyi, run times). A row is a model config or a labelled variant of one (a model
  plus overrides, :mod:`~ltr_bench.experiments.model_variants`); ``refits.csv`` adds each
  sweep's time (``time_sweep_s``, :mod:`~ltr_bench.experiments.sweep_clock`).

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

from ltr_bench.errors import UserError
from ltr_bench.experiments.common import (
    ExperimentRun,
    compose_run_config,
    override_key,
    plain,
    user_overrides,
)
from ltr_bench.experiments.model_variants import model_entries
from ltr_bench.experiments.sweep_clock import SweepClock
from ltr_bench.stats import format_mean_se, mean_se

CELL_COLUMNS = ["dataset", "row", "column", "fold"]


# ------------------------------------------------------------------------------ shared helpers
def check_datasets(exp: ExperimentRun, datasets: list[str]) -> None:
    """Fail early, with the data-layer's one sentence, when a dataset's folder is missing."""
    from hydra.utils import instantiate

    for ds in datasets:
        cfg = compose_run_config(
            _with_user([f"dataset={ds}", *plain(exp.spec.get("cell_overrides") or [])])
        )
        instantiate(cfg.dataset, _convert_="all")


def _with_user(overrides: list[str]) -> list[str]:
    """``overrides`` plus the command line's (those not set by ``overrides`` already)."""
    own = {override_key(o) for o in overrides}
    forwarded = [o for o in user_overrides(own) if not override_key(o).startswith("hydra")]
    return [*forwarded, *overrides]


def _fold_rows(results: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per fold of a ``results.json``: every split's metrics and the run times."""
    rows = []
    for f in results["folds"]:
        row = {**base, "fold": f["name"]}
        for split, metrics in f["metrics"].items():
            row.update({f"{split}/{n}": v for n, v in metrics.items()})
        row.update(f["times"])
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
                overrides = _with_user([f"dataset={ds}", *base, *(row_o or []), *(col_o or [])])
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
                cells += _fold_rows(
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
    exp.write_text(_markdown(table), f"{exp.name}.md")
    plot_cells(exp, frame, values, f"{exp.name}.png")
    if spec.get("report"):
        _report(exp, str(spec.mlflow_experiment), "report", plain(spec.get("report_args") or []))
    return table


def _run_value(result: Any, value: str) -> float:
    """A table value of a finished run: ``split/metric`` (mean over folds) or a summed run time."""
    split, _, metric = value.partition("/")
    if metric:
        return float(result.mean.get(split, {}).get(metric, np.nan))
    return float(result.times.get(value, np.nan))


def _markdown(table: pd.DataFrame) -> str:
    head = "| " + " | ".join(map(str, table.columns)) + " |"
    sep = "|" + "---|" * len(table.columns)
    body = ["| " + " | ".join(map(str, r)) + " |" for r in table.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


# ------------------------------------------------------------------------------ Table 1
def _cli(args: list[str], log: Path, in_process: bool = False) -> None:
    """``ltr-bench <args>``, output into ``log`` (:func:`ltr_bench.command_in_process.ltr_bench`);
    a failure raises with its tail."""
    from ltr_bench.command_in_process import ltr_bench

    code = ltr_bench(args, log, in_process)
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        message = f"`ltr-bench {' '.join(args)}` failed (exit {code}; log {log}): " + " / ".join(
            tail
        )
        raise UserError(message) if code == 2 else RuntimeError(message)


def _report(exp: ExperimentRun, mlflow_experiment: str, subdir: str, args: list[str]) -> None:
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


def run_sweeps(exp: ExperimentRun) -> pd.DataFrame:
    """The driver of Table 1: sweep, refit and report per (variant, dataset, model)."""
    spec = exp.spec
    datasets = [str(d) for d in plain(spec.datasets)]
    models = model_entries(spec)  # label -> model config and its overrides
    variants = {v: plain(spec.variants)[v] for v in plain(spec.run_variants)}
    check_datasets(exp, datasets)
    sweep_o = [
        *plain(spec.sweep_overrides),
        *plain(spec.get("launcher_overrides") or []),
        *plain(spec.get("scale_overrides") or []),
        *plain(spec.get("cell_overrides") or []),
    ]
    extra_refits = {str(k): list(v) for k, v in plain(spec.get("extra_refits") or {}).items()}
    # Per model config, its sweeps' overrides (a scale's budget); a fixed key leaves the space.
    per_model = {str(k): list(v) for k, v in plain(spec.get("model_overrides") or {}).items()}
    rows: list[dict[str, Any]] = []
    extra_rows: dict[str, list[dict[str, Any]]] = {label: [] for label in extra_refits}
    failed: list[dict[str, Any]] = []
    bar = exp.progress(len(variants) * len(datasets) * len(models))
    for variant, vspec in variants.items():
        mlflow_exp = f"{spec.mlflow_experiment}_{variant}"
        for ds in datasets:
            for label, entry in models.items():
                fmt = {"model": entry.model, "dataset": ds, "variant": variant}
                own = [
                    f"model={entry.model}",
                    f"dataset={ds}",
                    *(o.format(**fmt) for o in sweep_o),
                    *vspec["overrides"],
                    *entry.overrides,
                    *per_model.get(entry.model, []),
                    f"experiment_name={mlflow_exp}",
                ]
                sweep_dir = exp.path(f"sweeps/{variant}/{ds}/{label}")
                try:
                    bar.set_postfix_str(f"{variant} {ds} {label}: sweep", refresh=True)
                    # studies stored with the sweep: a new experiment run starts new studies
                    clock = SweepClock(sweep_dir)
                    _cli(
                        [
                            "-m",
                            *_with_user(own),
                            f"hydra.sweep.dir={sweep_dir}",
                            f"hydra.sweeper.storage_dir={sweep_dir / 'optuna'}",
                        ],
                        sweep_dir / "sweep.log",
                        in_process=bool(spec.get("in_process", False)),
                    )
                    clock.stop()
                    bar.set_postfix_str(f"{variant} {ds} {label}: refit", refresh=True)
                    _refit(sweep_dir, _refit_user_overrides(own))
                    cell = dict(variant=variant, dataset=ds, model=label, **clock.cell())
                    found = _refit_rows(sweep_dir, cell)
                    for name, extra in extra_refits.items():
                        user = _untracked(_refit_user_overrides(own))
                        _refit(sweep_dir, [*user, *extra], f"refit-{name}")
                        extra_rows[name] += _refit_rows(sweep_dir, cell, f"refit-{name}")
                except RuntimeError as exc:  # one failed cell must not lose a days-long table
                    failed.append(
                        {"variant": variant, "dataset": ds, "model": label, "error": str(exc)}
                    )
                    bar.write(f"[{variant}] {ds} {label}: FAILED ({str(exc)[:300]})")
                    bar.update(1)
                    continue
                rows += found
                shown = ", ".join(
                    f"{m}={np.nanmean([r.get(f'test/{m}', np.nan) for r in found]):.4f}"
                    for m in plain(spec.metrics)
                )
                bar.write(f"[{variant}] {ds} {label}: {len(found)} refit folds, test {shown}")
                bar.update(1)
        _report(
            exp,
            mlflow_exp,
            f"report/{variant}",
            ["--metrics", *plain(spec.metrics), *plain(spec.get("report_args") or [])],
        )
    bar.close()
    if failed:
        exp.write_csv(pd.DataFrame(failed), "failed.csv")
    if not rows:
        raise RuntimeError(f"every sweep of {exp.name} failed; see {exp.path('failed.csv')}")
    frame = pd.DataFrame(rows)
    exp.write_csv(frame, "refits.csv")
    for name, found_extra in extra_rows.items():
        exp.write_csv(pd.DataFrame(found_extra), f"refits-{name}.csv")
    metrics = [f"test/{m}" for m in plain(spec.metrics)]
    frame["row"], frame["column"] = frame["model"], frame["variant"]
    table = format_table(frame, metrics, index="row", columns=("variant", "dataset"))
    exp.write_csv(table, f"{exp.name}.csv")
    exp.write_text(_markdown(table), f"{exp.name}.md")
    plot_cells(
        exp,
        frame.assign(dataset=frame["variant"] + " " + frame["dataset"]),
        metrics,
        f"{exp.name}.png",
    )
    if failed:
        print(format_table_failed(failed), flush=True)
        raise RuntimeError(
            f"{len(failed)} sweep(s) failed (listed in {exp.path('failed.csv')}); "
            "the table and reports hold the others"
        )
    return table


def format_table_failed(failed: list[dict[str, Any]]) -> str:
    return "failed sweeps:\n" + "\n".join(
        f"  {f['variant']} {f['dataset']} {f['model']}: {f['error'][:200]}" for f in failed
    )


def _refit_user_overrides(own: list[str]) -> list[str]:
    """What a refit takes from the command line: the forwarded overrides (threads, tracking...)
    that are not sweep settings (the refit repeats the sweep's own overrides by itself)."""
    keys = {override_key(o) for o in own}
    return [o for o in user_overrides(keys) if not override_key(o).startswith("hydra")]


def _untracked(user: list[str]) -> list[str]:
    """``user`` with ``tracking=none`` instead of its tracking overrides: an extra refit stays out
    of the MLflow experiment the report reads."""
    return [*(o for o in user if override_key(o).split(".")[0] != "tracking"), "tracking=none"]


def _refit(sweep_dir: Path, user: list[str], subdir: str = "refit") -> None:
    """What ``ltr-bench refit_best=<sweep dir>`` does, in this process: per study an ordinary
    ``final`` run of its best config (composed from :func:`ltr_bench.refit_plan.plan_refits`'
    overrides), tracked under the study's sweep run, output in ``<sweep dir>/<subdir>/<study>``."""
    from ltr_bench.refit_plan import plan_refits
    from ltr_bench.runner import run as run_config

    for refit in plan_refits([f"refit_best={sweep_dir}", *user], subdir) or []:
        overrides = [o for o in refit.overrides if not override_key(o).startswith("hydra")]
        out = refit.output_dir or str(sweep_dir / subdir / (refit.study_name or "best"))
        run_config(compose_run_config(overrides), output_dir=out, verbose=False)


def _refit_rows(
    sweep_dir: Path, base: dict[str, Any], subdir: str = "refit"
) -> list[dict[str, Any]]:
    from ltr_bench.refit_plan import find_refits

    rows = []
    for refit in find_refits(sweep_dir, subdir)[0]:  # the latest refit per study and seed
        data = refit.results
        rows += _fold_rows(
            data,
            {
                **base,
                "study": refit.path.relative_to(sweep_dir / subdir).parts[0],
                "mlflow_run_id": data.get("mlflow_run_id"),
            },
        )
    if not rows:
        raise RuntimeError(f"no refit results under {sweep_dir / subdir}")
    return rows
