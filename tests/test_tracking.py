"""ltr_bench.tracking (the package): URIs, config flattening, run lifecycle, store creation under a lock."""

from __future__ import annotations

import json
import logging.handlers
import multiprocessing as mp
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking.names import sanitize_key
from ltr_bench.tracking.params import flatten_config
from ltr_bench.tracking.run_tracker import NullTracker, RunTracker
from ltr_bench.tracking.signals import RunTerminated
from ltr_bench.tracking.store import ensure_experiment, resolve_tracking_uri
from ltr_bench.tracking.tracker import Tracker
from tests.waiting import HANG_GUARD_S


@pytest.fixture(scope="module")
def tracker(tmp_path_factory: pytest.TempPathFactory) -> Tracker:
    """One store for the module (creating a SQLite store costs ~1.5 s of migrations)."""
    return Tracker.from_config(
        {"tracking_uri": "sqlite:///mlflow.db", "experiment_name": "t"},
        tmp_path_factory.mktemp("store"),
    )


def test_relative_sqlite_uri_is_resolved_against_the_start_directory(tmp_path: Path) -> None:
    assert (
        resolve_tracking_uri("sqlite:///mlflow.db", tmp_path) == f"sqlite:///{tmp_path}/mlflow.db"
    )
    assert resolve_tracking_uri("sqlite:///sub/x.db", tmp_path) == f"sqlite:///{tmp_path}/sub/x.db"
    assert resolve_tracking_uri("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert resolve_tracking_uri("http://host:5000", tmp_path) == "http://host:5000"
    assert resolve_tracking_uri(None, tmp_path) is None


def test_flatten_config_drops_hydra_and_keeps_lists_as_json() -> None:
    cfg = OmegaConf.create(
        {
            "seed": 3,
            "model": {"hidden": [64, 32], "opt": {"lr": 0.1, "name": "adam"}, "x": None},
            "hydra": {"run": {"dir": "out"}},
            "long": "a" * 7000,
            "ref": "${seed}",
            "objective": {"metric": "ndcg@10"},
            "empty": {},
        }
    )
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


def _create(uri: str, q: mp.Queue[str]) -> None:
    try:
        q.put(ensure_experiment(uri, "race"))
    except Exception as exc:  # noqa: BLE001 - any failure is reported to the parent
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
        p.join(HANG_GUARD_S)
    ids = [q.get(timeout=HANG_GUARD_S) for _ in procs]
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
    from ltr_bench.tracking.signals import install_signal_handlers

    old = signal.getsignal(signal.SIGTERM)
    try:
        install_signal_handlers()
        with pytest.raises(RunTerminated):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs at the next bytecode boundary
                pass
    finally:
        signal.signal(signal.SIGTERM, old)


def _interrupt_inside_metric_writes(store: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the SQLite store receive SIGINT in the middle of a metric write (after its inserts,
    before its commit), where a Ctrl-C during training lands now and then (seen in CI: the
    run's end as KILLED then failed with "database is locked" and printed a traceback)."""
    inner = store._update_latest_metrics_if_necessary  # type: ignore[attr-defined]

    def interrupted(*args: object, **kwargs: object) -> object:
        signal.raise_signal(signal.SIGINT)
        for _ in range(1000):  # a Python handler runs at the next bytecode boundary
            pass
        return inner(*args, **kwargs)

    monkeypatch.setattr(store, "_update_latest_metrics_if_necessary", interrupted)


def _run_interrupted_during(tracker: Tracker, monkeypatch: pytest.MonkeyPatch, write: Any) -> Any:
    """``write(run_id)`` inside a tracked run, with Ctrl-C raising KeyboardInterrupt; the
    held Ctrl-C must come once the write is done. Returns the run as the store has it then."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with tracker.run("interrupted write", {}) as run_id:
                write(run_id)
                raise AssertionError("the held Ctrl-C was never raised")
    finally:
        signal.signal(signal.SIGINT, old)
    monkeypatch.undo()
    return tracker.client.get_run(run_id)


def test_ctrl_c_inside_a_store_write_is_held_until_the_write_is_done(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write completes, then KeyboardInterrupt; the run still ends KILLED."""

    def write(run_id: str) -> None:
        _interrupt_inside_metric_writes(tracker.client._tracking_client.store, monkeypatch)
        tracker.client.log_metric(run_id, "m", 1.5, step=3)

    run = _run_interrupted_during(tracker, monkeypatch, write)
    assert run.info.status == "KILLED"
    assert run.data.metrics == {"m": 1.5}  # written whole, not rolled back half-way


def test_ctrl_c_inside_a_lightning_metric_write_is_held(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through the Lightning logger that writes the per-epoch curves."""

    def write(run_id: str) -> None:
        logger = tracker.lightning_logger(run_id)
        _interrupt_inside_metric_writes(logger.experiment._tracking_client.store, monkeypatch)
        logger.log_metrics({"vali_ndcg@10": 0.5, "epoch": 2})

    run = _run_interrupted_during(tracker, monkeypatch, write)
    assert run.info.status == "KILLED"
    assert run.data.metrics == {"curve/vali_ndcg_at_10": 0.5}


def test_nesting_params_metrics_and_history(tracker: Tracker) -> None:
    client = tracker.client
    with tracker.run("parent", {keys.TAG_ROLE: keys.ROLE_PROTOCOL}) as parent:
        with tracker.run(
            "fold 0", {keys.TAG_ROLE: keys.ROLE_FOLD, keys.TAG_FOLD: 0}, parent_id=parent
        ) as child:
            tracker.log_params(child, {"model.lr": 0.1, "a@b": "x"})
            tracker.log_metrics(child, {"test/ndcg@10": 0.5, "bad": float("nan"), "none": None})
            # A Lightning ranker logs its epochs itself; history must not duplicate them.
            logger = tracker.lightning_logger(child)
            logger.log_metrics({"vali_ndcg@10": 0.25, "epoch": 0}, step=17)  # step: batches
            logger.log_metrics({"vali_ndcg@10": 0.5, "epoch": 1}, step=35)
            logger.log_hyperparams({"lr": 0.1})  # params come from the config, not Lightning
            logger.finalize("success")  # must not end the run
            assert client.get_run(child).info.status == "RUNNING"
            tracker.log_history(
                child,
                [
                    {"epoch": 0, "train_loss": 1.0, "vali_ndcg@10": 0.25},
                    {"epoch": 1, "train_loss": 0.5, "vali_ndcg@10": 0.5},
                ],
            )
    run = client.get_run(child)
    assert run.data.tags[keys.MLFLOW_PARENT] == parent
    assert run.data.params == {"model.lr": "0.1", "a_at_b": "x"}
    assert run.data.metrics["test/ndcg_at_10"] == 0.5
    assert "bad" not in run.data.metrics and "none" not in run.data.metrics
    loss = client.get_metric_history(child, "curve/train_loss")
    assert [(m.step, m.value) for m in loss] == [(0, 1.0), (1, 0.5)]
    # The logger's epoch curve uses the history's name and the epoch as step, and is not
    # logged twice; curves live under curve/, away from the fold's final vali/ndcg_at_10.
    vali = client.get_metric_history(child, "curve/vali_ndcg_at_10")
    assert sorted((m.step, m.value) for m in vali) == [(0, 0.25), (1, 0.5)]
    assert set(run.data.metrics) == {"test/ndcg_at_10", "curve/train_loss", "curve/vali_ndcg_at_10"}


def test_history_with_rounds_uses_them_as_steps(tracker: Tracker) -> None:
    with tracker.run("gbdt", {}) as rid:
        tracker.log_history(
            rid, [{"round": 5, "vali_ndcg@10": 0.1}, {"round": 6, "vali_ndcg@10": 0.2}]
        )
    hist = tracker.client.get_metric_history(rid, "curve/vali_ndcg_at_10")
    assert [(m.step, m.value) for m in hist] == [(5, 0.1), (6, 0.2)]
    assert set(tracker.client.get_run(rid).data.metrics) == {"curve/vali_ndcg_at_10"}


def test_sweep_run_is_found_by_study_tag(tracker: Tracker) -> None:
    a = tracker.find_or_create_sweep_run("study-a", {keys.TAG_MODEL: "m"})
    b = tracker.find_or_create_sweep_run("study-a", {})
    c = tracker.find_or_create_sweep_run("study-b", {})
    odd = tracker.find_or_create_sweep_run("it's `odd` = 'x'", {})
    assert a == b != c != odd == tracker.find_or_create_sweep_run("it's `odd` = 'x'", {})
    run = tracker.client.get_run(a)
    assert run.data.tags[keys.TAG_STUDY] == "study-a"
    assert run.data.tags[keys.TAG_ROLE] == keys.ROLE_SWEEP
    assert run.info.status == "FINISHED"  # never left RUNNING


def test_a_process_searches_for_a_sweep_run_once_and_checks_it_after(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    searches: list[str] = []
    search_runs = mlflow.MlflowClient.search_runs

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        searches.append("search")
        return search_runs(self, *args, **kwargs)

    monkeypatch.setattr(mlflow.MlflowClient, "search_runs", counted)
    first = tracker.find_or_create_sweep_run("study-once", {})
    assert [tracker.find_or_create_sweep_run("study-once", {}) for _ in range(3)] == [first] * 3
    assert len(searches) == 1
    # a sweep run deleted meanwhile (e.g. in the UI) fails the check: searched for, made anew
    tracker.client.delete_run(first)
    again = tracker.find_or_create_sweep_run("study-once", {})
    assert again != first and len(searches) == 2


def test_pyfunc_model_is_logged_with_its_signature_and_registered(
    tracker: Tracker, tmp_path: Path
) -> None:
    from ltr_bench.tracking.model_logging import PyfuncModel

    data = tmp_path / "data"
    data.mkdir()
    (data / "params.txt").write_text("w")
    model = PyfuncModel(
        data,
        "ltr_bench.saved_model",
        [("qid", "long", False), ("f1", "float", True)],
        [("score", "double", True)],
        {"model": "toy"},
    )
    handler = logging.handlers.BufferingHandler(capacity=10_000)  # keeps what MLflow logs
    logging.getLogger("mlflow").addHandler(handler)
    with tracker.run("m", {}) as rid:
        tracker.register_model = "toy_model"
        try:
            model_id = tracker.log_model(rid, model)
            tracker.log_model(rid, model)  # a second version of the same registered model
        finally:
            tracker.register_model = None
            logging.getLogger("mlflow").removeHandler(handler)
    # the pinned requirements are the installed versions: MLflow's check of them finds no mismatch
    assert not [r.getMessage() for r in handler.buffer if "mismatch" in r.getMessage()]
    logged = tracker.client.get_logged_model(model_id)
    assert (
        logged.name == "model" and logged.source_run_id == rid and logged.params == {"model": "toy"}
    )
    files = {a.path for a in tracker.client.list_logged_model_artifacts(model_id)}
    assert {"MLmodel", "data"} <= files and not any(f.endswith(".pkl") for f in files)
    versions = tracker.client.search_model_versions("name = 'toy_model'")
    assert sorted(int(v.version) for v in versions) == [1, 2]


def test_disabled_tracking_is_a_no_op(tmp_path: Path) -> None:
    t = Tracker.from_config({"enabled": False}, tmp_path)
    assert isinstance(t, NullTracker) and not t.enabled
    # an implementation of the protocol, not a Tracker with every method overridden
    assert isinstance(t, RunTracker) and not isinstance(t, Tracker)
    with t.run("x", {}) as rid:
        t.log_metrics(rid, {"a": 1.0})
        assert t.lightning_logger(rid) is None
    assert not (tmp_path / "mlflow.db").exists()


def test_missing_store_folder_is_a_user_error(tmp_path: Path) -> None:
    from ltr_bench.errors import UserError

    with pytest.raises(UserError, match="tracking.tracking_uri"):
        Tracker.from_config({"tracking_uri": "sqlite:///nope/mlflow.db"}, tmp_path)


# ------------------------------------------------------------------ what a run shows in the UI
def _compose(*overrides: str, hydra: bool = False):
    from hydra import compose, initialize_config_dir

    from ltr_bench.cli.main import config_dir

    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=hydra)
    OmegaConf.set_struct(cfg, False)
    return cfg


def test_params_are_the_choices_each_once() -> None:
    from ltr_bench.tracking.params import run_params
    from ltr_bench.tracking.tags import machine_tags

    base = ["threads=1", "dataset=mq2008", "dataset.fold=1", "dataset.root=/data/letor"]
    direct = run_params(_compose("model=direct_ranker", *base))
    ranknet = run_params(_compose("model=ranknet", *base))
    gbdt = run_params(_compose("model=lambdamart", *base))
    assert len(direct) <= 40 and len(ranknet) <= 40 and len(gbdt) <= 30
    # group choices, effective hyperparameters, the override of a non-hyperparameter group
    assert {
        k: direct[k]
        for k in (
            "model",
            "loss",
            "optimizer",
            "activation",
            "dataset",
            "protocol",
            "eval",
            "trainer",
        )
    } == {
        "model": "direct_ranker",
        "loss": "l2",
        "optimizer": "adam",
        "activation": "tanh",
        "dataset": "mq2008",
        "protocol": "single",
        "eval": "paper",
        "trainer": "cpu",
    }
    assert direct["optimizer.lr"] == "0.004" and direct["model.hidden_sizes"] == "[64, 32]"
    assert direct["dataset.fold"] == "1" and direct["seed"] == "0"
    # nothing twice, no metadata, no machine facts, no unchanged option values
    for params in (direct, ranknet, gbdt):
        assert not any(
            k.startswith(
                (
                    "model.loss",
                    "model.optimizer",
                    "model.trainer",
                    "model.activation",
                    "hydra",
                    "tracking",
                )
            )
            for k in params
        )
        assert not any(
            s in k for k in params for s in ("_target_", "_recursive_", "accepts", "name")
        )
        assert (
            "model.seed" not in params and "threads" not in params and "dataset.root" not in params
        )
        assert not any(k.startswith(("eval.", "protocol.", "trainer.")) for k in params)
    # one family, one key set: direct_ranker and ranknet differ only in loss/optimizer options
    only = set(direct) ^ set(ranknet)
    assert all(k.startswith(("loss.", "optimizer.")) for k in only), only
    assert machine_tags(_compose(*base))["ltr.dataset.root"] == "/data/letor"
    assert machine_tags(_compose(*base))["ltr.threads"] == "1"
    # a changed option value is a param; its default is not
    changed = run_params(_compose("eval.preprocessing.feature_transform=standard", *base))
    assert changed["eval.preprocessing.feature_transform"] == "standard"


def test_an_option_file_is_read_again_once_edited(tmp_path: Path) -> None:
    """The option files behind a run's params are read once per process, and again when edited."""
    from ltr_bench.tracking import params

    option = tmp_path / "adam.yaml"
    option.write_text("defaults: [base]\nlr: 0.5\n")
    assert params._option_content(option) == {"defaults": ["base"], "lr": 0.5}
    assert params._option_content(option) is params._option_content(option)  # read once
    option.write_text("defaults: [base]\nlr: 0.25\n# longer now\n")
    assert params._option_content(option)["lr"] == 0.25


def test_runs_carry_mlflow_standard_fields_and_dataset_inputs(tracker: Tracker) -> None:
    with tracker.run("r", {}, description="ltr-bench model=x") as rid:
        tracker.log_inputs(
            rid,
            [
                {
                    "name": "mq2008/Fold1",
                    "digest": f"abc-{c}",
                    "context": c,
                    "source": {"uri": "/d"},
                }
                for c in ("train", "vali", "test")
            ],
        )  # each part has its own fingerprint
        tracker.rename(rid, "better name")
    run = tracker.client.get_run(rid)
    tags = run.data.tags
    assert tags["mlflow.user"] and tags["mlflow.source.type"] == "LOCAL"
    assert tags["mlflow.note.content"] == "ltr-bench model=x"
    assert len(tags["mlflow.source.git.commit"]) == 40  # the clone's commit (tests run in it)
    assert tags[keys.TAG_INVOCATION] and run.info.run_name == "better name"
    inputs = {
        (i.dataset.name, i.dataset.digest, i.tags[0].value) for i in run.inputs.dataset_inputs
    }
    assert inputs == {("mq2008/Fold1", f"abc-{c}", c) for c in ("train", "vali", "test")}
    exp = tracker.client.get_experiment(tracker.experiment_id)
    assert exp.tags[keys.EXPERIMENT_KIND] == keys.EXPERIMENT_KIND_ML
    view = json.loads(exp.tags[keys.SAVED_VIEW_PREFIX + keys.SAVED_VIEW_ID])
    assert view["name"] == keys.SAVED_VIEW_NAME and isinstance(view["createdAt"], int)
    assert "metrics.`test/ndcg_at_10`" in json.loads(view["state"])["selectedColumns"]


def test_links_open_the_machine_learning_view_with_a_filter() -> None:
    from urllib.parse import parse_qs, urlsplit

    from ltr_bench.tracking.links import filter_eq, format_links, ui_link

    f = filter_eq(keys.TAG_STUDY, "s-1")
    assert f == "tags.`ltr.study` = 's-1'"
    url = ui_link("sqlite:////x/mlflow.db", "3", f)
    assert url.startswith("http://127.0.0.1:5000/#/experiments/3/runs?")
    query = parse_qs(urlsplit(url).fragment.split("?", 1)[1])
    assert query == {"workflowType": ["machine_learning"], "searchFilter": [f]}
    assert ui_link("http://host:5000/", "3").startswith("http://host:5000/#/experiments/3/runs?")
    text = format_links("sqlite:////x/mlflow.db", "3", f, "sweep")
    assert "mlflow ui --backend-store-uri sqlite:////x/mlflow.db" in text and f in text
    assert f"viewStateShareKey={keys.SAVED_VIEW_ID}" in text


def test_sweep_run_gets_space_budget_and_convergence(tracker: Tracker, tmp_path: Path) -> None:
    from ltr_bench.tracking.sweep_hooks import _log_convergence, sweep_params

    cfg = _compose(
        "model=direct_ranker", "search=direct_ranker", "hydra/sweeper/sampler=tpe", hydra=True
    )
    cfg = OmegaConf.merge(
        cfg,
        {
            "hydra": {
                "overrides": {"task": ["model.dropout=choice(0.0,0.5)"]},
                "runtime": {"choices": {"hydra/sweeper/sampler": "tpe"}},
            }
        },
    )
    params = sweep_params(
        cfg,
        {
            "n_trials": 4,
            "direction": "maximize",
            "storage": "postgresql://u:***@h/db",
            "sampler": "TPESampler",
        },
    )
    assert params["search.model.dropout"] == "choice(0.0,0.5)" and "model.dropout" not in params
    assert {params[k] for k in ("sampler", "n_trials", "direction")} == {"tpe", "4", "maximize"}
    assert params["storage"] == "postgresql://u:***@h/db" and params["model"] == "direct_ranker"
    assert len(params) <= 50
    csv = tmp_path / "trials.csv"
    csv.write_text(
        "number,value,state,datetime_complete\n0,0.5,COMPLETE,2026-01-01 10:00:00\n"
        "1,,FAIL,\n2,0.7,COMPLETE,2026-01-01 10:01:00\n3,0.6,COMPLETE,2026-01-01 10:02:00\n"
    )
    rid = tracker.find_or_create_sweep_run("study-conv", {})
    _log_convergence(tracker, rid, csv, "maximize")
    _log_convergence(tracker, rid, csv, "maximize")  # a resumed study logs nothing twice
    best = tracker.client.get_metric_history(rid, keys.BEST_SO_FAR)
    assert sorted((m.step, m.value) for m in best) == [(0, 0.5), (2, 0.7), (3, 0.7)]
    trials = tracker.client.get_metric_history(rid, keys.TRIAL_OBJECTIVE)
    assert sorted((m.step, m.value) for m in trials) == [(0, 0.5), (2, 0.7), (3, 0.6)]


def test_the_sweep_hooks_the_config_names_resolve() -> None:
    """The sweeper calls its hooks by the dotted paths in conf/config.yaml and only warns when
    one fails, so a path that no longer resolves would go unnoticed in a sweep."""
    from hydra.utils import get_method

    from ltr_bench.tracking import sweep_hooks

    cfg = _compose()
    assert get_method(cfg.sweep.on_study_end) is sweep_hooks.log_study_to_mlflow
    assert get_method(cfg.sweep.on_interrupted) is sweep_hooks.mark_interrupted_runs


def test_a_dataset_inserted_by_a_parallel_worker_meanwhile_is_linked_not_an_error(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two sweep workers logging the same new dataset: MLflow checks which datasets exist, then
    inserts the missing ones, so the later worker's insert breaks the unique constraint
    (``datasets.experiment_id, name, digest``) when the other committed in between. As MLflow
    raises it here, after the rival's insert; the run must get its inputs, not fail."""
    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException

    part = {"name": "race/Fold1", "digest": "same-digest", "context": "train", "source": {}}
    with tracker.run("rival", {}) as rival:
        tracker.log_inputs(rival, [part])  # the other worker's insert, committed first
    real = tracker.client.log_inputs
    calls = []

    def raced(run_id: str, datasets: Any = None, **kwargs: Any) -> None:
        calls.append(run_id)
        if len(calls) == 1:
            cause = sqlalchemy.exc.IntegrityError(
                "INSERT INTO datasets", {}, Exception("UNIQUE constraint failed: datasets.digest")
            )
            raise MlflowException(message=cause) from cause
        real(run_id, datasets=datasets, **kwargs)

    monkeypatch.setattr(tracker.client, "log_inputs", raced)
    with tracker.run("late", {}) as late:
        tracker.log_inputs(late, [part])
    inputs = tracker.client.get_run(late).inputs.dataset_inputs
    assert [(i.dataset.name, i.dataset.digest) for i in inputs] == [("race/Fold1", "same-digest")]
    assert len(calls) == 2


def test_a_name_this_process_gave_a_run_is_not_written_again(
    tracker: Tracker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each trial of a worker names its study's sweep run alike: the same name is written once."""
    rid = tracker.start_run("first name", {})
    written: list[str] = []
    update_run = tracker.client.update_run

    def counting(run_id: str, name: str | None = None, **kwargs: Any) -> None:
        written.append(str(name))
        update_run(run_id, name=name, **kwargs)

    monkeypatch.setattr(tracker.client, "update_run", counting)
    for name in ("sweep a", "sweep a", "sweep b", "sweep b", "sweep a"):
        tracker.rename(rid, name)
    assert written == ["sweep a", "sweep b", "sweep a"]
    assert tracker.client.get_run(rid).info.run_name == "sweep a"


def test_a_process_tags_its_runs_with_one_commit_though_the_checkout_moves_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The code a process runs is the code it imported: every run it tags names the checkout's
    commit as the process first read it, in ``ltr.git_commit`` (the job's common tags) and in
    MLflow's ``mlflow.source.git.commit`` alike, after a commit made meanwhile too."""
    import subprocess

    from ltr_bench.tracking import tags

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@x", *args],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    git("init", "-q")
    git("commit", "-q", "--allow-empty", "-m", "first")
    first = git("rev-parse", "HEAD")
    monkeypatch.setattr(tags, "_package_checkout", lambda: tmp_path)
    monkeypatch.setattr(tags, "_CONTEXT", None)
    monkeypatch.setattr(tags, "_CHECKOUT", {})
    assert tags.git_commit() == tags.context_tags()[keys.MLFLOW_GIT_COMMIT] == first
    git("commit", "-q", "--allow-empty", "-m", "second")
    assert git("rev-parse", "HEAD") != first
    assert tags.git_commit() == tags.context_tags()[keys.MLFLOW_GIT_COMMIT] == first
    assert tags.git_commit(tmp_path) == git("rev-parse", "HEAD")  # a folder named: read as it is
