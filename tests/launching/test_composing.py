"""ltr_bench.launching.composing: a job composed through a worker's cache is the job Hydra composes.

The suite runs every sweep in the ``check`` mode (tests/conftest.py), which composes each job
both ways and fails it on any difference; here the cache is compared with
Hydra's composing over many config values, group choices, additions and deletions.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from ltr_bench.config_tree import config_dir
from ltr_bench.launching import composing
from ltr_bench.sweeper.search.space import format_value


@pytest.fixture(scope="module")
def hydra_loader() -> Iterator[tuple[Any, Any]]:
    """Hydra's config loader for the app's configs, and a sweep's master config."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode

    with initialize_config_dir(config_dir=str(config_dir()), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        args = ["hydra/launcher=joblib", "hydra/sweeper=ltr_optuna", "hydra.sweep.dir=sw"]
        master = loader.load_configuration("config", args, RunMode.MULTIRUN)
        composing._install()
        yield loader, master


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    composing.forget()
    yield
    composing.forget()


def _both(hydra_loader: tuple[Any, Any], overrides: list[str]) -> tuple[Any, Any]:
    loader, master = hydra_loader
    cached = composing.CachedLoader(loader).load_sweep_config(master, overrides)
    return cached, loader.load_sweep_config(master, overrides)


texts = st.text(st.sampled_from("ab ,'\"\\=:[]{}$%"), max_size=8)
values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.integers(-(10**6), 10**6),
    texts,
    st.none(),
    st.booleans(),
    st.lists(st.integers(1, 64), max_size=3),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 9), max_size=2),
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    model=st.sampled_from(["direct_ranker", "ranknet"]),
    lr=st.floats(1e-6, 1.0),
    extra=values,
    name=texts,
    delete=st.booleans(),
)
def test_a_cached_composition_is_hydras(
    hydra_loader: tuple[Any, Any], model: str, lr: float, extra: Any, name: str, delete: bool
) -> None:
    # The shape's first job, composed by Hydra and kept (hypothesis runs every example in one
    # call of the fixtures: an earlier example of this model kept it already, as a worker would).
    loader, master = hydra_loader
    first = [f"model={model}", "optimizer.lr=0.5", "++sweep.trial_number=0"]
    composing.CachedLoader(loader).load_sweep_config(master, first)
    trees, repos = len(composing._trees), len(composing._repos)
    job = [
        f"model={model}",
        f"optimizer.lr={lr!r}",
        f"++sweep.extra={format_value(extra)}",
        f"++sweep.study_name={format_value(name)}",
        "++sweep.trial_number=1",
        *(["~model.dropout"] if delete else []),
    ]
    try:
        fresh = loader.load_sweep_config(master, job)
    except Exception as e:  # noqa: BLE001 - e.g. a value OmegaConf reads as a broken ${..}
        with pytest.raises(type(e)):
            composing.CachedLoader(loader).load_sweep_config(master, job)
        return
    cached = composing.CachedLoader(loader).load_sweep_config(master, job)
    assert composing.difference(cached, fresh) is None
    assert OmegaConf.select(cached, "sweep.extra") == extra and cached.optimizer.lr == lr
    assert len(composing._trees) == trees  # the job reused its shape's kept tree
    assert len(composing._repos) == repos == 1  # ... and the config sources


