"""The report's Bayesian and per-query sections: tables equal the statistics, plots are written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ltr_bench.report.bayes import bayes_markdown, bayes_plot, bayes_table, per_query_section
from ltr_bench.stats import bayesian_correlated_ttest, holm


def test_bayes_table_markdown_and_plot(tmp_path):
    scores = pd.DataFrame(
        [
            [0.74, 0.69, 0.71, 0.75, 0.73],
            [0.73, 0.68, 0.70, 0.76, 0.74],
            [0.66, 0.62, 0.64, 0.69, 0.65],
        ],
        index=["direct_ranker", "lambdamart", "listnet"],
        columns=[1, 2, 3, 4, 5],
    )
    table = bayes_table(scores, 0.25, rope=0.01)
    dl = bayesian_correlated_ttest(
        scores.loc["direct_ranker"], scores.loc["listnet"], test_train_ratio=0.25
    )
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


# ----------------------------------------------------------------------------- in the report


def test_report_has_the_bayesian_section_of_every_comparison(tmp_path):
    """The report of the fake experiment: bayes/<slug>.csv equals the test on the fold values."""
    import contextlib
    import io

    from ltr_bench.cli.report import main
    from tests.report.fake_runs import EXPERIMENT, VALUES, build_fake_experiment

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    build_fake_experiment(uri, str(tmp_path / "artifacts"))
    out = tmp_path / "report"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(
            [
                "--tracking-uri",
                uri,
                "--experiment",
                EXPERIMENT,
                "--out",
                str(out),
                "--rope",
                "0.02",
                "--no-mlflow-artifacts",
            ]
        )
    assert code == 0
    table = pd.read_csv(out / "bayes" / "letor_folds_paper_synth_ndcg_at_10.csv")
    row = table[(table.a == "direct_ranker") & (table.b == "lambdamart")].iloc[0]
    dr, lm = VALUES["synth"]["direct_ranker"]["ndcg@10"], VALUES["synth"]["lambdamart"]["ndcg@10"]
    expected = bayesian_correlated_ttest(dr, lm, test_train_ratio=200 / 600, rope=0.02)
    assert row.p_a_better == pytest.approx(expected.p_a_better)
    assert row.p_equivalent == pytest.approx(expected.p_equivalent)
    page = (out / "report.md").read_text()
    assert "## How sure: Bayesian correlated t-test (ROPE ±0.02)" in page
    assert "| direct_ranker | lambdamart |" in page
    assert (out / "bayes" / "letor_folds_paper_synth_ndcg_at_10.png").stat().st_size > 5000
    assert "Bayesian correlated t-test, " in (out / "report.html").read_text()


def test_report_per_query_tests_read_the_runs_per_query_files(tmp_path):
    import contextlib
    import io

    from mlflow.tracking import MlflowClient

    from ltr_bench import tracking_keys as tk
    from ltr_bench.cli.report import main

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(uri)
    exp = client.create_experiment("pq", artifact_location=str(tmp_path / "artifacts"))
    rng = np.random.default_rng(5)
    base = rng.random(40)
    per_model = {"ranknet": base, "direct_ranker": base + 0.05, "listnet": base - 0.2}
    for fold in (0, 1):
        for model, values in per_model.items():
            run = client.create_run(
                exp,
                tags={
                    tk.TAG_ROLE: tk.ROLE_FOLD,
                    tk.TAG_MODEL: model,
                    tk.TAG_DATASET: "mq2008",
                    tk.TAG_PROTOCOL: "letor_folds",
                    tk.TAG_EVAL: "paper",
                    tk.TAG_FOLD: str(fold),
                },
            )
            rid = run.info.run_id
            client.log_metric(
                rid, tk.metric_key("test", "ndcg@10"), float(values.mean()) + fold / 100
            )
            csv = tmp_path / f"{model}{fold}" / "per_query_metrics.csv"
            csv.parent.mkdir()
            pd.DataFrame({"split": "test", "qid": np.arange(40), "ndcg@10": values + fold}).to_csv(
                csv, index=False
            )
            client.log_artifact(rid, str(csv))
            client.set_terminated(rid)
    out = tmp_path / "report"
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(
            [
                "--tracking-uri",
                uri,
                "--experiment",
                "pq",
                "--out",
                str(out),
                "--metrics",
                "ndcg@10",
                "--baseline",
                "ranknet",
                "--no-mlflow-artifacts",
            ]
        )
    assert code == 0
    wtl = pd.read_csv(out / "per_query" / "letor_folds_paper_mq2008_fold0.csv", index_col="model")
    assert wtl.loc["direct_ranker"].tolist() == [40, 0, 0] and wtl.loc["listnet"].tolist() == [
        0,
        0,
        40,
    ]
    page = (out / "report.md").read_text()
    assert "## Per-query tests on one split" in page and "mq2008, split 1" in page
