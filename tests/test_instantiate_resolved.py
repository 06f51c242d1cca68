"""The rankers' fast construction (``instantiate_resolved``) builds what Hydra's ``instantiate``
builds, for every model config, and fails with Hydra's own error."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from ltr_bench.runner.pipeline import instantiate_resolved, model_spec

MODELS = sorted(p.stem for p in (Path(__file__).parents[1] / "ltr_bench/conf/model").glob("*.yaml"))


def _spec(*overrides: str) -> dict:
    with initialize_config_module(version_base="1.3", config_module="ltr_bench.conf"):
        return model_spec(compose(config_name="config", overrides=list(overrides)))


@pytest.mark.parametrize("model", MODELS)
def test_every_model_is_built_as_hydra_builds_it(model: str) -> None:
    spec = _spec(f"model={model}")
    try:
        expected = instantiate(dict(spec), _convert_="all")
    except InstantiationException as e:  # an optional extra (xgboost, catboost) not installed
        pytest.skip(f"{model}: {e}")
    built = instantiate_resolved(dict(spec))
    assert type(built) is type(expected)
    assert {k: repr(v) for k, v in vars(built).items()} == {
        k: repr(v) for k, v in vars(expected).items()
    }


def test_a_bad_argument_fails_with_hydras_error() -> None:
    spec = {**_spec("model=direct_ranker"), "no_such_option": 1}
    with pytest.raises(InstantiationException) as hydra_error:
        instantiate(dict(spec), _convert_="all")
    with pytest.raises(InstantiationException) as ours:
        instantiate_resolved(dict(spec))
    assert str(ours.value) == str(hydra_error.value)
    assert "no_such_option" in str(ours.value)
