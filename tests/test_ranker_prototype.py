"""A job builds its ranker once (``RankerPrototype``): every fit's copy, with its repeat's seed, is
the ranker Hydra's ``instantiate`` builds from the config with that seed, for every model config;
a copy's fit leaves the prototype unfitted; a trial builds the ranker once, not once per fold."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hydra import compose, initialize_config_module
from hydra.errors import InstantiationException
from hydra.utils import instantiate

from ltr_bench.data.synthetic import make_synthetic
from ltr_bench.runner import pipeline
from ltr_bench.runner.pipeline import RankerPrototype, model_spec

MODELS = sorted(p.stem for p in (Path(__file__).parents[1] / "ltr_bench/conf/model").glob("*.yaml"))


def _cfg(*overrides: str):
    with initialize_config_module(version_base="1.3", config_module="ltr_bench.conf"):
        return compose(config_name="config", overrides=list(overrides))


def _state(ranker: object) -> dict[str, str]:
    return {k: repr(v) for k, v in vars(ranker).items()}


@pytest.mark.parametrize("model", MODELS)
def test_a_copy_with_a_seed_is_the_ranker_that_seed_builds(model: str) -> None:
    cfg = _cfg(f"model={model}")
    spec = model_spec(cfg)
    try:
        prototype = RankerPrototype.of(cfg)
    except InstantiationException as e:  # an optional extra (xgboost, catboost) not installed
        pytest.skip(f"{model}: {e}")
    assert prototype.takes_seed
    built = instantiate({**spec, "seed": 1234}, _convert_="all")
    copy = prototype.fresh(1234)
    assert type(copy) is type(built) and _state(copy) == _state(built)
    assert copy is not prototype.ranker and _state(prototype.fresh()) == _state(prototype.ranker)


def test_fitting_a_copy_leaves_the_prototype_unfitted() -> None:
    prototype = RankerPrototype.of(_cfg("model=lambdamart", "model.n_estimators=5"))
    data = make_synthetic(400, n_features=4, n_classes=3, docs_per_query=20, seed=0)
    before = _state(prototype.ranker)
    fitted = prototype.fresh(3).fit(data)
    assert np.isfinite(fitted.score(data)).all()
    assert _state(prototype.ranker) == before
    with pytest.raises(Exception):  # noqa: B017 - whichever error an unfitted ranker raises
        prototype.fresh().score(data)


def test_a_trial_builds_its_ranker_once_for_all_its_inner_folds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltr_bench.runner import run

    built: list[int] = []
    real = pipeline.RankerPrototype.of.__func__  # type: ignore[attr-defined]

    def counting(cls: type, cfg: Any) -> Any:
        built.append(1)
        return real(cls, cfg)

    monkeypatch.setattr(pipeline.RankerPrototype, "of", classmethod(counting))
    monkeypatch.chdir(tmp_path)
    cfg = _cfg(
        "model=lambdamart",
        "model.n_estimators=3",
        "protocol.inner_cv=3",
        "dataset.n_train=300",
        "dataset.n_vali=100",
        "dataset.n_test=100",
        "tracking=none",
        "+sweep.trial_number=0",
    )
    result = run(cfg, output_dir=None, verbose=False)
    assert len(result.folds) == 3 and built == [1]
