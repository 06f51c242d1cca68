"""ltr_bench.tracking: URIs, config flattening, run lifecycle, store creation under a lock."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking import (
    TAG_PARENT,
    TAG_STUDY,
    NullTracker,
    RunTerminated,
    Tracker,
    ensure_experiment,
    flatten_config,
    resolve_tracking_uri,
    sanitize_key,
)


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Tracker:
    """One store for the module (creating a SQLite store costs ~1.5 s of migrations)."""
    return Tracker.from_config(
        {"tracking_uri": "sqlite:///mlflow.db", "experiment_name": "t"},
        tmp_path_factory.mktemp("store"),
    )


def test_relative_sqlite_uri_is_resolved_against_the_start_directory(tmp_path: Path) -> None:
    assert resolve_tracking_uri("sqlite:///mlflow.db", tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    assert resolve_tracking_uri("sqlite:///sub/x.db", tmp_path) == f"sqlite:///{tmp_path}/sub/x.db"
    assert resolve_tracking_uri("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("http://host:5000", tmp_path) == "http://host:5000"
    assert resolve_tracking_uri(None, tmp_path) is None


def test_flatten_config_drops_hydra_and_keeps_lists_as_json() -> None:
    cfg = OmegaConf.create({
        "seed": 3,
        "model": {"hidden": [64, 32], "opt": {"lr": 0.1, "name": "adam"}, "x": None},
        "hydra": {"run": {"dir": "out"}},
        "long": "a" * 7000,
        "ref": "${seed}",
        "objective": {"metric": "ndcg@10"},
        "empty": {},
    })
    flat = flatten_config(cfg)
    assert flat["seed"] == "3"
    assert flat["model.hidden"] == "[64, 32]"
    assert flat["model.opt.lr"] == "0.1" and flat["model.opt.name"] == "adam"
    assert flat["model.x"] == "null"
    assert flat["ref"] == "3"  # resolved
    assert flat["objective.metric"] == "ndcg@10"  # values keep their @
    assert flat["empty"] == "{}"
    assert len(flat["long"]) == 6000  # MLflow's param value limit
    assert not any(k.startswith("hydra") for k in flat)


def test_sanitize_key_matches_tracking_keys() -> None:
    assert sanitize_key("vali_ndcg@10") == "vali_ndcg_at_10"
    assert sanitize_key(keys.metric_key("test", "ndcg@10")) == "test/ndcg_at_10"
    assert sanitize_key("a:b(c)") == "a_b_c_"


def _create(uri: str, q: "mp.Queue[str]") -> None:
    try:
        q.put(ensure_experiment(uri, "race"))
    except Exception as exc:  # reported to the parent
        q.put(f"ERROR {exc!r}")


def test_two_processes_create_a_fresh_store_at_once(tmp_path: Path) -> None:
    """Without the lock, two processes creating a new mlflow.db fail with
    'duplicate column name: step'; with it both get the same experiment."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_create, args=(uri, q)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    ids = [q.get(timeout=5) for _ in procs]
    assert all(not i.startswith("ERROR") for i in ids), ids
    assert len(set(ids)) == 1


def test_run_status_follows_the_block(tracker: Tracker) -> None:
    client = tracker.client
    with tracker.run("ok", {keys.TAG_ROLE: keys.ROLE_PROTOCOL}) as ok:
        assert client.get_run(ok).info.status == "RUNNING"
    with pytest.raises(ValueError):
        with tracker.run("bad", {}) as bad:
            raise ValueError("boom")
    with pytest.raises(KeyboardInterrupt):
        with tracker.run("ctrl-c", {}) as intr:
            raise KeyboardInterrupt
    with pytest.raises(RunTerminated):
        with tracker.run("sigterm", {}) as term:
            raise RunTerminated("signal 15")
    status = {r: client.get_run(r).info.status for r in (ok, bad, intr, term)}
    assert status == {ok: "FINISHED", bad: "FAILED", intr: "KILLED", term: "KILLED"}


def test_sigterm_handler_raises_in_main_thread() -> None:
    from ltr_bench.tracking import install_signal_handlers

    old = signal.getsignal(signal.SIGTERM)
    try:
        install_signal_handlers()
        with pytest.raises(RunTerminated):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                pass
    finally:
        signal.signal(signal.SIGTERM, old)


