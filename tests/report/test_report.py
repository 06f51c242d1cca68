"""End-to-end tests of ltr-bench-report on a small fake-but-tracked MLflow experiment.

The store is built once per module (creating an MLflow SQLite store takes a few seconds); the
report is run in-process via ``main([...])`` and once through the real console script. All
expected numbers are computed by hand from the values in ``fake_runs.py``.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ltr_bench import tracking_keys as tk
from ltr_bench.cli.report import main
from tests.report.fake_runs import EXPERIMENT, N_QUERIES, build_fake_experiment
from tests.waiting import HANG_GUARD_S

SCRIPT = Path(sys.executable).parent / "ltr-bench-report"

# Hand-computed Table 1 (see fake_runs.VALUES):
# mq2008 NDCG@10: direct_ranker 0.70..0.74 -> mean 0.72, sum of squares 0.001, var 0.00025,
# SE = sqrt(0.00025/5) = 0.00707 -> 0.7200(71); listnet (3 folds) 0.725, SE 0.01323 -> 0.725(13)
# and the best of the column, marked partial; lambdamart 0.636, SE sqrt(0.00033/5) = 0.00812.
# synth MAP: direct_ranker is constant 0.5 (SE 0) and ranknet averages exactly 0.5 (SE 0.0791):
# a tie, both marked best. listnet has no synth runs: "–".
EXPECTED_TABLE1 = """\
| Model | mq2008 NDCG@10 | mq2008 MAP | synth NDCG@10 | synth MAP |
| --- | ---: | ---: | ---: | ---: |
| direct_ranker | 0.7200(71) | 0.6200(71) | **0.8200(71)** | **0.500(0)** |
| lambdamart | 0.6360(81) | 0.5900(71) | 0.7200(71) | 0.4200(71) |
| listnet | **0.725(13)†** | 0.6000(58)† | – | – |
| ranknet | 0.6900(71) | **0.6300(71)** | 0.8000(84) | **0.500(79)** |
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("mlstore")
    uri = f"sqlite:///{root}/mlflow.db"
    build_fake_experiment(uri, str(root / "artifacts"))
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    client.create_experiment("empty", artifact_location=str(root / "artifacts_empty"))
    single = client.create_experiment(
        "single_model", artifact_location=str(root / "artifacts_single")
    )
    for fold in (0, 1):
        run = client.create_run(
            single,
            tags={
                tk.TAG_ROLE: tk.ROLE_FOLD,
                tk.TAG_MODEL: "ranknet",
                tk.TAG_DATASET: "mq2008",
                tk.TAG_PROTOCOL: "letor_folds",
                tk.TAG_EVAL: "paper",
                tk.TAG_FOLD: str(fold),
            },
        )
        client.log_metric(run.info.run_id, tk.metric_key("test", "ndcg@10"), 0.5 + fold / 10)
        client.log_metric(run.info.run_id, tk.metric_key("test", "map"), 0.4)
        client.set_terminated(run.info.run_id)
    # A refit with seed=0,1: two runs per fold, averaged; an older run of (fold 0, seed 0) superseded.
    seeded = client.create_experiment("seeded", artifact_location=str(root / "artifacts_seeded"))
    for fold, seed, ndcg, end in (
        (0, 0, 0.10, 1),
        (0, 0, 0.50, 2),
        (0, 1, 0.60, 2),
        (1, 0, 0.70, 2),
        (1, 1, 0.80, 2),
    ):
        run = client.create_run(
            seeded,
            start_time=end * 1000,
            tags={
                tk.TAG_ROLE: tk.ROLE_FOLD,
                tk.TAG_MODEL: "direct_ranker",
                tk.TAG_DATASET: "mq2008",
                tk.TAG_PROTOCOL: "letor_folds",
                tk.TAG_EVAL: "paper",
                tk.TAG_FOLD: str(fold),
                tk.TAG_SEED: str(seed),
            },
        )
        client.log_metric(run.info.run_id, tk.metric_key("test", "ndcg@10"), ndcg)
        client.log_metric(run.info.run_id, tk.metric_key("test", "map"), 0.4)
        client.set_terminated(run.info.run_id, end_time=end * 1000 + 500)
    return uri, root


