"""ECML Fig. 3 / journal Fig. 6: DirectRanker's output r(d_n, d_n+1) for successive documents of a
list sorted by the DirectRanker, and the classification idea of ECML Sect. 5.3 / journal 5.5.

Per panel (synthetic data, or a query of a LETOR dataset) and repetition: fit the model, sort an
unlabeled list by it and compute r between neighbours (``DirectRanker.compare``). r peaks where
the relevance class changes. Classification without labels: the ``C - 1`` highest peaks
(``scipy.signal.find_peaks``, at least ``peak_distance`` apart; ``C`` = number of classes) split
the sorted list into ``C`` classes, the top segment being the highest class. The thresholds in
score space (midway between the two documents at a peak) then classify other documents as well.

Reported per repetition: class accuracy on the sorted list and on the held-out test documents
(thresholds from the list), next to two references that use the labels: the majority-class
share (chance) and the accuracy of cutting the sorted list at the true class sizes (oracle).

Outputs: ``accuracy.csv`` (per panel and repetition), ``neighbours_<panel>.csv`` (the plotted
sequence of repetition 0), ``<name>_<panel>.png``, ``summary.csv``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.transforms import binarize_labels
from ltr_bench.experiments.common import ExperimentRun, compose_run_config, plain
from ltr_bench.experiments.results_key import spec_classes
from ltr_bench.experiments.synthetic_sensitivity import (
    SOURCE_OPTIONS,
    build_source,
    format_overrides,
)
from ltr_bench.stats import mean_se


def neighbour_outputs(
    ranker: Any, features: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, scores_sorted, r)``: the list sorted by the ranker (best first) and
    ``r[n] = r(d_n, d_n+1)`` for its successive documents."""
    scores = np.asarray(ranker.score(_as_queryset(features)), dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    x = features[order]
    r = np.asarray(ranker.compare(x[:-1], x[1:]), dtype=np.float64).reshape(-1)
    return order, scores[order], r


def _as_queryset(features: np.ndarray) -> QuerySet:
    n = features.shape[0]
    return QuerySet(
        np.ascontiguousarray(features, dtype=np.float32),
        np.zeros(n, np.int32),
        np.zeros(n, np.int64),
        np.array([0, n], dtype=np.int64),
    )


def find_boundaries(r: np.ndarray, n_classes: int, distance: int = 1) -> np.ndarray:
    """Positions ``b`` (sorted) of the ``n_classes - 1`` highest peaks of ``r``; a boundary at ``b``
    separates list positions ``<= b`` from ``> b``."""
    from scipy.signal import find_peaks

    if n_classes < 2 or r.size == 0:
        return np.array([], dtype=np.int64)
    padded = np.concatenate([[-np.inf], r, [-np.inf]])  # so the list's ends can be peaks too
    peaks, props = find_peaks(padded, distance=max(1, int(distance)), height=-np.inf)
    peaks = peaks - 1
    top = peaks[np.argsort(-props["peak_heights"], kind="stable")[: n_classes - 1]]
    return np.sort(top)


def classes_from_boundaries(n: int, boundaries: np.ndarray, n_classes: int) -> np.ndarray:
    """Class per position of a sorted list of ``n``: ``n_classes - 1`` before the first boundary,
    one less after each further boundary."""
    positions = np.arange(n)
    return (n_classes - 1) - np.searchsorted(boundaries, positions, side="left")


def classes_from_thresholds(
    scores: np.ndarray, thresholds: np.ndarray, n_classes: int
) -> np.ndarray:
    """Class of documents from their scores: how many thresholds they exceed, shifted so the
    highest class is ``n_classes - 1``."""
    return (n_classes - 1 - len(thresholds)) + (scores[:, None] > thresholds[None, :]).sum(axis=1)


def oracle_classes(labels_sorted: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The sorted list cut at the true class sizes (highest class first): a labelled reference."""
    out = np.empty_like(labels_sorted)
    start = 0
    for c in sorted(classes, reverse=True):
        size = int((labels_sorted == c).sum())
        out[start : start + size] = c
        start += size
    return out


@spec_classes(
    deciding=[*SOURCE_OPTIONS, "panels", "peak_distance"],
    presentation=["x_scale", "plot_x"],  # the synthetic base's plot options, unused here
)
def run(exp: ExperimentRun) -> pd.DataFrame:
    """The driver (``_target_`` of the fig3 experiment)."""
    from ltr_bench.runner import fit_and_score

    spec = exp.spec
    panels = plain(spec.panels)
    models = plain(spec.models)
    base = [
        *plain(spec.get("run_overrides") or []),
        f"seed={exp.cfg.seed}",
        f"threads={exp.cfg.threads}",
    ]
    reps = int(spec.repetitions)
    rows: list[dict[str, Any]] = []
    bar = exp.progress(len(panels) * len(models) * reps)
    for panel, pspec in panels.items():
        params = {**plain(spec.data), **(pspec.get("data") or {})}
        source = build_source(params)
        fmt = {
            **plain(spec.get("model_params") or {}),
            **{k: v for k, v in params.items() if not k.startswith("_")},
        }
        for model, overrides in models.items():
            cfg = compose_run_config([*base, *source.overrides, *format_overrides(overrides, fmt)])
            for rep in range(reps):
                rng = np.random.default_rng([int(exp.cfg.seed), rep, 17])
                train, test = source.load(rep)
                if pspec.get("train_binary"):
                    train = binarize_labels(train, source.relevance_threshold)
                fitted = fit_and_score(cfg, train, test)
                ranker, te = fitted.ranker, fitted.test
                in_list = _choose_list(te, pspec, rng)
                row, seq = _classify(ranker, te, in_list, int(spec.peak_distance), pspec)
                rows.append({"panel": panel, "model": model, "repetition": rep, **row})
                if rep == 0:
                    exp.write_csv(seq, f"neighbours_{panel}.csv")
                    _plot(exp, seq, row, panel, model)
                bar.set_postfix_str(
                    f"{panel} {model} rep {rep}: accuracy {row['accuracy_list']:.3f}", refresh=False
                )
                bar.update(1)
    bar.close()
    results = pd.DataFrame(rows)
    exp.write_csv(results, "accuracy.csv")
    summary = summarise(results)
    for _, s in summary.iterrows():
        exp.log_metrics(
            {
                f"accuracy_list {s['panel']} {s['model']}": s["accuracy_list"],
                f"accuracy_test {s['panel']} {s['model']}": s["accuracy_test"],
            }
        )
    return summary


def _choose_list(test: QuerySet, pspec: dict[str, Any], rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of the test documents forming the sorted list: a random sample of
    ``list_size`` documents, or (``list: largest_query``) the test query with most documents."""
    mask = np.zeros(test.n_docs, dtype=bool)
    if pspec.get("list") == "largest_query":
        q = int(np.argmax(test.query_lengths))
        mask[test.offsets[q] : test.offsets[q + 1]] = True
    else:
        size = min(int(pspec.get("list_size", 500)), test.n_docs)
        mask[rng.choice(test.n_docs, size=size, replace=False)] = True
    return mask


def _classify(
    ranker: Any, test: QuerySet, in_list: np.ndarray, distance: int, pspec: dict[str, Any]
) -> tuple[dict[str, Any], pd.DataFrame]:
    x, y = test.features[in_list], test.labels[in_list]
    order, scores_sorted, r = neighbour_outputs(ranker, x)
    y_sorted = y[order]
    classes = np.unique(y)
    n_classes = int(pspec.get("n_classes") or len(classes))
    bounds = find_boundaries(r, n_classes, distance)
    pred_list = classes_from_boundaries(len(y_sorted), bounds, n_classes)
    thresholds = np.sort((scores_sorted[bounds] + scores_sorted[bounds + 1]) / 2.0)
    rest = ~in_list
    acc_test = float("nan")
    if rest.any():
        s_rest = np.asarray(ranker.score(_as_queryset(test.features[rest])), dtype=np.float64)
        acc_test = float(
            np.mean(classes_from_thresholds(s_rest, thresholds, n_classes) == test.labels[rest])
        )
    true_bounds = np.flatnonzero(np.diff(y_sorted) != 0)
    row = {
        "n_list": int(len(y_sorted)),
        "n_classes": n_classes,
        "accuracy_list": float(np.mean(pred_list == y_sorted)),
        "accuracy_test": acc_test,
        "chance": float(np.max(np.bincount(y_sorted)) / len(y_sorted)),
        "oracle": float(np.mean(oracle_classes(y_sorted, classes) == y_sorted)),
        "boundaries": " ".join(str(int(b)) for b in bounds),
        "r_at_peaks": float(np.mean(r[bounds])) if bounds.size else float("nan"),
        "r_median": float(np.median(r)) if r.size else float("nan"),
        "label_changes": int(true_bounds.size),
    }
    seq = pd.DataFrame(
        {
            "n": np.arange(len(r)),
            "r": r,
            "label_n": y_sorted[:-1],
            "label_n1": y_sorted[1:],
            "predicted_n": pred_list[:-1],
            "boundary": np.isin(np.arange(len(r)), bounds),
        }
    )
    return row, seq


def summarise(results: pd.DataFrame) -> pd.DataFrame:
    out = []
    for (panel, model), g in results.groupby(["panel", "model"], sort=False):
        rec: dict[str, Any] = {"panel": panel, "model": model, "repetitions": len(g)}
        for col in ("accuracy_list", "accuracy_test", "chance", "oracle"):
            m, se, _ = mean_se(g[col].to_numpy())
            rec[col], rec[f"{col}_se"] = m, se
        out.append(rec)
    return pd.DataFrame(out)


def _plot(
    exp: ExperimentRun, seq: pd.DataFrame, row: dict[str, Any], panel: str, model: str
) -> None:
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    labels = sorted(seq["label_n"].unique())
    cmap = plt.get_cmap("viridis", max(2, len(labels)))
    for i, c in enumerate(labels):
        part = seq[seq["label_n"] == c]
        ax.scatter(part["n"], part["r"], s=6, color=cmap(i), label=f"class {c}")
    for b in seq.loc[seq["boundary"], "n"]:
        ax.axvline(b + 0.5, color="red", lw=0.8, ls="--", alpha=0.7)
    ax.set_xlabel("n (position in the list sorted by the model)")
    ax.set_ylabel("r(d_n, d_n+1)")
    ax.set_title(
        f"{exp.spec.get('title', exp.name)}\n{panel}, {model}: class accuracy from the "
        f"peaks {row['accuracy_list']:.3f} (red: thresholds found)",
        fontsize=8,
    )
    ax.legend(fontsize=7, markerscale=2, title="class of d_n", title_fontsize=7)
    exp.save_figure(fig, f"{exp.name}_{panel}.png")