def test_each_shape_keeps_its_own_tree_and_the_oldest_is_forgotten(
    hydra_loader: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(composing, "MAX_SHAPES", 2)
    for model in ("direct_ranker", "ranknet", "listnet", "ranknet"):
        cached, fresh = _both(hydra_loader, [f"model={model}", "optimizer.lr=0.1"])
        assert composing.difference(cached, fresh) is None
        assert cached.model.name == fresh.model.name
    assert len(composing._trees) == 2 and len(composing._composed) == 2
    groups = [shape[-1] for shape in composing._trees]
    assert [g for g in groups if "model=direct_ranker" in g] == []  # the oldest went


def test_difference_names_the_first_place_two_configs_differ() -> None:
    a = OmegaConf.create({"x": {"y": 1, "z": [1, 2]}})
    assert composing.difference(a, OmegaConf.create({"x": {"y": 1, "z": [1, 2]}})) is None
    assert composing.difference(a, OmegaConf.create({"x": {"y": 2, "z": [1, 2]}})) == (
        "<root>.x.y: 1 against 2"
    )
    assert "<root>.x.z: keys" in str(
        composing.difference(a, OmegaConf.create({"x": {"y": 1, "z": [1]}}))
    )
    locked = OmegaConf.create({"x": {"y": 1, "z": [1, 2]}})
    OmegaConf.set_struct(locked.x, True)
    assert "<root>.x: flags" in str(composing.difference(a, locked))


def _payload(hydra_context: Any, singleton_state: dict[Any, Any]) -> bytes:
    """What the sweeper sends with each job: context, config, task and singleton state, pickled."""
    import pickle

    return pickle.dumps((hydra_context, OmegaConf.create(), print, singleton_state))


def _recording(ran: list[Any]) -> Any:
    """A stand-in for the joblib launcher's job runner: records its arguments."""
    from types import SimpleNamespace

    def run(*args: Any) -> Any:
        ran.append(args)
        return SimpleNamespace(cfg="task config", hydra_cfg="hydra config", return_value=0.5)

    return run


def test_off_leaves_composing_to_hydra(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(composing.hydra_private, "joblib_execute_job", lambda: _recording(ran))
    monkeypatch.setattr(composing.job_run, "job_runner", lambda: _recording(ran))
    monkeypatch.setenv(composing.CACHE_ENV, "off")
    ret = composing.execute_job(0, [], _payload("Hydra's context", {}))
    assert ran[0][2] == "Hydra's context"  # Hydra's own loader
    assert (ret.cfg, ret.hydra_cfg, ret.return_value) == (None, None, 0.5)  # configs not sent back
    monkeypatch.setenv(composing.CACHE_ENV, "on")
    from hydra.types import HydraContext

    hydra_context = HydraContext(config_loader=object(), callbacks=None)  # type: ignore[arg-type]
    composing.execute_job(1, [], _payload(hydra_context, {}))
    assert isinstance(ran[1][2].config_loader, composing.CachedLoader)


def test_a_search_path_of_its_own_gets_config_sources_of_its_own(
    hydra_loader: tuple[Any, Any], tmp_path: Any
) -> None:
    extra = tmp_path / "extra" / "model"
    extra.mkdir(parents=True)
    (extra / "mine.yaml").write_text("# @package _global_\nmodel:\n  name: mine_from_searchpath\n")
    searchpath = f"hydra.searchpath=[{format_value('file://' + str(tmp_path / 'extra'))}]"
    for job in (["optimizer.lr=0.1"], [searchpath, "model=mine"], [searchpath, "model=mine"]):
        cached, fresh = _both(hydra_loader, job)
        assert composing.difference(cached, fresh) is None
    assert cached.model.name == "mine_from_searchpath"
    assert len(composing._repos) == 2  # the app's search path, and the one with extra/


def test_a_worker_keeps_the_plugins_its_first_job_found(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(composing.hydra_private, "joblib_execute_job", lambda: _recording(ran))
    monkeypatch.setattr(composing.job_run, "job_runner", lambda: _recording(ran))
    warm = object()
    monkeypatch.setattr(composing.hydra_private, "warm_plugins", lambda: warm)
    from hydra.types import HydraContext

    hydra_context = HydraContext(config_loader=object(), callbacks=None)  # type: ignore[arg-type]
    composing.execute_job(0, [], _payload(hydra_context, {"instances": {}}))
    assert ran[0][5]["instances"][object] is warm  # Hydra's set_state finds them: no new search
    monkeypatch.setenv(composing.CACHE_ENV, "off")
    composing.execute_job(1, [], _payload(hydra_context, {"instances": {}}))
    assert ran[1][5]["instances"] == {}


def test_the_compose_api_reads_each_shape_once_within_a_block_and_forgets_it_after(
    hydra_loader: tuple[Any, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltr_bench.experiments.common import compose_run_config

    monkeypatch.setenv(composing.CACHE_ENV, "on")
    loader, master = hydra_loader
    composing.CachedLoader(loader).load_sweep_config(master, ["model=ranknet"])  # a sweep's
    sweeps = list(composing._trees)
    compose_run_config(["model=listnet"])
    assert list(composing._trees) == sweeps  # outside a block: Hydra's composing, nothing kept
    job = ["model=listnet", "optimizer.lr=0.25", "seed=3"]
    with composing.configs_read_once():
        compose_run_config(["model=listnet", "seed=1"])  # the shape's first: Hydra's, kept
        with composing.configs_read_once():  # part of the outer block
            cached = compose_run_config(job)
        assert len(composing._trees) == len(sweeps) + 1  # one shape: the group choice
    assert list(composing._trees) == sweeps  # the block's shape forgotten, the sweep's kept
    fresh = compose_run_config(job)
    assert composing.difference(cached, fresh) is None
    assert (cached.seed, cached.optimizer.lr, cached.model.name) == (3, 0.25, fresh.model.name)


@pytest.mark.parametrize("experiment", ["claims", "table1", "fig2c", "leaderboard"])
def test_an_experiments_configs_composed_through_the_cache_are_hydras(
    experiment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In ``check`` mode every config composed through the cache is also composed by Hydra and
    compared: the experiment's run config (with and without its ``hydra`` node, as a ledger's
    in-process run composes it) and a dataset's."""
    from ltr_bench.experiments.common import compose_run_config
    from ltr_bench.experiments.ledger.in_process import _compose

    monkeypatch.setenv(composing.CACHE_ENV, "check")
    with composing.configs_read_once():
        first = compose_run_config([f"experiment={experiment}", "scale=quick", "seed=0"])
        again = compose_run_config(
            [f"experiment={experiment}", "scale=quick", "seed=5", "++experiment.extra=1"]
        )
        assert (again.seed, again.experiment.extra) == (5, 1)
        assert first.experiment.title == again.experiment.title
        hydra = _compose([f"experiment={experiment}", "scale=quick", "seed=6"])
        assert hydra.seed == 6 and "runtime" in hydra.hydra
        for seed in (1, 2):
            assert compose_run_config(["dataset=mq2008", f"seed={seed}"]).seed == seed
        assert len({shape[0] for shape in composing._trees}) == 1  # one block's


def test_check_mode_fails_a_config_the_cache_composes_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ltr_bench.experiments.common import compose_run_config

    monkeypatch.setenv(composing.CACHE_ENV, "check")
    monkeypatch.setattr(composing, "difference", lambda a, b: "<root>.seed: 1 against 2")
    with composing.configs_read_once(), pytest.raises(AssertionError, match="at <root>.seed"):
        compose_run_config(["seed=1"])


def _run_app(
    args: list[str], tmp_path: Any, config_path: str | None = None, block: bool = True
) -> list[tuple[Any, Any]]:
    """Run a Hydra app over the app's configs (or ``config_path``'s) as ``ltr-bench`` does, inside
    :func:`composing.command_composed_once` or not; each job's config and ``hydra`` node."""
    import contextlib

    import hydra
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from ltr_bench.config_tree import CONFIG_PATH
    from tests.inprocess import restored

    seen: list[tuple[Any, Any]] = []

    def task(cfg: Any) -> float:
        seen.append((OmegaConf.create(cfg), OmegaConf.create(HydraConfig.get())))
        return 0.5  # an objective, for a sweeper

    app = hydra.main(
        version_base="1.3", config_path=config_path or CONFIG_PATH, config_name="config"
    )
    argv = ["ltr-bench", *args, "hydra.run.dir=run", "hydra.sweep.dir=sweep"]
    outer = GlobalHydra.instance().hydra  # (the module's hydra_loader fixture may hold one)
    GlobalHydra.instance().clear()
    try:
        with restored(tmp_path, {"HYDRA_FULL_ERROR": "1"}, argv):
            with composing.command_composed_once() if block else contextlib.nullcontext():
                app(task)()
    finally:
        GlobalHydra.instance().hydra = outer
    return seen


def _trees_built(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    from hydra._internal import defaults_list

    built: list[int] = []
    create = defaults_list._create_defaults_tree
    monkeypatch.setattr(
        defaults_list, "_create_defaults_tree", lambda *a, **k: built.append(1) or create(*a, **k)
    )
    return built


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["model=ranknet", "optimizer.lr=0.25", "+extra=1"],
        ["experiment=table1", "scale=quick"],
        ["-m", "hydra/sweeper=basic", "hydra/launcher=basic", "seed=1,2", "model=listnet"],
    ],
)
def test_a_command_composes_its_config_once_as_hydra_would(
    args: list[str], tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hydra composes a command's config twice (as a multirun, to read ``hydra.mode``; then to run
    it); in the command's block the second starts from the first's tree, and every job's config
    and ``hydra`` node are Hydra's own."""
    monkeypatch.setenv(composing.CACHE_ENV, "on")
    built = _trees_built(monkeypatch)
    cached = _run_app(args, tmp_path)
    assert len(built) == 1  # a multirun's jobs too: a seed is a config value, not a group
    assert not composing._trees  # forgotten when the command ends
    built.clear()
    fresh = _run_app(args, tmp_path, block=False)
    # Hydra: the command's config twice, and each job's as the sweeper checks it and to run it
    assert len(built) == 2 + (2 * len(fresh) if "-m" in args else 0)
    assert len(cached) == len(fresh) == (2 if "-m" in args else 1)
    for (cfg, node), (hydra_cfg, hydra_node) in zip(cached, fresh, strict=True):
        assert composing.difference(cfg, hydra_cfg) is None
        assert composing.difference(node, hydra_node) is None


def test_a_missing_default_skipped_in_a_multirun_is_an_error_in_a_run(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A multirun skips a config group whose default is ``???``; the tree Hydra composed so (to
    read ``hydra.mode``) is not the tree of the run, which fails as Hydra's does."""
    from hydra.errors import ConfigCompositionException

    conf = tmp_path / "conf"
    (conf / "db").mkdir(parents=True)
    (conf / "config.yaml").write_text("defaults:\n  - db: ???\n  - _self_\nx: 1\n")
    for name in ("a", "b"):
        (conf / "db" / f"{name}.yaml").write_text(f"name: {name}\n")
    monkeypatch.setenv(composing.CACHE_ENV, "check")
    for block in (True, False):
        with pytest.raises(ConfigCompositionException, match="You must specify 'db'"):
            _run_app([], tmp_path, str(conf), block=block)
        jobs = _run_app(["-m", "hydra/sweeper=basic", "db=a,b", "x=2"], tmp_path, str(conf), block)
        assert [(cfg.db.name, cfg.x) for cfg, _ in jobs] == [("a", 2), ("b", 2)]
        assert [cfg.db.name for cfg, _ in _run_app(["db=b"], tmp_path, str(conf), block)] == ["b"]


def test_check_mode_fails_a_command_config_the_cache_composes_otherwise(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(composing.CACHE_ENV, "check")
    monkeypatch.setattr(composing, "difference", lambda a, b: "<root>.seed: 1 against 2")
    with pytest.raises(AssertionError, match="command's config .* at <root>.seed"):
        _run_app(["seed=1"], tmp_path)


@pytest.mark.parametrize("mode", ["on", "check"])
def test_the_sweepers_jobs_start_from_the_commands_config(
    mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweeper's process composes its jobs (Hydra's basic launcher; a batch checked before
    it runs) from the command's tree; ``check`` compares each with Hydra's own."""
    monkeypatch.setenv(composing.CACHE_ENV, mode)
    built = _trees_built(monkeypatch)
    args = ["-m", "hydra/sweeper=ltr_optuna", "hydra.sweeper.n_trials=3"]
    jobs = _run_app([*args, "optimizer.lr=interval(0.001,0.01)", "seed=4"], tmp_path)
    assert [cfg.seed for cfg, _ in jobs] == [4, 4, 4]
    assert len({cfg.optimizer.lr for cfg, _ in jobs}) == 3
    if mode == "on":
        assert len(built) == 1
