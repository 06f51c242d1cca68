"""What a run produced: per-fold and aggregated results, the printed table and ``results.json``.

:class:`FoldResult` holds one outer split (``final``) or one inner fold (``inner_cv``);
:func:`aggregate` turns them into a :class:`RunResult` (mean and SE over folds, summed run times,
the objective the sweeper optimises). The same numbers feed the results table, the run's summary
metrics in MLflow and ``results.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.machine import facts as machine
from ltr_bench.tracking import RunTracker


class TrialFailed(RuntimeError):
    """A sweep trial that produced no usable objective (fit raised, NaN scores or metric).

    The sweeper records the trial as failed and goes on; the trial's MLflow run is FAILED.
    """


@dataclass
class FoldResult:
    """Metrics and run times of one outer split (``final``) or one inner fold (``inner_cv``)."""

    fold: int
    name: str
    metrics: dict[str, dict[str, float]]  # split -> metric name -> mean over queries
    times: dict[str, float]  # time_read_s, time_fit_s, time_eval_s
    n_train_queries: int
    n_test_queries: int | None
    mlflow_run_id: str | None = None
    model_uri: str | None = None  # runs:/<fold run id>/model when a model was logged


@dataclass
class RunResult:
    """What one job produced; ``objective`` goes back to the sweeper."""

    mode: str  # "final" | "inner_cv"
    objective: float | None
    objective_name: str
    folds: list[FoldResult]
    objective_se: float | None = None  # SE of the objective over (inner) folds; NaN/None: one fold
    mean: dict[str, dict[str, float]] = field(default_factory=dict)
    se: dict[str, dict[str, float]] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)  # sums over folds
    mlflow_run_id: str | None = None
    results_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def metric_names(cfg: DictConfig) -> list[str]:
    """The metrics a run reports: ``eval.metrics.names`` plus the objective's metric."""
    names = [str(n) for n in cfg.eval.metrics.names]
    obj = str(cfg.objective.metric)
    return names if obj in names else names + [obj]


def metric_options(cfg: DictConfig) -> dict[str, Any]:
    """The evaluation's metric options (``metrics.evaluate``'s keywords): what a run reports
    and how, used to score its splits and saved with its model."""
    m = cfg.eval.metrics
    return {
        "names": metric_names(cfg),
        "relevance_threshold": m.get("relevance_threshold", 1),
        "no_relevant": m.get("no_relevant", "drop"),
    }


def aggregate(mode: str, cfg: DictConfig, folds: list[FoldResult]) -> RunResult:
    """Mean and SE of every metric over ``folds``, summed run times and the objective."""
    from ltr_bench.stats import mean_se

    mean: dict[str, dict[str, float]] = {}
    se: dict[str, dict[str, float]] = {}
    splits = sorted(
        {s for f in folds for s in f.metrics},
        key=lambda s: ("vali", "test").index(s) if s in ("vali", "test") else 9,
    )
    for s in splits:
        names = [n for n in folds[0].metrics.get(s, {})]
        mean[s], se[s] = {}, {}
        for n in names:
            m, e, _ = mean_se([f.metrics.get(s, {}).get(n, math.nan) for f in folds])
            mean[s][n], se[s][n] = m, e
    times = {
        k: float(sum(f.times.get(k, 0.0) for f in folds))
        for k in (keys.TIME_READ, keys.TIME_FIT, keys.TIME_EVAL)
    }
    obj_metric = str(cfg.objective.metric)
    obj_split = "vali" if mode == "inner_cv" else str(cfg.objective.split)
    objective = mean.get(obj_split, {}).get(obj_metric)
    obj_name = f"{'inner-CV ' if mode == 'inner_cv' else ''}{obj_split} {obj_metric}"
    objective_se = se.get(obj_split, {}).get(obj_metric)
    return RunResult(mode, objective, obj_name, folds, objective_se, mean, se, times)


def summary_metrics(
    result: RunResult, split_keys: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The metrics a parent (``protocol``) or ``trial`` run logs: mean and SE of every metric
    per split, the summed run times and the objective. ``split_keys`` renames a split in the
    metric keys (a trial logs its inner-CV ``vali`` means as ``cv``)."""
    names = split_keys or {}
    summary: dict[str, Any] = {
        keys.metric_key(names.get(s, s), n): v for s, d in result.mean.items() for n, v in d.items()
    }
    summary.update(
        {
            keys.metric_key(names.get(s, s), n) + keys.SE_SUFFIX: v
            for s, d in result.se.items()
            for n, v in d.items()
        }
    )
    summary.update(result.times)
    summary[keys.OBJECTIVE] = result.objective
    return summary


def format_results(cfg: DictConfig, result: RunResult) -> str:
    """The results table: per fold (if several) and mean (SE) of every metric, plus run times."""
    from ltr_bench.stats import format_mean_se

    names = metric_names(cfg)
    width = max(8, max(len(n) for n in names) + 1)
    several = len(result.folds) > 1
    cell = 11 if several else width
    lines = [f"{'':<22}" + "".join(f"{n:>{cell}}" for n in names)]
    if several:
        for f in result.folds:
            for s, d in f.metrics.items():
                lines.append(
                    f"{f.name[-14:] + ' ' + s:<22}"
                    + "".join(f"{d.get(n, math.nan):>{cell}.4f}" for n in names)
                )
        for s in result.mean:
            lines.append(
                f"{'mean(SE) ' + s:<22}"
                + "".join(
                    f"{format_mean_se(result.mean[s][n], result.se[s][n]):>{cell}}" for n in names
                )
            )
    else:
        for s, d in result.folds[0].metrics.items():
            lines.append(f"{s:<22}" + "".join(f"{d.get(n, math.nan):>{cell}.4f}" for n in names))
    t = result.times
    per = f" (sum over {len(result.folds)} folds)" if several else ""
    lines.append(
        f"run times{per}: read {t[keys.TIME_READ]:.2f} s, fit {t[keys.TIME_FIT]:.2f} s, "
        f"eval {t[keys.TIME_EVAL]:.2f} s"
    )
    if result.objective is not None:
        lines.append(f"objective ({result.objective_name}): {result.objective:.4f}")
    return "\n".join(lines)


def short_summary(metrics: Mapping[str, Mapping[str, float]], cfg: DictConfig) -> str:
    """``vali ndcg@10=0.7461, test ndcg@10=0.7588``: the objective metric of one fold."""
    obj = str(cfg.objective.metric)
    parts = []
    for s in ("vali", "test"):
        if s in metrics:
            parts.append(f"{s} {obj}={metrics[s].get(obj, math.nan):.4f}")
    return ", ".join(parts)


def results_json(cfg: DictConfig, result: RunResult, tracker: RunTracker) -> str:
    """``results.json``: the result, where it is tracked, and the resolved config."""
    out = result.to_json()
    out["mlflow"] = {
        "tracking_uri": tracker.tracking_uri,
        "experiment_name": tracker.experiment_name,
        "run_id": result.mlflow_run_id,
    }
    out["config"] = OmegaConf.to_container(cfg, resolve=True)
    out["machine"] = machine.facts(cfg.get("trainer", {}).get("accelerator"), cfg.get("threads"))
    return json.dumps(out, indent=2, default=_json_default)


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)
