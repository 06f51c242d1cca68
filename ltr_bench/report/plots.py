"""Figures of the report: p-value heatmaps (like the journal's Fig. 2-3) and CD diagrams.

Matplotlib with the non-interactive Agg backend; every function returns the Figure and, given a
path, saves it as PNG and closes it.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.colors import LinearSegmentedColormap, TwoSlopeNorm

from ltr_bench.stats import FriedmanResult

P_FLOOR = 1e-4  # smallest p-value on the colour scale
ARROW_ROW = "←"  # the row model is significantly better
ARROW_COL = "↑"  # the column model is significantly better


def _pvalue_cmap(alpha: float) -> tuple[LinearSegmentedColormap, TwoSlopeNorm]:
    """Reds below alpha (darker = smaller p), greys above; the norm works on log10(p)."""
    cmap = LinearSegmentedColormap.from_list(
        "pvalue", [(0.0, "#a50f15"), (0.5, "#fcbba1"), (0.5, "#dedede"), (1.0, "#8c8c8c")]
    )
    norm = TwoSlopeNorm(vmin=math.log10(P_FLOOR), vcenter=math.log10(alpha), vmax=0.0)
    return cmap, norm


def format_p(p: float) -> str:
    """p-value text for a cell: three decimals, or ``<.001``."""
    return "<.001" if p < 0.001 else f"{p:.3f}"


def pvalue_heatmap(
    pvalues: pd.DataFrame,
    diffs: pd.DataFrame,
    title: str,
    alpha: float = 0.05,
    path: str | Path | None = None,
) -> plt.Figure:
    """Heatmap of a symmetric p-value matrix with the better model marked.

    Each off-diagonal cell shows the p-value; significant ones (p < alpha) have a red background,
    italic bold text and an arrow pointing to the better model: ``←`` to the row's model,
    ``↑`` to the column's (column names are on top). ``diffs`` holds mean(row - column).
    Missing pairs show ``–``.
    """
    models = list(pvalues.index)
    k = len(models)
    p = pvalues.to_numpy(dtype=float)
    logp = np.log10(np.clip(p, P_FLOOR, 1.0))
    np.fill_diagonal(logp, np.nan)
    base_cmap, norm = _pvalue_cmap(alpha)
    cmap = base_cmap.with_extremes(bad="white")
    size = max(3.2, 0.95 * k + 2.2)
    fig, ax = plt.subplots(figsize=(size + 1.4, size))
    image = ax.imshow(np.ma.masked_invalid(logp), cmap=cmap, norm=norm)
    ax.set_xticks(range(k), labels=models, rotation=35, ha="left", rotation_mode="anchor")
    ax.set_yticks(range(k), labels=models)
    ax.xaxis.tick_top()
    ax.tick_params(which="both", length=0)
    ax.set_xticks(np.arange(-0.5, k, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, k, 1), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    for spine in ax.spines.values():
        spine.set_visible(False)
    d = diffs.to_numpy(dtype=float)
    for i in range(k):
        for j in range(k):
            if i == j:
                continue
            if np.isnan(p[i, j]):
                ax.text(j, i, "–", ha="center", va="center", color="0.4")
                continue
            significant = p[i, j] < alpha
            text = format_p(p[i, j])
            if significant:
                text = f"{ARROW_ROW if d[i, j] > 0 else ARROW_COL} {text}"
            ax.text(
                j,
                i,
                text,
                ha="center",
                va="center",
                fontsize=9,
                style="italic" if significant else "normal",
                fontweight="bold" if significant else "normal",
                color="white"
                if significant and p[i, j] < 10 ** ((math.log10(alpha) - 4) / 2)
                else "black",
            )
    ticks = [t for t in (1e-4, 1e-3, 1e-2, alpha, 0.2, 1.0) if P_FLOOR <= t <= 1.0]
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, ticks=np.log10(sorted(set(ticks))))
    bar.ax.set_yticklabels([f"{t:g}" for t in sorted(set(ticks))])
    bar.set_label("p-value (corrected t-test)")
    ax.set_title(title, pad=12, fontsize=10)
    fig.text(
        0.01,
        0.01,
        f"red/italic: p < {alpha:g}; arrow points to the better model "
        f"({ARROW_ROW} row, {ARROW_COL} column)",
        fontsize=7.5,
        color="0.3",
    )
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return _save(fig, path)


def cd_diagram(result: FriedmanResult, title: str, path: str | Path | None = None) -> plt.Figure:
    """Demsar-style critical-difference diagram.

    Average ranks on an axis from 1 (best, left) to k; each model's name hangs off its rank;
    the CD bar is drawn above the axis, and thick bars join models whose ranks differ by at
    most the CD (not significantly different by the Nemenyi test).
    """
    ranks = result.avg_ranks
    k = len(ranks)
    groups = result.groups()
    n_left = math.ceil(k / 2)
    rows = max(n_left, k - n_left)
    base = -0.25 - 0.12 * len(groups)  # y of the first name row
    bottom = base - 0.32 * (rows - 1) - 0.15
    fig, ax = plt.subplots(figsize=(7.5, 1.0 + 1.1 * (0.8 - bottom)))
    lo, hi = 1, max(k, 2)
    ax.set_xlim(lo - 0.9, hi + 0.9)
    ax.set_ylim(bottom, 0.8)
    ax.axis("off")
    ax.hlines(0, lo, hi, color="black", linewidth=1)
    label_every = 1 if k <= 12 else 2  # more ranks than fit side by side: every other one
    for r in range(lo, hi + 1):
        ax.vlines(r, 0, 0.08, color="black", linewidth=1)
        if (r - lo) % label_every == 0:
            ax.text(r, 0.12, str(r), ha="center", va="bottom", fontsize=9)
    for half in (0.5 + r for r in range(lo, hi)):
        ax.vlines(half, 0, 0.04, color="black", linewidth=0.7)
    # CD bar
    ax.hlines(0.55, lo, lo + result.cd, color="black", linewidth=1.5)
    ax.vlines([lo, lo + result.cd], 0.5, 0.6, color="black", linewidth=1.5)
    ax.text(lo + result.cd / 2, 0.62, f"CD = {result.cd:.2f}", ha="center", va="bottom", fontsize=9)
    # group bars just below the axis
    for g, members in enumerate(groups):
        y = -0.1 - 0.12 * g
        ax.hlines(
            y, ranks[members[0]] - 0.03, ranks[members[-1]] + 0.03, color="black", linewidth=3.5
        )
    for idx, (model, r) in enumerate(ranks.items()):
        left = idx < n_left
        row = idx if left else k - 1 - idx
        y = base - 0.32 * row
        x_text = lo - 0.5 if left else hi + 0.5
        ax.plot([r, r, x_text], [0, y, y], color="0.25", linewidth=0.9)
        ax.text(
            x_text - 0.05 if left else x_text + 0.05,
            y,
            f"{model} ({r:.2f})",
            ha="right" if left else "left",
            va="center",
            fontsize=9,
        )
    sub = (
        ("Friedman p < 0.001" if result.p < 0.001 else f"Friedman p = {result.p:.3f}")
        if not math.isnan(result.p)
        else "Friedman test needs >= 3 models"
    )
    ax.set_title(
        f"{title}\n{sub}; N = {result.n_blocks} folds; average rank, 1 = best", fontsize=10
    )
    fig.tight_layout()
    return _save(fig, path)


def table_bars(
    table, title: str, ylabel: str, path: str | Path | None = None, log_scale: bool = False
) -> plt.Figure:
    """Grouped bars of a :class:`~ltr_bench.report.tables.Table`: x = its columns, one bar per
    row, height = mean, error bar = +- SE (none for a single fold). The Table 1 chart (mean +- SE
    per model and dataset) and the run-time chart (Table 3, log scale)."""
    rows = [" / ".join(str(x) for x in labels if x) for labels in table.index]
    cols = [f"{g} {c}".strip() for g, c in table.columns]
    n_rows, n_cols = len(rows), len(cols)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.1 * n_cols * max(1, n_rows) ** 0.5 + 2), 3.8))
    width = 0.8 / max(1, n_rows)
    x = np.arange(n_cols)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, label in enumerate(rows):
        means = table.mean[i]
        ses = np.where(np.isnan(table.se[i]), 0.0, table.se[i])
        ax.bar(
            x + (i - (n_rows - 1) / 2) * width,
            np.nan_to_num(means),
            width,
            yerr=ses,
            capsize=3,
            label=label,
            color=colors[i % len(colors)],
        )
    ax.set_xticks(x)
    ax.set_xticklabels(cols, rotation=15 if n_cols > 3 else 0, fontsize=8)
    ax.set_ylabel(ylabel)
    if log_scale:
        ax.set_yscale("log")
    else:
        finite = table.mean[np.isfinite(table.mean)]
        if finite.size and finite.min() > 0.3:
            top = float(np.nanmax(table.mean + np.nan_to_num(table.se)))
            ax.set_ylim(max(0.0, float(finite.min()) - 0.15), top + 0.03)  # room above a 1.0 bar
    ax.set_title(title, fontsize=10)
    ax.legend(
        fontsize=7, ncol=min(4, max(1, n_rows)), loc="upper center", bbox_to_anchor=(0.5, -0.18)
    )
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def _save(fig: plt.Figure, path: str | Path | None) -> plt.Figure:
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
        plt.close(fig)
    return fig
