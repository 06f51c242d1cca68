"""The leaderboard's tables and page, computed from per-fold rows (``refits.csv`` of Table 1 runs).

Pure functions of a ``DataFrame`` with one row per (model, fold) -- ``model`` (the row's label),
``fold``, ``test/<metric>`` columns, ``time_fit_s`` and, where recorded, ``time_sweep_s`` -- so
the page comes out the same from committed bundles, a tracked run or a run that just finished,
and tests build it from a few synthetic rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ltr_bench.stats import bayesian_correlated_ttest, format_mean_se, friedman_nemenyi, mean_se

NOT_RUN = "not yet run"


@dataclass(frozen=True)
class Entry:
    """One model of the leaderboard: its label (``model`` in the rows), what the page calls it,
    its part and, when the part has no tables, why (and the command that would run it)."""

    label: str
    name: str
    part: int
    missing: str = ""  # "" when the part's tables are there


@dataclass(frozen=True)
class Settings:
    """What the page shows: test metrics, the metrics of the significance tests, the baseline
    of the Bayesian comparison and its ROPE, the folds' n_test / n_train and Nemenyi's alpha."""

    metrics: tuple[str, ...] = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map")
    stat_metrics: tuple[str, ...] = ("ndcg@10",)
    baseline: str = "direct_ranker"
    rope: float = 0.01
    test_train_ratio: float = 1 / 3
    alpha: float = 0.05
    ratio_note: str = ""  # where the ratio comes from, shown after it ("" for none)


def fold_scores(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Models x folds of ``test/<metric>`` (several rows of one fold, e.g. seeds, averaged)."""
    column = f"test/{metric}"
    if not len(rows) or column not in rows:
        return pd.DataFrame()
    return rows.pivot_table(index="model", columns="fold", values=column, aggfunc="mean")


def _cell(values: pd.Series) -> str:
    m, se, n = mean_se(pd.to_numeric(values, errors="coerce").dropna().to_numpy(dtype=float))
    return format_mean_se(m, se) if n else "–"


def _sweep_minutes(part: pd.DataFrame) -> str:
    """The model's sweep time (the same on each of its rows), in minutes; "–" where the run
    that measured it predates the column; "≈" marks a resumed sweep, timed by its trials."""
    if "time_sweep_s" not in part:
        return "–"
    values = pd.to_numeric(part["time_sweep_s"], errors="coerce").dropna()
    resumed = "sweep_resumed" in part and part["sweep_resumed"].astype(str).eq("True").any()
    return f"{'≈' if resumed else ''}{values.max() / 60:.1f}" if len(values) else "–"


def metric_table(rows: pd.DataFrame, entries: Sequence[Entry], settings: Settings) -> pd.DataFrame:
    """One line per entry: mean(SE) over the folds of each test metric, folds, the sweep's and
    the refit's time; ranked by the first significance metric, entries without rows last."""
    lines = []
    for e in entries:
        part = rows[rows["model"].astype(str) == e.label] if len(rows) else rows
        line: dict[str, object] = {"model": e.name, "label": e.label}
        for m in settings.metrics:
            col = f"test/{m}"
            line[m.upper()] = _cell(part[col]) if len(part) and col in part else "–"
        line["folds"] = int(part["fold"].nunique()) if len(part) else 0
        line["sweep (min)"] = _sweep_minutes(part) if len(part) else "–"
        has_fit = len(part) and "time_fit_s" in part
        line["refit fit (s/fold)"] = _cell(part["time_fit_s"]) if has_fit else "–"
        line["part"] = e.part
        line["status"] = e.missing or ("measured" if len(part) else "no rows in its part's tables")
        col = f"test/{settings.stat_metrics[0]}"
        line["_key"] = float(part[col].mean()) if len(part) and col in part else -math.inf
        lines.append(line)
    frame = pd.DataFrame(lines).sort_values("_key", ascending=False, kind="stable")
    return frame.drop(columns="_key").reset_index(drop=True)


def bayes_table(rows: pd.DataFrame, settings: Settings, metric: str) -> pd.DataFrame:
    """The baseline against every other model with paired folds: the Bayesian correlated t-test's
    P(baseline better), P(within the ROPE), P(other better) and the mean difference."""
    wide = fold_scores(rows, metric)
    a = settings.baseline
    out: list[dict[str, object]] = []
    if a not in wide.index:
        return pd.DataFrame(out)
    for b in wide.index:
        if b == a:
            continue
        pair = wide.loc[[a, b]].T.dropna()
        if len(pair) < 2:
            continue
        r = bayesian_correlated_ttest(
            pair[a], pair[b], test_train_ratio=settings.test_train_ratio, rope=settings.rope
        )
        out.append(
            {
                "model": b,
                "mean_diff": r.mean_diff,
                "p_baseline_better": r.p_a_better,
                "p_within_rope": r.p_equivalent,
                "p_other_better": r.p_b_better,
                "folds": r.n,
            }
        )
    return pd.DataFrame(out).sort_values("mean_diff", kind="stable").reset_index(drop=True)


