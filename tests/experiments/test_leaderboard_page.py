"""The leaderboard's tables and page from per-fold rows: mean(SE) per metric, ranked; models
without rows as "not yet run" with their command; Friedman + Nemenyi and the Bayesian comparison
of the baseline against each model, checked against direct computations."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ltr_bench.experiments.leaderboard_page import (
    Entry,
    Part,
    Settings,
    bayes_table,
    friedman_text,
    metric_table,
    page_body,
)
from ltr_bench.stats import bayesian_correlated_ttest, format_mean_se, friedman_nemenyi, mean_se

FOLDS = [f"mq2008/Fold{k}" for k in range(1, 6)]
METRICS = ("ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map")


def fake_rows(levels: dict[str, float], seed: int = 0, sweep: bool = True) -> pd.DataFrame:
    """refits.csv-like rows: per model five folds around its level, every metric, run times."""
    rng = np.random.default_rng(seed)
    rows = []
    for model, level in levels.items():
        for k, fold in enumerate(FOLDS):
            row = {"variant": "letor_folds", "dataset": "mq2008", "model": model, "fold": fold}
            noise = rng.normal(scale=0.004)
            for i, m in enumerate(METRICS):
                row[f"test/{m}"] = level - 0.05 * (4 - i) + 0.01 * k + noise
            row["time_fit_s"] = 1.0 + 0.1 * k
            if sweep:
                row["time_sweep_s"] = 600.0
            rows.append(row)
    return pd.DataFrame(rows)


LEVELS = {"direct_ranker": 0.72, "lambdamart": 0.735, "ranknet": 0.70, "xgb_like": 0.722}


def _entries() -> list[Entry]:
    return [
        Entry("direct_ranker", "RankNet*", 1),
        Entry("lambdamart", "LambdaMART", 1),
        Entry("ranknet", "RankNet", 2),
        Entry("xgb_like", "XGB-like", 2),
        Entry("dasalc", "DASALC", 3, "not yet run (part 3: `ltr-bench ... parts=[3]`)"),
    ]


def test_a_resumed_sweep_is_marked_as_timed_by_its_trials() -> None:
    rows = fake_rows(LEVELS)
    rows["sweep_resumed"] = rows["model"] == "ranknet"
    table = metric_table(rows, _entries(), Settings()).set_index("label")
    assert table.loc["ranknet", "sweep (min)"] == "≈10.0"
    assert table.loc["direct_ranker", "sweep (min)"] == "10.0"


def test_the_metric_table_is_mean_se_per_model_ranked_with_missing_models_last() -> None:
    rows = fake_rows(LEVELS)
    table = metric_table(rows, _entries(), Settings())
    assert list(table["label"]) == ["lambdamart", "xgb_like", "direct_ranker", "ranknet", "dasalc"]
    assert [c for c in table.columns if c.startswith(("NDCG", "MAP"))] == [
        "NDCG@1",
        "NDCG@3",
        "NDCG@5",
        "NDCG@10",
        "MAP",
    ]
    mine = rows[rows["model"] == "ranknet"]
    m, se, _ = mean_se(mine["test/ndcg@10"].to_numpy())
    line = table.set_index("label").loc["ranknet"]
    assert line["NDCG@10"] == format_mean_se(m, se) and line["folds"] == 5
    assert line["sweep (min)"] == "10.0" and line["status"] == "measured"
    missing = table.set_index("label").loc["dasalc"]
    assert missing["NDCG@10"] == "–" and missing["folds"] == 0
    assert missing["status"].startswith("not yet run (part 3: `ltr-bench")


def test_a_part_measured_before_sweep_times_were_recorded_shows_a_dash() -> None:
    rows = fake_rows({"direct_ranker": 0.72}, sweep=False)
    table = metric_table(rows, [Entry("direct_ranker", "RankNet*", 1)], Settings())
    assert table.loc[0, "sweep (min)"] == "–" and table.loc[0, "refit fit (s/fold)"] != "–"


def test_the_bayesian_comparison_is_the_correlated_t_test_of_the_baseline_per_model() -> None:
    rows = fake_rows(LEVELS)
    settings = Settings(test_train_ratio=1 / 3, rope=0.01)
    table = bayes_table(rows, settings, "ndcg@10").set_index("model")
    assert set(table.index) == {"lambdamart", "ranknet", "xgb_like"}
    wide = rows.pivot_table(index="model", columns="fold", values="test/ndcg@10")
    direct = bayesian_correlated_ttest(
        wide.loc["direct_ranker"], wide.loc["lambdamart"], test_train_ratio=1 / 3, rope=0.01
    )
    got = table.loc["lambdamart"]
    assert np.isclose(got["p_baseline_better"], direct.p_a_better)
    assert np.isclose(got["p_within_rope"], direct.p_equivalent)
    assert np.isclose(got["p_other_better"], direct.p_b_better)
    assert got["folds"] == 5 and got["mean_diff"] < 0  # LambdaMART is higher here
    total = table[["p_baseline_better", "p_within_rope", "p_other_better"]].sum(axis=1)
    assert np.allclose(total, 1.0)


def test_friedman_and_nemenyi_over_the_models_with_every_fold() -> None:
    rows = fake_rows(LEVELS)
    short = rows[~((rows["model"] == "ranknet") & (rows["fold"] == FOLDS[0]))]
    names = {e.label: e.name for e in _entries()}
    text = friedman_text(short, "ndcg@10", names, 0.05)
    complete = short.pivot_table(index="model", columns="fold", values="test/ndcg@10").drop(
        index="ranknet"
    )
    expected = friedman_nemenyi(complete)
    assert f"Friedman chi-square {expected.statistic:.2f}" in text
    assert "over 3 models and 5 folds" in text and "Left out (missing folds): RankNet." in text
    assert f"| 1 | LambdaMART | {expected.avg_ranks.iloc[0]:.2f} |" in text
    assert friedman_text(rows.iloc[:0], "ndcg@10", names, 0.05) == "No rows yet.\n"


def test_the_page_names_every_model_and_shows_the_tests_and_the_parts() -> None:
    rows = fake_rows(LEVELS)
    parts = [
        Part(1, ("direct_ranker", "lambdamart"), "bundle", "bundle docs/results/bundles/x"),
        Part(2, ("ranknet", "xgb_like"), "bundle", "bundle docs/results/bundles/y"),
        Part(3, ("dasalc",), "not yet run", "`ltr-bench experiment=leaderboard ...`"),
    ]
    claim = {"id": "ext", "statement": "RankNet* is near", "verdict": "holds", "ours": "x"}
    page = page_body(rows, _entries(), parts, Settings(stat_metrics=("ndcg@10", "map")), claim)
    for name in ("RankNet*", "LambdaMART", "RankNet", "XGB-like", "DASALC"):
        assert f"| {name} |" in page
    assert "5 models, 4 measured." in page
    assert "## Friedman + Nemenyi (test NDCG@10)" in page and "(test MAP)" in page
    assert "## RankNet* against each model (test NDCG@10)" in page
    assert "| model | RankNet* − model | P(RankNet* better) | P(within ±0.01) |" in page
    assert "an extension, not a paper's claim" in page and "- verdict: **holds**" in page
    assert "| 3 | DASALC | not yet run | `ltr-bench experiment=leaderboard ...` |" in page
    assert "![Critical-difference diagram" not in page  # none drawn: none shown


def test_the_critical_difference_diagram_follows_its_friedman_section() -> None:
    rows = fake_rows(LEVELS)
    settings = Settings(stat_metrics=("ndcg@10", "map"))
    figures = {"ndcg@10": "board-cd-ndcg10.png"}
    page = page_body(rows, _entries(), [], settings, figures=figures)
    ndcg, rest = page.split("## Friedman + Nemenyi (test NDCG@10)")[1].split("## Friedman", 1)
    assert "![Critical-difference diagram, test NDCG@10](board-cd-ndcg10.png)" in ndcg
    assert "![" not in rest  # MAP has no figure here
