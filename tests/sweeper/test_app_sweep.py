"""End to end: a real ``ltr-bench`` sweep over a shipped search space, then ``refit_best``.

One command runs the LETOR-folds protocol with a study per outer fold (inner CV by query on each
fold's training part, never test), the MLflow store is read back (sweep / trial / refit runs,
study artifacts), and the refit evaluates each study's best config once on test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking_keys import MLFLOW_PARENT, TAG_REFIT, TAG_STUDY, TAG_TRIAL
from tests.data.letor_files import write_letor
from tests.test_e2e import _artifacts, _client, _runs, ltr_bench
from tests.waiting import TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

COMMON = ["threads=1", "trainer.enable_progress_bar=false", "model.epochs=2", "protocol.inner_cv=2"]


def learnable_letor_folder(root: Path, n_folds: int = 2, seed: int = 0) -> Path:
    """``Fold1..Fold<n>/{train,vali,test}.txt`` whose labels depend on the first features."""
    rng = np.random.default_rng(seed)
    qid = 1
    for k in range(1, n_folds + 1):
        for split, n_queries in (("train", 24), ("vali", 8), ("test", 8)):
            labels = rng.integers(0, 3, size=(n_queries, 10))
            labels[:, 0] = 2  # every query has a relevant document
            feats = rng.normal(size=(n_queries, 10, 6)) * 0.5
            feats[..., :3] += labels[..., None]
            qids = np.repeat(np.arange(qid, qid + n_queries), 10)
            qid += n_queries
            write_letor(
                root / f"Fold{k}" / f"{split}.txt",
                labels.ravel(),
                qids,
                feats.reshape(-1, 6).round(4),
            )
    return root


@pytest.mark.heavy
def test_sweep_per_fold_then_refit_best(tmp_path: Path) -> None:
    data = learnable_letor_folder(tmp_path / "data")
    sweep_dir = tmp_path / "sweep"
    proc = ltr_bench(
        tmp_path,
        "-m",
        "search=direct_ranker",
        "dataset=letor",
        f"dataset.path={data}",
        "protocol=letor_folds",
        "dataset.fold=1,2",
        "hydra.sweeper.study_per=[dataset.fold]",
        "hydra.sweeper.n_trials=2",
        "hydra.sweeper.reevaluate.top_k=0",  # re-evaluation: its own test
        "hydra/sweeper/pruner=none",  # racing (on in search=<model>): tests/sweeper/test_pruning.py
        f"hydra.sweep.dir={sweep_dir}",
        *COMMON,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = yaml.safe_load((sweep_dir / "optimization_results.yaml").read_text())
    studies = results["studies"]
    assert [s["study_overrides"] for s in studies] == [["dataset.fold=1"], ["dataset.fold=2"]]
    assert all(s["n_complete"] == 2 and s["n_failed"] == 0 for s in studies)

    client = _client(tmp_path)
    runs = _runs(client)
    sweeps = {r.data.tags[TAG_STUDY]: r for r in runs["sweep"]}
    assert set(sweeps) == {s["study_name"] for s in studies}
    for study in studies:
        sweep_run = sweeps[study["study_name"]]
        # The study's plots and trial table, as files in the sweep dir and as MLflow artifacts.
        files = {p.name for p in Path(study["artifacts_dir"]).iterdir()}
        assert {"optimization_history.png", "trials.csv"} <= files
        header = (
            (Path(study["artifacts_dir"]) / "trials.csv").read_text().splitlines()[0].split(",")
        )
        assert "user_attrs_objective_se" in header
        assert {"study/optimization_history.png", "study/trials.csv"} <= _artifacts(
            client, sweep_run.info.run_id, "study"
        )
        assert sweep_run.data.metrics["best_objective"] == pytest.approx(study["best_value"])
        # The trials return their inner-CV SE: the summary says how many are within one SE of the best.
        assert study["best_value_se"] > 0 and 1 <= study["n_within_one_se"] <= 2
        assert sweep_run.data.metrics["best_objective_se"] == pytest.approx(study["best_value_se"])
        assert sweep_run.data.metrics["n_trials_within_one_se"] == study["n_within_one_se"]
        assert sweep_run.data.metrics["n_trials_complete"] == 2
        # What the UI shows of a sweep: its name, search space, sampler and budget as params,
        # the convergence per trial, and a duration spanning its trials.
        fold = study["study_overrides"][0].split("=")[1]
        assert sweep_run.info.run_name == f"sweep direct_ranker · letor/Fold{fold} · tpe"
        sp = sweep_run.data.params
        assert sp["search.optimizer.lr"].startswith("tag(log") and "optimizer.lr" not in sp
        assert (sp["sampler"], sp["n_trials"], sp["direction"]) == ("tpe", "2", "maximize")
        assert sp["storage"].startswith("sqlite:///") and sp["model"] == "direct_ranker"
        best_so_far = client.get_metric_history(sweep_run.info.run_id, keys.BEST_SO_FAR)
        assert sorted(m.step for m in best_so_far) == [0, 1]
        assert max(m.value for m in best_so_far) == pytest.approx(study["best_value"])
        # Two trials nested under it, scored by inner CV only: no test metric anywhere.
        trials = [
            r for r in runs["trial"] if r.data.tags.get(MLFLOW_PARENT) == sweep_run.info.run_id
        ]
        assert len(trials) == 2
        assert sweep_run.info.end_time >= max(t.info.end_time for t in trials)
        assert {t.info.run_name for t in trials} == {
            "direct_ranker · trial 0",
            "direct_ranker · trial 1",
        }
        for t in trials:
            metrics = t.data.metrics
            assert (
                0 < metrics["cv/ndcg_at_10"] <= 1
                and metrics["objective"] == metrics["cv/ndcg_at_10"]
            )
            assert not any(k.startswith("test/") for k in metrics)
            assert (
                len(client.get_metric_history(t.info.run_id, "cv_fold/ndcg_at_10")) == 2
            )  # per inner fold
        # Trial 0 is DirectRanker's default config (search=direct_ranker enqueues it; model.epochs
        # is fixed by the command line here).
        (first,) = [t for t in trials if t.data.tags.get(TAG_TRIAL) == "0"]
        p = first.data.params
        assert (
            p["activation"],
            p["model.hidden_sizes"].replace(" ", ""),
            float(p["optimizer.lr"]),
            float(p["model.dropout"]),
            p["model.epochs"],
        ) == ("tanh", "[64,32]", 0.004, 0.2, "2")
        best = max(trials, key=lambda r: r.data.metrics["objective"])
        assert best.data.metrics["objective"] == pytest.approx(study["best_value"])
        per_fold = [
            m.value for m in client.get_metric_history(best.info.run_id, "cv_fold/ndcg_at_10")
        ]
        assert study["best_value_se"] == pytest.approx(
            np.std(per_fold, ddof=1) / np.sqrt(len(per_fold))
        )
    assert "protocol" not in runs  # the sweep itself never evaluated on test

    # Refit every study's best config on the whole training part, test once -- per seed.
    proc = ltr_bench(tmp_path, f"refit_best={sweep_dir}", "seed=0,1", *COMMON)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "refit test metrics per study (mean over seeds 0, 1)" in proc.stdout
    assert "mean(SE)" in proc.stdout and "SD(seeds)" in proc.stdout
    runs = _runs(client)
    refits = [r for r in runs["protocol"] if r.data.tags.get(TAG_REFIT) == "true"]
    assert len(refits) == 4
    for study in studies:
        mine = [r for r in refits if r.data.tags.get(TAG_STUDY) == study["study_name"]]
        assert sorted(r.data.params["seed"] for r in mine) == ["0", "1"]
        for refit in mine:
            assert refit.data.tags[MLFLOW_PARENT] == sweeps[study["study_name"]].info.run_id
            fold_no = study["study_overrides"][0].split("=")[1]
            seed = refit.data.params["seed"]
            assert refit.info.run_name == f"refit direct_ranker · letor/Fold{fold_no} · seed {seed}"
            assert 0 < refit.data.metrics["test/ndcg_at_10"] <= 1
            params = refit.data.params
            for key, value in study["best_params"].items():  # the refit ran the best config
                logged = params[key]  # a group's param is its option name
                assert logged.replace(" ", "") == str(value).replace(" ", ""), key
            fold = int(study["study_overrides"][0].split("=")[1])
            folds = [r for r in runs["fold"] if r.data.tags.get(MLFLOW_PARENT) == refit.info.run_id]
            assert [r.data.tags[keys.TAG_FOLD] for r in folds] == [str(fold - 1)]

    # Those four refits ran two at a time (refit_jobs defaults to one per core; each printed as one
    # block); one after the other, seed 0 gives the same test metrics.
    assert proc.stdout.count("[refit ") == 4
    proc = ltr_bench(tmp_path, f"refit_best={sweep_dir}", "seed=0", "refit_jobs=1", *COMMON)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = [r for r in _runs(client)["protocol"] if r.data.tags.get(TAG_REFIT) == "true"]
    for study in studies:
        tested = sorted(
            r.data.metrics["test/ndcg_at_10"]
            for r in again
            if r.data.tags.get(TAG_STUDY) == study["study_name"] and r.data.params["seed"] == "0"
        )
        assert len(tested) == 2 and tested[0] == tested[1]


def _synthetic_grid_sweep(tmp_path: Path, *overrides: str) -> dict:
    """A grid sweep of DirectRanker on small synthetic data; its ``optimization_results.yaml``."""
    proc = ltr_bench(
        tmp_path,
        "-m",
        "hydra/sweeper=ltr_optuna",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=null",
        *overrides,
        "dataset.n_train=300",
        "dataset.n_vali=100",
        "dataset.n_test=200",
        "dataset.n_features=10",
        "dataset.docs_per_query=20",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *COMMON,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return yaml.safe_load((tmp_path / "sweep" / "optimization_results.yaml").read_text())


def test_failing_trial_is_recorded_and_the_sweep_goes_on(tmp_path: Path) -> None:
    results = _synthetic_grid_sweep(
        tmp_path, "optimizer.lr=choice(1e38,0.004)", "hydra.sweeper.max_failure_rate=0.5"
    )
    assert results["n_failed"] == 1 and results["n_complete"] == 1
    assert results["best_params"] == {"optimizer.lr": 0.004}
    runs = _runs(_client(tmp_path))
    assert sorted(r.info.status for r in runs["trial"]) == ["FAILED", "FINISHED"]


def test_reevaluation_scores_the_top_trial_on_fresh_inner_cv_repeats(tmp_path: Path) -> None:
    # Two grid trials on synthetic data (2-fold inner CV); the best is re-evaluated on
    # protocol.reevaluation_repeats=2 new repeats (4 more inner folds) and pooled with its search.
    results = _synthetic_grid_sweep(
        tmp_path, "optimizer.lr=choice(0.004,0.0001)", "hydra.sweeper.reevaluate.top_k=1"
    )
    (rec,) = results["reevaluated"]
    assert rec["trial"] == results["search_best_trial"] == results["best_trial"]
    assert (rec["search_n"], rec["reevaluation_n"]) == (2, 4)
    assert results["best_value"] == pytest.approx(
        (2 * rec["search_value"] + 4 * rec["reevaluation_value"]) / 6
    )
    client = _client(tmp_path)
    runs = _runs(client)
    (sweep_run,) = runs["sweep"]
    assert sweep_run.data.metrics["best_objective"] == pytest.approx(results["best_value"])
    assert sweep_run.data.metrics["search_best_objective"] == pytest.approx(
        results["search_best_value"]
    )
    assert sweep_run.data.metrics["n_trials_reevaluated"] == 1
    (again,) = [r for r in runs["trial"] if r.data.tags.get("ltr.reevaluation") == "true"]
    assert again.info.run_name == f"direct_ranker · trial {rec['trial']} · re-evaluation"
    assert again.data.tags[TAG_TRIAL] == str(rec["trial"])
    assert again.data.metrics["objective"] == pytest.approx(rec["reevaluation_value"])
    history = client.get_metric_history(again.info.run_id, "cv_fold/ndcg_at_10")
    assert len(history) == 4
    # Its folds are repeats 1 and 2: other query assignments than the search's repeat 0.
    trial_dirs = sorted((tmp_path / "sweep").glob("[0-9]*/results.json"))
    names = {
        re.search(r"(repeat\d+/)?inner\d+$", f["name"]).group(0)
        for p in trial_dirs
        for f in json.loads(p.read_text())["folds"]
    }
    assert {
        "inner0",
        "inner1",
        "repeat1/inner0",
        "repeat1/inner1",
        "repeat2/inner0",
        "repeat2/inner1",
    } <= names
    assert not any(k.startswith("test/") for k in again.data.metrics)


def test_a_config_error_inside_instantiate_aborts_the_sweep(tmp_path: Path) -> None:
    # The missing folder is a UserError raised in LetorFolds' constructor, which Hydra's
    # instantiate wraps: still a config error, so the first trial stops the sweep (no 30 failures).
    proc = ltr_bench(
        tmp_path,
        "-m",
        "search=direct_ranker",
        "dataset=mq2008",
        f"dataset.root={tmp_path / 'nowhere'}",
        "protocol=letor_folds",
        "dataset.fold=1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *COMMON,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert f"dataset folder {tmp_path / 'nowhere'}/MQ2008 does not exist" in proc.stderr
    log = proc.stdout + proc.stderr
    assert log.count("aborting the sweep") == 1 and "Traceback" not in log
    assert "recorded as FAIL, sweep goes on" not in log