def split_ratio(rows: pd.DataFrame) -> float | None:
    """The Nadeau-Bengio ratio n_test / n_train of the rows' own splits (``n_test_queries`` and
    ``n_train_queries`` of each fold, recorded with the refits), the mean over the folds; None
    when the rows predate recording them."""
    cols = ["fold", "n_test_queries", "n_train_queries"]
    if not len(rows) or any(c not in rows for c in cols):
        return None
    sizes = rows[cols].apply(pd.to_numeric, errors="coerce").assign(fold=rows["fold"]).dropna()
    sizes = sizes[sizes["n_train_queries"] > 0].groupby("fold").first()
    if sizes.empty:
        return None
    return float((sizes["n_test_queries"] / sizes["n_train_queries"]).mean())


def complete_scores(rows: pd.DataFrame, metric: str) -> tuple[pd.DataFrame, list[str]]:
    """Models x folds of the models that have every fold, and the labels of the others."""
    wide = fold_scores(rows, metric)
    if wide.empty:
        return wide, []
    complete = wide[wide.notna().all(axis=1)]
    return complete, [str(m) for m in wide.index if m not in complete.index]


def testable(complete: pd.DataFrame) -> bool:
    """Whether Friedman's test can rank these models: two of them, over two folds at least."""
    return len(complete) >= 2 and complete.shape[1] >= 2


def friedman_text(rows: pd.DataFrame, metric: str, names: Mapping[str, str], alpha: float) -> str:
    """Friedman's test and Nemenyi's post-hoc over the models that have every fold."""
    complete, left = complete_scores(rows, metric)
    if complete.empty and not left:
        return "No rows yet.\n"
    left_out = [names.get(m, m) for m in left]
    if not testable(complete):
        return "Needs two models with every fold; not enough rows yet.\n"
    res = friedman_nemenyi(complete, alpha=alpha)
    stat = "n/a (two models)" if math.isnan(res.statistic) else f"{res.statistic:.2f}"
    p = "n/a" if math.isnan(res.p) else f"{res.p:.3g}"
    lines = [
        f"Friedman chi-square {stat}, p = {p}, over {res.n_models} models and {res.n_blocks} "
        f"folds; Nemenyi's critical difference of average ranks at alpha = {alpha:g}: "
        f"{res.cd:.2f}.",
        "",
        "| rank | model | average rank |",
        "| --- | --- | --- |",
    ]
    for i, (m, r) in enumerate(res.avg_ranks.items(), 1):
        lines.append(f"| {i} | {names.get(str(m), str(m))} | {r:.2f} |")
    pairs = res.significant_pairs()
    lines.append("")
    if pairs:
        shown = "; ".join(
            f"{names.get(a, a)} over {names.get(b, b)} (p = {p_:.3g})" for a, b, p_ in pairs
        )
        lines.append(f"Pairs Nemenyi separates (p < {alpha:g}): {shown}.")
    else:
        lines.append(f"Nemenyi separates no pair at alpha = {alpha:g}.")
    groups = res.groups()
    if groups:
        lines.append(
            "Groups within one critical difference (the CD diagram's bars): "
            + "; ".join("{" + ", ".join(names.get(m, m) for m in g) + "}" for g in groups)
            + "."
        )
    if left_out:
        lines.append(f"Left out (missing folds): {', '.join(left_out)}.")
    return "\n".join(lines) + "\n"


