"""The report's Bayesian and per-query sections: tables equal the statistics, plots are written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ltr_bench.report.bayes import bayes_markdown, bayes_plot, bayes_table, per_query_section
from ltr_bench.stats import bayesian_correlated_ttest, holm


def test_bayes_table_markdown_and_plot(tmp_path):
    scores = pd.DataFrame(
        [[0.74, 0.69, 0.71, 0.75, 0.73], [0.73, 0.68, 0.70, 0.76, 0.74], [0.66, 0.62, 0.64, 0.69, 0.65]],
        index=["direct_ranker", "lambdamart", "listnet"], columns=[1, 2, 3, 4, 5],
    )
    table = bayes_table(scores, 0.25, rope=0.01)
    dl = bayesian_correlated_ttest(scores.loc["direct_ranker"], scores.loc["listnet"], test_train_ratio=0.25)
    row = table[(table.a == "direct_ranker") & (table.b == "listnet")].iloc[0]
    assert row.p_a_better == pytest.approx(dl.p_a_better) and row.p_a_better > 0.95
    text = bayes_markdown(table, 0.01)
    assert text.count("\n") == 2 + 3 and "| direct_ranker | listnet |" in text
    png = tmp_path / "bayes" / "x.png"
    bayes_plot(table, "MQ2008, NDCG@10", 0.01, png)
    assert png.stat().st_size > 5000


def test_per_query_section_tables():
    rng = np.random.default_rng(0)
    base = rng.random(80)
    values = pd.DataFrame({"direct_ranker": base + 0.08, "ranknet": base, "listnet": base - 0.01})
    tests, wtl, text = per_query_section(values, "ranknet", tol=0.005, n_resamples=999)
    assert len(tests) == 3
    assert tests["p_ttest_holm"].tolist() == pytest.approx(holm(tests["p_ttest"]).tolist())
    assert wtl.loc["direct_ranker"].tolist() == [80, 0, 0]
    assert wtl.loc["listnet"].tolist() == [0, 0, 80]
    assert "Wins / ties / losses per query against ranknet" in text
