"""The shipped search spaces (``conf/search/*.yaml``): each composes with its model, selects the
ltr_optuna sweeper, parses into Optuna distributions, and every value it can propose builds a
valid ranker. The ``_grid`` files reproduce the papers' grids exactly (their sizes are checked)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from hydra.utils import instantiate
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ltr_bench.cli.main import config_dir
from ltr_bench.errors import UserError
from ltr_bench.runner import check_compatibility
from ltr_bench.sweeper.config import SWEEPER_TARGET
from ltr_bench.sweeper.search.space import parse_search_space

SEARCH_DIR = Path(config_dir()) / "search"
SEARCHES = sorted(p.stem for p in SEARCH_DIR.glob("*.yaml"))
# The papers' grids: MLJ 2025 Table 4 and the authors' table1/gridsearch.py.
GRID_SIZES = {
    "direct_ranker_grid": 5 * 3 * 3 * 2 * 3 * 3,
    "ranknet_grid": 5 * 3 * 3 * 2,
    "listnet_grid": 5 * 3 * 3 * 2,
    "lambdamart_grid": 2 * 2,
    "adarank_grid": 3,
}
GBDT_EXTRA = ("xgboost", "catboost")  # models (and their packages) of the optional gbdt extra
# Table 4's RankNet* row, value for value.
TABLE4_DIRECT_RANKER = {
    "activation": ["tanh", "sigmoid", "linear"],
    "model.epochs": [5, 10, 30],
    "optimizer.weight_decay": [0.0, 0.001, 0.0001],
    "model.dropout": [0.0, 0.2, 0.5],
    "model.lr_decay_to": [1.0, 0.001, 0.0001],
}


def _compose(*overrides: str):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def _model_of(search: str) -> str:
    return OmegaConf.load(SEARCH_DIR / f"{search}.yaml").search_space.model


def _boundary_values(dist) -> list:
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution):
        return [dist.low, dist.high]
    assert isinstance(dist, FloatDistribution)
    return [dist.low, dist.high]


def test_every_model_has_a_search_space() -> None:
    models = {p.stem for p in (Path(config_dir()) / "model").glob("*.yaml")}
    assert models <= set(SEARCHES)
    assert set(GRID_SIZES) <= set(SEARCHES)


@pytest.mark.parametrize("search", SEARCHES)
def test_search_space_composes_parses_and_every_value_builds_a_ranker(search: str) -> None:
    model = _model_of(search)
    cfg = _compose(f"model={model}", f"search={search}")
    assert cfg.hydra.sweeper._target_ == SWEEPER_TARGET
    assert cfg.search_space.model == cfg.model.name == model
    space = parse_search_space(OmegaConf.to_container(cfg.hydra.sweeper.params))
    assert space.params  # and fixed overrides, passed to every trial's job (dasalc: n_ensemble=1)
    if search in GRID_SIZES:
        assert cfg.hydra.sweeper.sampler._target_.endswith("GridSearchSampler")
        assert cfg.hydra.sweeper.n_trials is None  # the whole grid
        assert space.size() == GRID_SIZES[search]
        assert len(list(space.grid_points())) == GRID_SIZES[search]
    else:
        assert cfg.hydra.sweeper.sampler._target_ == "optuna.samplers.TPESampler"
        assert cfg.hydra.sweeper.n_trials == 30
    if model in GBDT_EXTRA:  # these rankers are built only where the gbdt extra is installed
        pytest.importorskip(model, reason="the gbdt extra is not installed")
    # Every key exists in the model's config, and each boundary value composes into a valid ranker
    # with the space's fixed overrides, as a sweep's worker composes a trial's job (Hydra's
    # config loader's load_sweep_config).
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        task = [f"model={model}", f"search={search}"]
        master = loader.load_configuration("config", task, RunMode.MULTIRUN)
        for name, param in space.params.items():
            for value in _boundary_values(param.distribution):
                overrides = [*task, *space.fixed, param.override(value)]
                job = loader.load_sweep_config(master, overrides)
                check_compatibility(job)
                ranker = instantiate(job.model)
                assert ranker is not None, (name, value)


def test_direct_ranker_space_is_table4() -> None:
    cfg = _compose("search=direct_ranker")
    space = parse_search_space(OmegaConf.to_container(cfg.hydra.sweeper.params))
    for key, values in TABLE4_DIRECT_RANKER.items():
        assert list(space.params[key].distribution.choices) == values, key
    layers = [OmegaConf.create(c) for c in space.params["model.hidden_sizes"].values]
    assert {len(layer) for layer in layers} == {2, 3, 4, 5}  # 2-5 layers
    assert min(min(layer) for layer in layers) >= 5 and max(max(layer) for layer in layers) <= 200
    # Fixed by the model config: Adam, the L2 cost, tanh o1 without bias.
    assert (cfg.optimizer.name, cfg.loss.name) == ("adam", "l2")
    assert cfg.model.output_activation == "tanh" and cfg.model.output_bias is False


def test_search_space_of_another_model_is_rejected_before_anything_runs() -> None:
    cfg = _compose("model=ranknet", "search=direct_ranker")
    with pytest.raises(
        UserError, match="search=direct_ranker is the search space of model=direct_ranker"
    ):
        check_compatibility(cfg)


@pytest.mark.parametrize("search", [s for s in SEARCHES if s not in GRID_SIZES])
def test_tpe_searches_start_from_the_model_defaults(search: str) -> None:
    from ltr_bench.sweeper.state import default_point

    cfg = _compose(f"model={_model_of(search)}", f"search={search}")
    assert cfg.hydra.sweeper.enqueue_defaults is True
    assert (
        cfg.hydra.sweeper.reevaluate.top_k == 5
    )  # the search's best five are confirmed on fresh repeats
    space = parse_search_space(OmegaConf.to_container(cfg.hydra.sweeper.params))
    point = default_point(cfg, space)
    assert point  # at least one default lies in the space
    for name, value in point.items():
        expected = cfg.hydra.runtime.choices.get(name) or OmegaConf.select(cfg, name)
        assert (
            space.params[name].encode(
                OmegaConf.to_object(expected) if OmegaConf.is_config(expected) else expected, "t"
            )
            == value
        )
    if search == "direct_ranker":  # every swept key: trial 0 is exactly the default config
        assert point == {
            "activation": "tanh",
            "model.hidden_sizes": "[64,32]",
            "optimizer.lr": 0.004,
            "model.lr_decay_to": 1.0,
            "model.epochs": 10,
            "optimizer.weight_decay": 0.0,
            "model.dropout": 0.2,
        }


@pytest.mark.parametrize("search", SEARCHES)
def test_tpe_searches_race_with_successive_halving_and_grids_run_every_point(search: str) -> None:
    """The default chosen from benchmarks/bench_sweep_budget.py (docs/guides/sweeps.md, "Racing trials")."""
    cfg = _compose(f"model={_model_of(search)}", f"search={search}")
    target = cfg.hydra.sweeper.pruner._target_ if cfg.hydra.sweeper.pruner else None
    if search in GRID_SIZES:
        assert target in (None, "optuna.pruners.NopPruner")
    else:
        assert target == "optuna.pruners.SuccessiveHalvingPruner"
        assert cfg.hydra.sweeper.pruner.reduction_factor == 4