def markdown_table(frame: pd.DataFrame) -> str:
    """A DataFrame as a Markdown table (cells with ``|`` escaped)."""
    if frame.empty:
        return "(none)\n"

    def cell(v: object) -> str:
        if isinstance(v, float) and not isinstance(v, bool):
            return f"{v:.2f}" if abs(v) >= 1 else f"{v:.4f}" if not np.isnan(v) else "–"
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    sep = "|" + " --- |" * len(frame.columns)
    body = ["| " + " | ".join(cell(v) for v in r) + " |" for r in frame.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def bayes_markdown(table: pd.DataFrame, settings: Settings, names: Mapping[str, str]) -> str:
    """The Bayesian comparison as a Markdown table, the baseline named in the headers."""
    if table.empty:
        return "No paired folds of the baseline and another model yet.\n"
    base = names.get(settings.baseline, settings.baseline)
    shown = pd.DataFrame(
        {
            "model": [names.get(str(m), str(m)) for m in table["model"]],
            f"{base} − model": [f"{d:+.4f}" for d in table["mean_diff"]],
            f"P({base} better)": [f"{p:.2f}" for p in table["p_baseline_better"]],
            f"P(within ±{settings.rope:g})": [f"{p:.2f}" for p in table["p_within_rope"]],
            "P(model better)": [f"{p:.2f}" for p in table["p_other_better"]],
            "folds": table["folds"],
        }
    )
    return markdown_table(shown)


@dataclass(frozen=True)
class Part:
    """One invocation of the leaderboard's run: its number, models, status and where its tables
    come from (a bundle, a tracked run) or the command that would run it."""

    number: int
    labels: tuple[str, ...]
    status: str
    source: str


def page_body(
    rows: pd.DataFrame,
    entries: Sequence[Entry],
    parts: Sequence[Part],
    settings: Settings,
    claim: Mapping[str, str] | None = None,
    intro: str = "",
    figures: Mapping[str, str] | None = None,
) -> str:
    """The whole page below its provenance: the metric table, Friedman + Nemenyi (with the
    critical-difference diagram of ``figures``, metric -> image file beside the page), the
    Bayesian comparison with the baseline, the ledger's claim on these rows and the parts."""
    names = {e.label: e.name for e in entries}
    table = metric_table(rows, entries, settings)
    measured = int((table["folds"] > 0).sum())
    out = [intro.rstrip(), ""] if intro.strip() else []
    out += [
        f"{len(entries)} models, {measured} measured. Test metrics are mean(SE) over the folds "
        "(the papers' notation: 0.720(12) = 0.720 ± 0.012); ranked by test "
        f"{settings.stat_metrics[0].upper()}. `sweep (min)`: the "
        'wall time of the model\'s sweep over all folds ("–" for runs that predate its '
        "recording: see their part's wall time below; ≈ for a sweep resumed after an "
        "interruption, timed by the union of its finished trials' run times); "
        "`refit fit (s/fold)`: fitting the "
        "chosen config on one fold.",
        "",
        "## Test metrics",
        "",
        markdown_table(table),
    ]
    for metric in settings.stat_metrics:
        out += [
            f"## Friedman + Nemenyi (test {metric.upper()})",
            "",
            friedman_text(rows, metric, names, settings.alpha) + _unmeasured(table, entries),
        ]
        if figures and metric in figures:
            out += [f"![Critical-difference diagram, test {metric.upper()}]({figures[metric]})", ""]
    base = names.get(settings.baseline, settings.baseline)
    for metric in settings.stat_metrics:
        out += [
            f"## {base} against each model (test {metric.upper()})",
            "",
            "The Bayesian correlated t-test (Corani & Benavoli 2015; Nadeau-Bengio correction "
            f"n_test/n_train = {settings.test_train_ratio:.3f}{settings.ratio_note}) on the "
            "paired folds: the "
            f"posterior probability that {base} is better by more than the ROPE "
            f"(±{settings.rope:g}), that the two lie within it, and that the model is better.",
            "",
            bayes_markdown(bayes_table(rows, settings, metric), settings, names),
        ]
    if claim:
        out += [
            "## The ledger's claim on these rows (an extension, not a paper's claim)",
            "",
            f"**{claim['id']}**: {claim['statement']}",
            "",
            f"- verdict: **{claim['verdict']}**",
            f"- ours: {claim['ours']}",
            "",
        ]
    out += ["## Parts", "", _parts_markdown(parts, names)]
    return "\n".join(out).rstrip() + "\n"


def _unmeasured(table: pd.DataFrame, entries: Sequence[Entry]) -> str:
    """The models without rows (failed, not yet run), named as left out of the test."""
    status = {e.name: e.missing for e in entries}
    out = [
        f"{m} ({(status.get(m) or s).split(' (')[0].split(':')[0]})"
        for m, s, folds in table[["model", "status", "folds"]].itertuples(index=False)
        if folds == 0
    ]
    if not out:
        return ""
    return f"Not in the test (no rows; see the table above): {', '.join(out)}.\n"


def _parts_markdown(parts: Sequence[Part], names: Mapping[str, str]) -> str:
    frame = pd.DataFrame(
        [
            {
                "part": p.number,
                "models": ", ".join(names.get(m, m) for m in p.labels),
                "status": p.status,
                "tables from, or the command that runs it": p.source,
            }
            for p in parts
        ]
    )
    return markdown_table(frame)
