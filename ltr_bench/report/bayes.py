"""How sure a comparison is: the Bayesian correlated t-test per pair of models, and per-query tests.

Beyond the papers' Nadeau-Bengio p-values, the report gives for every pair of models the posterior
probabilities that A is better, that A and B are practically equivalent (their mean difference lies
within the region of practical equivalence, ``rope``, default 0.01 NDCG@10) and that B is better
(Corani & Benavoli 2015, :func:`ltr_bench.stats.bayesian_correlated_ttest`), as a table and as a
plot of stacked bars. For one split, :func:`per_query_section` tests every pair on the per-query
values (randomization and paired t-test, Holm-adjusted) and counts wins / ties / losses against
a baseline.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pandas as pd

from ltr_bench.stats import pairwise_bayesian_ttests, per_query_comparison, win_tie_loss

COLOURS = {"p_a_better": "#2b8cbe", "p_equivalent": "#bdbdbd", "p_b_better": "#e6550d"}
DEFAULT_ROPE = 0.01


def bayes_table(
    scores: pd.DataFrame, ratio: float | pd.Series, rope: float = DEFAULT_ROPE
) -> pd.DataFrame:
    """Posterior probabilities for every pair of models (rows of ``scores``; columns = folds)."""
    return pairwise_bayesian_ttests(scores, ratio, rope=rope)


def bayes_markdown(table: pd.DataFrame, rope: float) -> str:
    """The table as Markdown: ``A | B | P(A better) | P(equivalent) | P(B better) | mean A - B``."""
    lines = [
        f"| A | B | P(A better) | P(within ±{rope:g}) | P(B better) | mean A − B | folds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table.itertuples(index=False):
        lines.append(
            f"| {r.a} | {r.b} | {r.p_a_better:.3f} | {r.p_equivalent:.3f} | {r.p_b_better:.3f} "
            f"| {r.mean_diff:+.4f} | {r.n} |"
        )
    return "\n".join(lines) + "\n"


def bayes_plot(
    table: pd.DataFrame, title: str, rope: float, path: str | Path | None = None
) -> plt.Figure:
    """One stacked horizontal bar per pair: P(A better) | P(equivalent) | P(B better)."""
    n = max(len(table), 1)
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * n + 1.4))
    labels = [f"{a} vs {b}" for a, b in zip(table["a"], table["b"])]
    left = pd.Series(0.0, index=table.index)
    names = {
        "p_a_better": "A better",
        "p_equivalent": f"equivalent (±{rope:g})",
        "p_b_better": "B better",
    }
    for column, colour in COLOURS.items():
        ax.barh(labels, table[column], left=left, color=colour, label=names[column], height=0.6)
        for y, (x0, w) in enumerate(zip(left, table[column])):
            if w >= 0.08:
                ax.text(x0 + w / 2, y, f"{w:.2f}", ha="center", va="center", fontsize=8)
        left = left + table[column]
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("posterior probability (Bayesian correlated t-test)")
    ax.set_title(title, fontsize=10, pad=24)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, fontsize=8, frameon=False)
    fig.tight_layout()
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return fig


def per_query_section(
    values: pd.DataFrame, baseline: str, *, tol: float = 0.0, n_resamples: int = 9999, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Per-query tests for one split: (pairwise tests, win/tie/loss vs ``baseline``, Markdown).

    ``values``: one row per query, one column per model (e.g. NDCG@10 of each test query).
    """
    tests = per_query_comparison(values, n_resamples=n_resamples, seed=seed)
    wtl = win_tie_loss(values, baseline, tol=tol)
    lines = [
        "| A | B | queries | mean A − B | p randomization (Holm) | p paired t (Holm) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in tests.itertuples(index=False):
        lines.append(
            f"| {r.a} | {r.b} | {r.n_queries} | {r.mean_diff:+.4f} | {r.p_randomization:.4f} "
            f"({r.p_randomization_holm:.4f}) | {r.p_ttest:.4f} ({r.p_ttest_holm:.4f}) |"
        )
    lines += [
        "",
        f"Wins / ties / losses per query against {baseline} (tie: |difference| <= {tol:g}):",
        "",
        "| model | win | tie | loss |",
        "| --- | --- | --- | --- |",
    ]
    lines += [f"| {m} | {r.win} | {r.tie} | {r.loss} |" for m, r in wtl.iterrows()]
    return tests, wtl, "\n".join(lines) + "\n"
