"""Table 1 of both papers: per protocol variant, dataset and model an Optuna sweep through the
real CLI (``ltr-bench -m search=<model> ...``, one study per outer fold or hold-out split), the
refit of every study's best config (what ``ltr-bench refit_best=<sweep dir>`` does, run in this
process: one tracked ``final`` run per study), then the report (``make_report``) over the
variant's MLflow experiment (Table 1, corrected t-test p-values, Friedman/Nemenyi, run times). A
row is a model config or a labelled variant of one (a model plus overrides,
:mod:`~ltr_bench.experiments.model_variants`); ``refits.csv`` adds each sweep's time
(``time_sweep_s``, :mod:`~ltr_bench.experiments.sweep_clock`). The cells' tables and figures are
drawn as for Tables 2 and 3 (:mod:`~ltr_bench.experiments.letor_tables`).
"""

from __future__ import annotations

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
from ltr_bench.experiments.letor_tables import (
    check_datasets,
    fold_rows,
    format_table,
    markdown_table,
    plot_cells,
    report_into,
    with_user,
)
from ltr_bench.experiments.model_variants import model_entries
from ltr_bench.experiments.results_key import spec_classes
from ltr_bench.experiments.sweep_clock import SweepClock


def _cli(args: list[str], log: Path, in_process: bool = False) -> None:
    """``ltr-bench <args>``, output into ``log`` (:func:`ltr_bench.experiments.command_in_process.ltr_bench`);
    a failure raises with its tail."""
    from ltr_bench.experiments.command_in_process import ltr_bench

    code = ltr_bench(args, log, in_process)
    if code != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        message = f"`ltr-bench {' '.join(args)}` failed (exit {code}; log {log}): " + " / ".join(
            tail
        )
        raise UserError(message) if code == 2 else RuntimeError(message)


@spec_classes(
    deciding=[
        "datasets",
        "models",
        "model_variants",
        "model_overrides",
        "n_trials",
        "sweep_overrides",
        "variants",
        "run_variants",
        "metrics",  # the columns of table1.csv
        "cell_overrides",
        "scale_overrides",
        "report_args",
        "extra_refits",
    ],
    execution=["n_jobs", "launcher_overrides"],
)
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
                            *with_user(own),
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
        report_into(
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
    exp.write_text(markdown_table(table), f"{exp.name}.md")
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
        rows += fold_rows(
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
