"""Sensitivity of rankers to one data property: ECML Fig. 2 a-d (journal Fig. 4) and journal
Fig. 5 (training-set size, label ratio).

For every series (a curve: fixed data/model parameters), every value of the varied parameter
``x`` and every repetition (a newly generated dataset, or another fold), the driver loads the data
from the experiment's source (:mod:`ltr_bench.experiments.sources`), fits each model (built from
its composed run config with ``hydra.utils.instantiate``; preprocessing fitted on train), scores
the test set and records the source's value (Sect. 4.5: mean NDCG@20 over 50 random subsets of
50-150 test documents). A point is the mean and standard error over the repetitions.

Outputs: ``results.csv`` (one row per repetition and model), ``summary.csv`` (mean, SE per point),
``<name>.png`` (error-bar plot).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from ltr_bench.experiments.common import ExperimentRun, compose_run_config, plain
from ltr_bench.experiments.results_key import spec_classes
from ltr_bench.experiments.sources import relevant_ratio
from ltr_bench.stats import mean_se


def format_overrides(overrides: list[str], params: dict[str, Any]) -> list[str]:
    """Model overrides with ``{name}`` placeholders filled from the point's data parameters
    (e.g. ``model.hidden_sizes=[70,{n_classes}]``)."""
    return [str(o).format(**params) for o in overrides]


def build_source(data: dict[str, Any]) -> Any:
    from hydra.utils import instantiate

    return instantiate(data, _convert_="all")


class _Configs:
    """Composed run configs, cached by their overrides (each point of a curve repeats them)."""

    def __init__(self, base: list[str]) -> None:
        self.base = base
        self.cache: dict[tuple[str, ...], DictConfig] = {}

    def get(self, overrides: list[str]) -> DictConfig:
        key = tuple(self.base + overrides)
        if key not in self.cache:
            self.cache[key] = compose_run_config(list(key))
        return self.cache[key]


def fit_and_score(
    cfg: DictConfig,
    source: Any,
    train: Any,
    test: Any,
    rng: np.random.Generator,
    prepared: dict[str, Any],
) -> tuple[float, float]:
    """(value, fit seconds) of the model of ``cfg`` (the runner's fit -> score step);
    preprocessing shared across models with the same preprocessing config (``prepared`` caches
    it per point and repetition)."""
    from ltr_bench.runner import fit_and_score as fit_score

    fitted = fit_score(cfg, train, test, cache=prepared)
    if not np.all(np.isfinite(fitted.scores)):
        return float("nan"), fitted.time_fit_s
    return source.score(cfg, fitted.scores, fitted.test, rng), fitted.time_fit_s


#: The options of the synthetic base (conf/_experiment_synthetic.yaml) that decide the runs of
#: any driver over its data sources.
SOURCE_OPTIONS = ("data", "models", "model_params", "run_overrides", "repetitions")


@spec_classes(
    deciding=[*SOURCE_OPTIONS, "x", "values", "series"],
    presentation=["x_label", "x_scale", "plot_x"],
)
def run(exp: ExperimentRun) -> pd.DataFrame:
    """The driver (``_target_`` of fig2*/fig5* experiments)."""
    spec = exp.spec
    x_key = str(spec.x)
    values = list(plain(spec["values"]))
    series = plain(spec.series) or {"": {}}
    models = plain(spec.models)
    reps = int(spec.repetitions)
    base = [
        *plain(spec.get("run_overrides") or []),
        f"seed={exp.cfg.seed}",
        f"threads={exp.cfg.threads}",
    ]
    configs = _Configs(base)
    total = len(series) * len(values) * reps * len(models)
    rows: list[dict[str, Any]] = []
    bar = exp.progress(total)
    for label, series_params in series.items():
        for xi, x in enumerate(values):
            params = {**plain(spec.data), **(series_params or {}), x_key: x}
            source = build_source(params)
            fmt = {
                **plain(spec.get("model_params") or {}),
                **{k: v for k, v in params.items() if not k.startswith("_")},
            }
            for rep in range(reps):
                train, test = source.load(rep)
                ratio = relevant_ratio(
                    train.labels, getattr(source, "keep_classes", None), source.relevance_threshold
                )
                prepared: dict[str, Any] = {}
                for model, overrides in models.items():
                    cfg = configs.get([*source.overrides, *format_overrides(overrides, fmt)])
                    rng = np.random.default_rng([int(exp.cfg.seed), xi, rep, 13])
                    value, fit_s = fit_and_score(cfg, source, train, test, rng, prepared)
                    rows.append(
                        {
                            "series": label,
                            x_key: x,
                            "model": model,
                            "repetition": rep,
                            "train_docs": train.n_docs,
                            "relevant_ratio": ratio,
                            source.metric: value,
                            "time_fit_s": fit_s,
                        }
                    )
                    bar.set_postfix_str(
                        f"{label} {x_key}={x} {model} rep {rep}: {source.metric}={value:.3f}",
                        refresh=False,
                    )
                    bar.update(1)
            _log_point(exp, rows, label, x_key, x, source.metric, xi)
    bar.close()
    results = pd.DataFrame(rows)
    exp.write_csv(results, "results.csv")
    summary = summarise(results, x_key, source.metric)
    plot(exp, summary, x_key, source.metric)
    return summary


def summarise(results: pd.DataFrame, x_key: str, metric: str) -> pd.DataFrame:
    """Mean, standard error and count over repetitions per (series, x, model)."""
    out = []
    for (label, x, model), g in results.groupby(["series", x_key, "model"], sort=False):
        m, se, n = mean_se(g[metric].to_numpy())
        out.append(
            {
                "series": label,
                x_key: x,
                "model": model,
                "train_docs": int(round(g["train_docs"].mean())),
                "relevant_ratio": g["relevant_ratio"].mean(),
                metric: m,
                f"{metric}_se": se,
                "repetitions": n,
                "time_fit_s": g["time_fit_s"].mean(),
            }
        )
    return pd.DataFrame(out)


def _log_point(
    exp: ExperimentRun,
    rows: list[dict[str, Any]],
    label: str,
    x_key: str,
    x: Any,
    metric: str,
    step: int,
) -> None:
    frame = pd.DataFrame([r for r in rows if r["series"] == label and r[x_key] == x])
    for model, g in frame.groupby("model"):
        name = " ".join(p for p in (metric, str(model), str(label)) if p)
        m, _, _ = mean_se(g[metric].to_numpy())
        exp.tracker.log_metrics(exp.run_id, {name: m}, step=step)


def plot(exp: ExperimentRun, summary: pd.DataFrame, x_key: str, metric: str) -> None:
    """Error-bar plot: one curve per (series, model)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    spec = exp.spec
    x_col = str(spec.get("plot_x") or x_key)
    fig, ax = plt.subplots(figsize=(6, 4))
    several_models = summary["model"].nunique() > 1
    for (label, model), g in summary.groupby(["series", "model"], sort=False):
        name = ", ".join(str(p) for p in ((model if several_models else None), label) if p) or model
        ax.errorbar(
            g[x_col],
            g[metric],
            yerr=g[f"{metric}_se"].fillna(0.0),
            marker="o",
            ms=4,
            capsize=3,
            label=name,
        )
    ax.set_xscale(str(spec.get("x_scale") or "linear"))
    ax.set_xlabel(str(spec.get("x_label") or x_col))
    ax.set_ylabel(metric.upper().replace("NDCG", "NDCG"))
    ax.set_title(str(spec.get("title") or exp.name), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    exp.save_figure(fig, f"{exp.name}.png")
