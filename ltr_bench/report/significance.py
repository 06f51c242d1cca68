"""Pairwise corrected t-tests and Friedman/Nemenyi per (setting, dataset, metric) from fold runs.

The t-test pairs the per-fold (per-split) scores of two models and corrects the variance with
``n_test / n_train`` taken from each fold run's params (``data.n_test_queries`` /
``data.n_train_queries``), so the LETOR-folds and hold-out protocols are handled alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ltr_bench import tracking_keys as tk
from ltr_bench.report.tables import metric_label, setting_label
from ltr_bench.stats import FriedmanResult, friedman_nemenyi, pairwise_corrected_ttests


@dataclass
class Comparison:
    """Everything tested for one (protocol, eval, dataset, metric)."""

    protocol: str
    eval: str
    dataset: str
    metric: str  # e.g. "ndcg@10"
    scores: pd.DataFrame  # models x folds
    ratio: float  # mean n_test / n_train used by the corrected t-test
    pvalues: pd.DataFrame | None = None  # None when skipped
    diffs: pd.DataFrame | None = None  # mean(row - column) over common folds
    friedman: FriedmanResult | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def title(self) -> str:
        return f"{self.dataset}, {metric_label(self.metric)} ({setting_label(self.protocol, self.eval)})"

    @property
    def slug(self) -> str:
        """File-name stem: ``letor_folds_paper_mq2008_ndcg_at_10``."""
        name = tk.metric_key("x", self.metric).removeprefix("x/")
        return "_".join(_safe(s) for s in (self.protocol, self.eval, self.dataset, name))

    def means(self) -> pd.Series:
        return self.scores.mean(axis=1, skipna=True)


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in str(text))


def fold_ratio(runs: pd.DataFrame) -> tuple[pd.Series, str | None]:
    """Per-fold ``n_test / n_train`` from the runs' params, and a note if a fallback was used.

    Without the params the ratio of k-fold cross-validation, ``1 / (k - 1)``, is assumed.
    """
    per_run = runs["n_test"] / runs["n_train"]
    ratio = per_run.groupby(runs["fold"]).mean()
    if ratio.isna().any() or ratio.empty:
        k = max(int(runs["fold"].nunique()), 2)
        fallback = 1.0 / (k - 1)
        return (
            ratio.fillna(fallback) if not ratio.empty else pd.Series(dtype=float),
            f"params {tk.PARAM_N_TRAIN_QUERIES}/{tk.PARAM_N_TEST_QUERIES} missing for some folds; "
            f"assumed n_test/n_train = 1/(k-1) = {fallback:.3f} there",
        )
    return ratio, None


def compare(
    frame: pd.DataFrame, metrics: list[str], split: str = "test", alpha: float = 0.05
) -> list[Comparison]:
    """Run the corrected t-tests and Friedman/Nemenyi for every setting, dataset and metric."""
    out = []
    groups = frame.groupby(["protocol", "eval", "dataset"], sort=True)
    for (protocol, eval_name, dataset), runs in groups:
        ratio, ratio_note = fold_ratio(runs)
        for metric in metrics:
            key = tk.metric_key(split, metric)
            if key not in runs:
                scores = pd.DataFrame(index=sorted(runs["model"].unique()))
            else:
                scores = runs.pivot_table(
                    index="model", columns="fold", values=key, aggfunc="first"
                )
                scores = scores.reindex(sorted(runs["model"].unique()))
            scores = scores.dropna(how="all")
            used_ratio = (
                float(ratio.reindex(scores.columns).mean()) if len(scores.columns) else math.nan
            )
            comp = Comparison(protocol, eval_name, dataset, metric, scores, used_ratio)
            if ratio_note:
                comp.notes.append(ratio_note)
            if len(scores.index) < 2:
                comp.notes.append(
                    f"tests skipped: {len(scores.index)} model(s) with values (need at least 2)"
                )
            else:
                comp.pvalues, comp.diffs = pairwise_corrected_ttests(scores, ratio)
                complete = int(scores.notna().all(axis=0).sum())
                if complete < len(scores.columns):
                    comp.notes.append(
                        f"Friedman/Nemenyi use the {complete} of {len(scores.columns)} folds where "
                        "every model has a value"
                    )
                if complete >= 2:
                    comp.friedman = friedman_nemenyi(scores, alpha=alpha)
                else:
                    comp.notes.append("Friedman/Nemenyi skipped: fewer than 2 complete folds")
            out.append(comp)
    return out


def friedman_summary(comparisons: list[Comparison]) -> str:
    """Markdown text: Friedman statistic, average ranks, CD and significant Nemenyi pairs."""
    lines = ["# Friedman test and Nemenyi post-hoc (critical difference)", ""]
    for c in comparisons:
        lines.append(f"## {c.title}")
        lines.append("")
        f = c.friedman
        if f is None:
            lines += [f"- {n}" for n in c.notes] + [""]
            continue
        if math.isnan(f.statistic):
            lines.append(
                f"- Friedman test: not defined for {f.n_models} models (needs at least 3)."
            )
        else:
            verdict = "significant" if f.p < f.alpha else "not significant"
            lines.append(
                f"- Friedman chi2({f.n_models - 1}) = {f.statistic:.3f}, p = {_p(f.p)} "
                f"({verdict} at alpha = {f.alpha}); N = {f.n_blocks} folds, k = {f.n_models} models."
            )
        ranks = ", ".join(f"{m} {r:.2f}" for m, r in f.avg_ranks.items())
        lines.append(f"- Average ranks (1 = best): {ranks}.")
        lines.append(f"- Critical difference (Nemenyi, alpha = {f.alpha}): CD = {f.cd:.3f}.")
        pairs = f.significant_pairs()
        if pairs:
            listed = "; ".join(f"{a} better than {b} (p = {_p(p)})" for a, b, p in pairs)
            lines.append(f"- Significant Nemenyi pairs: {listed}.")
        else:
            lines.append("- Significant Nemenyi pairs: none.")
        groups = f.groups()
        if groups:
            listed = "; ".join("{" + ", ".join(g) + "}" for g in groups)
            lines.append(f"- Groups not significantly different (rank span <= CD): {listed}.")
        lines += [f"- Note: {n}." for n in c.notes]
        lines.append("")
    return "\n".join(lines)


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}"
