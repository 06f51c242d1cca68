"""Labelled model variants of a model table (``model_variants``): a model config plus overrides,
swept in its model's search space, its label carried to the runs (``model.name``) and to the rows
of ``refits.csv``; plain entries run exactly as before."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from omegaconf import OmegaConf

from ltr_bench.errors import UserError
from ltr_bench.experiments.model_variants import ModelEntry, model_entries

VARIANTS = {"listnet_star_listnet": ["model=listnet_star", "loss=listnet"]}


def test_plain_entries_and_labelled_variants() -> None:
    spec = {"models": ["ranknet", "listnet_star_listnet"], "model_variants": VARIANTS}
    entries = model_entries(spec)
    assert list(entries) == ["ranknet", "listnet_star_listnet"]
    assert entries["ranknet"] == ModelEntry("ranknet", "ranknet", ())
    variant = entries["listnet_star_listnet"]
    assert variant.model == "listnet_star"
    assert variant.overrides == (
        "loss=listnet",
        "model.name=listnet_star_listnet",
        "search_space.model=listnet_star_listnet",
    )
    assert model_entries(OmegaConf.create({"models": ["adarank"]})) == {
        "adarank": ModelEntry("adarank", "adarank")
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"models": ["a", "a"]}, "a is listed twice"),
        ({"models": ["x"], "model_variants": {"x": ["loss=listmle"]}}, "name its model config"),
        ({"models": ["x"], "model_variants": {"x": "model=ranknet"}}, "a list of overrides"),
        ({"models": ["x-1"], "model_variants": {"x-1": ["model=ranknet"]}}, "letters, digits"),
        ({"models": ["x"], "model_variants": ["model=ranknet"]}, "a map label -> overrides"),
    ],
)
def test_a_malformed_variant_is_one_sentence_naming_the_key(spec: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        model_entries(spec)


def test_a_variant_composes_and_passes_the_runs_checks_in_its_models_search_space() -> None:
    from ltr_bench.experiments.common import compose_run_config
    from ltr_bench.runner.checks import check_compatibility

    entry = model_entries({"models": ["listnet_star_listnet"], "model_variants": VARIANTS})
    overrides = [f"model={entry['listnet_star_listnet'].model}", "search=listnet_star"]
    cfg = compose_run_config([*overrides, *entry["listnet_star_listnet"].overrides])
    check_compatibility(cfg)  # the search space names the label: no "not of model=" error
    assert cfg.model.name == "listnet_star_listnet" and cfg.search_space.model == cfg.model.name
    assert cfg.loss.name == "listnet"
    # the label alone as model.name would not pass: the space names its model
    renamed = OmegaConf.merge(compose_run_config(overrides), {"model": {"name": "x"}})
    with pytest.raises(UserError, match="search=listnet_star is the search space of"):
        check_compatibility(renamed)


def test_run_sweeps_passes_each_rows_overrides_and_writes_its_label(
    tmp_path: Path, letor_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Table 1's driver with the sweeps, refits and report replaced by recorders: what each
    sweep is asked to run, where, and the rows refits.csv gets."""
    from ltr_bench.experiments import table1_sweeps
    from ltr_bench.experiments.common import ExperimentRun
    from ltr_bench.tracking.tracker import NullTracker

    calls: list[list[str]] = []
    monkeypatch.setattr(
        table1_sweeps, "_cli", lambda args, log, in_process=False: calls.append(list(args))
    )
    monkeypatch.setattr(table1_sweeps, "_refit", lambda *a, **k: None)

    def rows(sweep_dir: Path, base: dict[str, Any], subdir: str = "refit") -> list[dict]:
        return [{**base, "fold": "GEN/Fold1", "test/ndcg@10": 0.5, "test/map": 0.4}]

    monkeypatch.setattr(table1_sweeps, "_refit_rows", rows)
    monkeypatch.setattr(table1_sweeps, "plot_cells", lambda *a, **k: None)
    spec = OmegaConf.create(
        {
            "name": "table1",
            "title": "t",
            "mlflow_experiment": "m",
            "datasets": ["letor"],
            "models": ["ranknet", "listnet_star_listnet"],
            "model_variants": VARIANTS,
            "sweep_overrides": ["search={model}"],
            "variants": {"letor_folds": {"overrides": ["protocol=letor_folds"]}},
            "run_variants": ["letor_folds"],
            "metrics": ["ndcg@10", "map"],
            "cell_overrides": [f"dataset.path={letor_dir}"],
        }
    )
    exp = ExperimentRun(OmegaConf.create({}), spec, tmp_path, NullTracker(), "run")
    table1_sweeps.run_sweeps(exp)
    plain, variant = calls
    assert "model=ranknet" in plain and "search=ranknet" in plain
    assert not any(a.startswith(("model.name=", "search_space.")) for a in plain)
    assert plain[-2] == f"hydra.sweep.dir={tmp_path / 'sweeps/letor_folds/letor/ranknet'}"
    for wanted in (
        "model=listnet_star",
        "search=listnet_star",
        "loss=listnet",
        "model.name=listnet_star_listnet",
        "search_space.model=listnet_star_listnet",
    ):
        assert wanted in variant
    assert variant[-2].endswith("sweeps/letor_folds/letor/listnet_star_listnet")
    refits = pd.read_csv(tmp_path / "refits.csv")
    assert list(refits["model"]) == ["ranknet", "listnet_star_listnet"]
    assert (refits["time_sweep_s"] >= 0).all()