@pytest.fixture(scope="module")
def report(store) -> tuple[int, str, Path]:
    """Run the report in-process once: (exit code, stdout, out folder)."""
    uri, root = store
    out = root / "report"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["--tracking-uri", uri, "--experiment", EXPERIMENT, "--out", str(out)])
    return code, buf.getvalue(), out


def _csv(path: Path) -> dict[str, dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    key = "Model" if "Model" in rows[0] else "model"
    return {r[key]: r for r in rows}


def test_report_prints_table1_and_paths(report):
    code, stdout, out = report
    assert code == 0
    assert EXPECTED_TABLE1 in stdout
    assert str(out / "table1.md") in stdout and str(out / "report.md") in stdout
    assert "superseded" in stdout and "1 FAILED" in stdout


def test_table1_markdown_matches_hand_computed(report):
    _, _, out = report
    assert (out / "table1.md").read_text(encoding="utf-8") == EXPECTED_TABLE1


def test_table1_csv_numbers_and_marks(report):
    _, _, out = report
    rows = _csv(out / "table1.csv")
    dr = rows["direct_ranker"]
    # the latest finished run of direct_ranker/mq2008/fold 0 counts (0.70), not the older
    # duplicate (0.10), the newer FAILED run (0.01), the trial or the parent (0.99)
    assert float(dr["mq2008 NDCG@10 mean"]) == pytest.approx(0.72)
    assert float(dr["mq2008 NDCG@10 se"]) == pytest.approx(math.sqrt(0.00025 / 5))
    assert dr["mq2008 NDCG@10 n"] == "5"
    assert rows["listnet"]["mq2008 NDCG@10 n"] == "3"
    assert rows["listnet"]["mq2008 NDCG@10 best"] == "True"
    assert dr["mq2008 NDCG@10 best"] == "False"
    assert dr["synth MAP best"] == rows["ranknet"]["synth MAP best"] == "True"  # exact tie
    assert rows["listnet"]["synth NDCG@10"] == "–" and rows["listnet"]["synth NDCG@10 mean"] == ""
    assert float(rows["lambdamart"]["mq2008 NDCG@10 se"]) == pytest.approx(math.sqrt(0.00033 / 5))


def test_table1_latex(report):
    _, _, out = report
    tex = (out / "table1.tex").read_text(encoding="utf-8")
    assert r"\multicolumn{2}{c}{mq2008}" in tex
    assert r"listnet & \textbf{0.725(13)$^\dagger$} & 0.6000(58)$^\dagger$ & -- & -- \\" in tex
    assert r"direct\_ranker" in tex


def test_pvalues_match_hand_computed(report):
    _, _, out = report
    p = _csv(out / "pvalues" / "letor_folds_paper_mq2008_ndcg_at_10.csv")
    # d = direct_ranker - ranknet = 0.01..0.05, n_test/n_train = 157/471 = 1/3:
    # t = 3 sqrt(3)/2 with 4 df -> p = 1 - (51/43) sqrt(27/43) (see test_stats.py)
    assert N_QUERIES["mq2008"][1] / N_QUERIES["mq2008"][0] == pytest.approx(1 / 3)
    assert float(p["direct_ranker"]["ranknet"]) == pytest.approx(
        1 - 51 / 43 * math.sqrt(27 / 43), rel=1e-6
    )
    assert p["ranknet"]["direct_ranker"] == p["direct_ranker"]["ranknet"]
    # listnet vs lambdamart on their 3 common folds: d = (0.11, 0.065, 0.06); with 2 df the
    # two-sided p is 1 - t / sqrt(t^2 + 2)
    d = [0.11, 0.065, 0.06]
    mean = sum(d) / 3
    var = sum((x - mean) ** 2 for x in d) / 2
    t = mean / math.sqrt((1 / 3 + 1 / 3) * var)
    assert float(p["listnet"]["lambdamart"]) == pytest.approx(
        1 - t / math.sqrt(t * t + 2), rel=1e-6
    )
    assert p["listnet"]["listnet"] == ""


def test_table3_run_times(report):
    _, _, out = report
    md = (out / "table3.md").read_text(encoding="utf-8")
    lines = {
        tuple(c.strip() for c in line.strip("|").split("|")[:2]): line for line in md.splitlines()
    }
    # columns: direct_ranker, lambdamart, listnet, ranknet
    # fit: 10..14 -> 12.00(71); 100..140 -> 120.0(71); listnet 20, 20, 23 -> mean 21, SE 1.0
    # -> 21.0(10) on 3 of 5 folds; ranknet constant 5 -> 5.000(0)
    assert lines[("mq2008", "Train model [s]")].split("|")[3:7] == [
        " 12.00(71) ",
        " 120.0(71) ",
        " 21.0(10)† ",
        " 5.000(0) ",
    ]
    # read: 2.0, 2.2, 2.1, 2.3, 2.4 -> 2.200(71) for the complete models
    assert " 2.200(71) " in lines[("mq2008", "Read data [s]")]
    assert lines[("synth", "Train model [s]")].split("|")[5] == " – "


def test_friedman_summary_and_figures(report):
    _, _, out = report
    text = (out / "friedman_nemenyi.md").read_text(encoding="utf-8")
    # synth NDCG@10: always ranked direct_ranker > ranknet > lambdamart -> chi2 = 10, p = e^-5
    assert "chi2(2) = 10.000, p = 0.007" in text
    assert f"{math.exp(-5):.3f}" == "0.007"
    assert "direct_ranker better than lambdamart" in text
    # mq2008 NDCG@10 on the 3 folds listnet has: ranks (4/3, 5/3, 3, 4) ->
    # chi2 = 12*3/(4*5) * (16/9 + 25/9 + 9 + 16) - 3*3*5 = 8.2; with 3 df
    # p = erfc(sqrt(x/2)) + sqrt(2x/pi) exp(-x/2)
    p = math.erfc(math.sqrt(4.1)) + math.sqrt(16.4 / math.pi) * math.exp(-4.1)
    assert f"chi2(3) = 8.200, p = {p:.3f}" in text
    assert "use the 3 of 5 folds" in text
    for sub in ("pvalues", "cd"):
        pngs = sorted((out / sub).glob("*.png"))
        assert len(pngs) == 4
        for png in pngs:
            assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    report_md = (out / "report.md").read_text(encoding="utf-8")
    assert EXPECTED_TABLE1 in report_md and "pvalues/letor_folds_paper_synth_map.png" in report_md


def test_report_run_logged_with_artifacts(report, store):
    from mlflow.tracking import MlflowClient

    uri, _ = store
    client = MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{tk.TAG_ROLE}` = 'report'")
    assert runs and runs[-1].info.status == "FINISHED"
    names = {a.path for a in client.list_artifacts(runs[-1].info.run_id)}
    assert {
        "table1.md",
        "table1.csv",
        "table1.tex",
        "table3.md",
        "pvalues",
        "cd",
        "report.md",
        "report.html",
        "table1.png",
        "table3.png",
    } <= names
    assert runs[-1].info.run_name == f"report {EXPERIMENT}"
    assert runs[-1].data.params["report.metrics"] == "ndcg@10 map"


def test_report_prints_the_ui_link_and_leaves_the_global_tracking_uri(report):
    import mlflow

    _, stdout, _ = report
    assert "workflowType=machine_learning" in stdout and "tags.`ltr.role` = 'report'" in stdout
    assert not mlflow.get_tracking_uri().startswith("sqlite:///" + str(report[2].parent))


def test_html_report_embeds_every_figure_and_the_charts(report):
    """report.html renders where relative links do not (the MLflow artifact view): every figure
    is inside it; the Table 1 chart and the run-time chart exist."""
    _, _, out = report
    page = (out / "report.html").read_text(encoding="utf-8")
    figures = [
        p for folder in ("pvalues", "cd", "bayes") for p in sorted((out / folder).glob("*.png"))
    ]
    assert page.count("src='data:image/png;base64,") == len(figures) + 2  # + the two charts
    assert "<b>0.725(13)†</b>" in page and "src='pvalues/" not in page
    for chart in ("table1.png", "table3.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_make_report_is_a_function_of_its_arguments(store, tmp_path):
    from ltr_bench.errors import UserError
    from ltr_bench.report.make import make_report, report_options

    uri, _ = store
    rep = make_report(
        uri,
        EXPERIMENT,
        tmp_path / "r",
        **report_options(["--protocol", "letor_folds"]),
        log_run=False,
    )
    assert rep.run_id is None and rep.table1_markdown == EXPECTED_TABLE1
    with pytest.raises(UserError, match="report_args"):
        report_options(["--nonsense"])
    with pytest.raises(UserError, match="--alpha"):
        make_report(uri, EXPERIMENT, tmp_path / "r2", alpha=2.0)


def test_console_script_subprocess(report, store, tmp_path):
    """The installed console script gives the same Table 1 (the report run it created earlier is
    not counted)."""
    uri, _ = store
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            str(SCRIPT),
            "--tracking-uri",
            uri,
            "--experiment",
            EXPERIMENT,
            "--out",
            str(tmp_path / "r"),
            "--metrics",
            "ndcg@10",
            "map",
            "--protocol",
            "letor_folds",
            "--no-mlflow-artifacts",
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=tmp_path,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert EXPECTED_TABLE1 in proc.stdout
    assert (tmp_path / "r" / "table1.md").read_text(encoding="utf-8") == EXPECTED_TABLE1


def test_single_model_skips_tests_with_a_note(store, tmp_path, capsys):
    uri, _ = store
    code = main(
        [
            "--tracking-uri",
            uri,
            "--experiment",
            "single_model",
            "--out",
            str(tmp_path),
            "--no-mlflow-artifacts",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "| ranknet | 0.550(50) | 0.400(0) |" in out  # 0.5, 0.6 -> mean 0.55, SE 0.05
    assert "tests skipped: 1 model(s)" in out
    assert not list((tmp_path / "pvalues").glob("*.png")) and not list(
        (tmp_path / "cd").glob("*.png")
    )


def test_runs_of_one_fold_with_several_seeds_are_averaged(store, tmp_path, capsys):
    from ltr_bench.report.collect import collect_fold_runs

    uri, _ = store
    runs = collect_fold_runs(uri, "seeded")
    frame = runs.frame
    assert frame["fold"].tolist() == [0, 1] and frame["n_seeds"].tolist() == [2, 2]
    assert frame["seed"].tolist() == ["0,1", "0,1"]
    # fold 0: (0.50 + 0.60) / 2 -- the older seed-0 run (0.10) is superseded, not averaged in
    assert frame[tk.metric_key("test", "ndcg@10")].tolist() == pytest.approx([0.55, 0.75])
    assert "n_seeds" not in runs.metric_keys() and "seed" not in runs.metric_keys()
    assert any("superseded" in n for n in runs.notes)
    assert (
        "direct_ranker on mq2008 (letor_folds/paper): 2 fold(s) are each the mean over 2 runs with seeds 0, 1."
        in runs.notes
    )
    code = main(
        [
            "--tracking-uri",
            uri,
            "--experiment",
            "seeded",
            "--out",
            str(tmp_path),
            "--no-mlflow-artifacts",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "| direct_ranker | 0.65(10) | 0.400(0) |" in out  # folds 0.55, 0.75


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--experiment", "nope"], "no such MLflow experiment"),
        (["--experiment", "empty"], "has no fold runs"),
        (["--experiment", EXPERIMENT, "--metrics", "ndcg@7"], "ndcg@7"),
        (["--experiment", EXPERIMENT, "--protocol", "holdout"], "--protocol 'holdout'"),
        (["--experiment", EXPERIMENT, "--alpha", "2"], "--alpha"),
    ],
)
def test_user_errors_exit_2_with_one_sentence(store, tmp_path, capsys, args, fragment):
    uri, _ = store
    code = main(["--tracking-uri", uri, "--out", str(tmp_path), "--no-mlflow-artifacts", *args])
    err = capsys.readouterr().err
    assert code == 2
    assert fragment in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_missing_store_is_a_user_error(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path}/none.db"
    code = main(["--tracking-uri", uri, "--experiment", "x", "--out", str(tmp_path)])
    assert code == 2 and "no MLflow store" in capsys.readouterr().err
    assert not (tmp_path / "none.db").exists()