def test_nesting_params_metrics_and_history(tracker: Tracker) -> None:
    client = tracker.client
    with tracker.run("parent", {keys.TAG_ROLE: keys.ROLE_PROTOCOL}) as parent:
        with tracker.run("fold 0", {keys.TAG_ROLE: keys.ROLE_FOLD, keys.TAG_FOLD: 0}, parent_id=parent) as child:
            tracker.log_params(child, {"model.lr": 0.1, "a@b": "x"})
            tracker.log_metrics(child, {"test/ndcg@10": 0.5, "bad": float("nan"), "none": None})
            # A Lightning ranker logs its epochs itself; history must not duplicate them.
            logger = tracker.lightning_logger(child)
            logger.log_metrics({"vali/ndcg@10": 0.25, "epoch": 0}, step=17)  # step: batches
            logger.log_metrics({"vali/ndcg@10": 0.5, "epoch": 1}, step=35)
            logger.finalize("success")  # must not end the run
            assert client.get_run(child).info.status == "RUNNING"
            tracker.log_history(child, [
                {"epoch": 0, "train_loss": 1.0, "vali_ndcg@10": 0.25},
                {"epoch": 1, "train_loss": 0.5, "vali_ndcg@10": 0.5},
            ])
    run = client.get_run(child)
    assert run.data.tags[TAG_PARENT] == parent
    assert run.data.params == {"model.lr": "0.1", "a_at_b": "x"}
    assert run.data.metrics["test/ndcg_at_10"] == 0.5
    assert "bad" not in run.data.metrics and "none" not in run.data.metrics
    loss = client.get_metric_history(child, "train_loss")
    assert [(m.step, m.value) for m in loss] == [(0, 1.0), (1, 0.5)]
    # The logger's epoch curve uses the history's name and the epoch as step, and is not
    # logged twice; the final vali/ndcg_at_10 key stays free for the fold's final metric.
    vali = client.get_metric_history(child, "vali_ndcg_at_10")
    assert sorted((m.step, m.value) for m in vali) == [(0, 0.25), (1, 0.5)]
    assert "vali/ndcg_at_10" not in run.data.metrics and "epoch" not in run.data.metrics


def test_history_with_rounds_uses_them_as_steps(tracker: Tracker) -> None:
    with tracker.run("gbdt", {}) as rid:
        tracker.log_history(rid, [{"round": 5, "vali_ndcg@10": 0.1}, {"round": 6, "vali_ndcg@10": 0.2}])
    hist = tracker.client.get_metric_history(rid, "vali_ndcg_at_10")
    assert [(m.step, m.value) for m in hist] == [(5, 0.1), (6, 0.2)]
    assert "round" not in tracker.client.get_run(rid).data.metrics


def test_sweep_run_is_found_by_study_tag(tracker: Tracker) -> None:
    a = tracker.find_or_create_sweep_run("study-a", {keys.TAG_MODEL: "m"})
    b = tracker.find_or_create_sweep_run("study-a", {})
    c = tracker.find_or_create_sweep_run("study-b", {})
    odd = tracker.find_or_create_sweep_run("it's `odd` = 'x'", {})
    assert a == b != c != odd == tracker.find_or_create_sweep_run("it's `odd` = 'x'", {})
    run = tracker.client.get_run(a)
    assert run.data.tags[TAG_STUDY] == "study-a"
    assert run.data.tags[keys.TAG_ROLE] == keys.ROLE_SWEEP
    assert run.info.status == "FINISHED"  # never left RUNNING


def test_pyfunc_model_is_logged_with_its_signature_and_registered(tracker: Tracker, tmp_path: Path) -> None:
    from ltr_bench.tracking import PyfuncModel

    data = tmp_path / "data"
    data.mkdir()
    (data / "params.txt").write_text("w")
    model = PyfuncModel(data, "ltr_bench.saved_model", [("qid", "long", False), ("f1", "float", True)],
                        [("score", "double", True)], {"model": "toy"})
    with tracker.run("m", {}) as rid:
        tracker.register_model = "toy_model"
        try:
            model_id = tracker.log_model(rid, model)
            tracker.log_model(rid, model)  # a second version of the same registered model
        finally:
            tracker.register_model = None
    logged = tracker.client.get_logged_model(model_id)
    assert logged.name == "model" and logged.source_run_id == rid and logged.params == {"model": "toy"}
    files = {a.path for a in tracker.client.list_logged_model_artifacts(model_id)}
    assert {"MLmodel", "data"} <= files and not any(f.endswith(".pkl") for f in files)
    versions = tracker.client.search_model_versions("name = 'toy_model'")
    assert sorted(int(v.version) for v in versions) == [1, 2]


def test_disabled_tracking_is_a_no_op(tmp_path: Path) -> None:
    t = Tracker.from_config({"enabled": False}, tmp_path)
    assert isinstance(t, NullTracker) and not t.enabled
    with t.run("x", {}) as rid:
        t.log_metrics(rid, {"a": 1.0})
        assert t.lightning_logger(rid) is None
    assert not (tmp_path / "mlflow.db").exists()


def test_missing_store_folder_is_a_user_error(tmp_path: Path) -> None:
    from ltr_bench.errors import UserError

    with pytest.raises(UserError, match="tracking.tracking_uri"):
        Tracker.from_config({"tracking_uri": "sqlite:///nope/mlflow.db"}, tmp_path)
