"""The results key: every option of every experiment config is classified; only the deciding
ones (and the data files' sha256, the seed, the scale and the deciding overrides) change it;
moving a driver keeps it; a difference is named input by input."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ltr_bench.experiments.results_key import (
    DECIDING,
    EXECUTION,
    PRESENTATION,
    classes_of,
    differences,
    leaf_paths,
    override_class,
    results_inputs,
    results_key,
    spec_classes,
    unclassified,
)

CONF = Path(__file__).resolve().parents[2] / "conf" / "experiment"
EXPERIMENTS = sorted(p.stem for p in CONF.glob("*.yaml"))
# Options the ledger adds on the command line (`+experiment.<key>=...`), not in any file.
ADDED = {
    "table1": {
        "model_variants": {"a": ["model=listnet_star", "loss=listmle"]},
        "extra_refits": {"authors": ["eval=authors"]},
    }
}


@cache
def _specs(name: str) -> dict[str, dict[str, Any]]:
    """Scale -> the resolved spec of experiment ``name`` (with the options the ledger adds)."""
    from omegaconf import OmegaConf

    from ltr_bench.experiments.common import compose_run_config, scaled_spec

    cfg = compose_run_config([f"experiment={name}"])
    scales = OmegaConf.to_container(cfg.experiment, resolve=False)["scales"]  # type: ignore[index]
    out = {}
    for scale in scales:
        spec = OmegaConf.to_container(scaled_spec(cfg, scale), resolve=True)
        assert isinstance(spec, dict)
        out[str(scale)] = {**spec, **ADDED.get(name, {})}
    return out


def _cases() -> list[tuple[str, str]]:
    return [(name, scale) for name in EXPERIMENTS for scale in _specs(name)]


def _key(spec: dict[str, Any], **change: Any) -> str:
    args: dict[str, Any] = {
        "name": str(spec["name"]),
        "scale": "quick",
        "seed": 0,
        "overrides": [],
        "data": {"mq2008": {"Fold1/train.txt": "a" * 64}},
    }
    args.update(change)
    return results_key(results_inputs(spec=spec, **args))


def _set(spec: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    node = out
    *head, last = path.split(".")
    for part in head:
        node = node[part]
    node[last] = value
    return out


def _get(spec: dict[str, Any], path: str) -> Any:
    node: Any = spec
    for part in path.split("."):
        node = node[part]
    return node


def _changed(value: Any) -> Any:
    """Another value of the same kind (a list grows by a deciding override)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_changed"
    if isinstance(value, list):
        return [*value, "model.changed_by_test=1"]
    if isinstance(value, dict):
        return {**value, "changed_by_test": 1}
    return "changed_by_test"


@pytest.mark.parametrize(("name", "scale"), _cases())
def test_every_option_of_every_experiment_config_is_classified(name: str, scale: str) -> None:
    spec = _specs(name)[scale]
    assert unclassified(spec, classes_of(spec)) == [], (
        f"conf/experiment/{name}.yaml (scale={scale}): classify each option beside its driver "
        "(ltr_bench.experiments.results_key.spec_classes): deciding, execution or presentation"
    )


@pytest.mark.parametrize(("name", "scale"), _cases())
def test_execution_and_presentation_options_keep_the_key(name: str, scale: str) -> None:
    spec = _specs(name)[scale]
    classes = classes_of(spec)
    key = _key(spec)
    kept = [p for p in leaf_paths(spec) if classes.of(p) in (EXECUTION, PRESENTATION)]
    assert kept, "every experiment has execution or presentation options"
    for path in kept:
        if path == "_target_":
            continue  # a driver that moved: see test_moving_a_driver_keeps_the_key
        assert _key(_set(spec, path, _changed(_get(spec, path)))) == key, path


@pytest.mark.parametrize(("name", "scale"), _cases())
def test_every_deciding_option_changes_the_key(name: str, scale: str) -> None:
    spec = _specs(name)[scale]
    classes = classes_of(spec)
    key = _key(spec)
    deciding = [p for p in leaf_paths(spec) if classes.of(p) == DECIDING]
    assert deciding
    for path in deciding:
        assert _key(_set(spec, path, _changed(_get(spec, path)))) != key, path


def test_moving_a_driver_keeps_the_key() -> None:
    spec = _specs("table1")["full"]
    classes = classes_of(spec)
    moved = spec_classes(
        deciding=classes.deciding, execution=classes.execution, presentation=classes.presentation
    )(lambda exp: None)
    globals()["_table1_moved_here"] = moved
    there = {**spec, "_target_": f"{__name__}._table1_moved_here"}
    assert _key(there) == _key(spec)


def test_seed_scale_overrides_and_data_decide_but_where_and_how_fast_do_not() -> None:
    spec = _specs("fig2c")["quick"]
    key = _key(spec)
    execution = [
        "threads=1",
        "tracking=none",
        "tracking.tracking_uri=sqlite:///x.db",
        "experiment_name=x",
        "seed=0",
        "hydra.run.dir=/tmp/x",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=4",
        "hydra.sweeper.n_jobs=4",
        "trainer.enable_progress_bar=true",
        "dataset.path=/elsewhere/MQ2008",
        "dataset.root=/elsewhere",
        "dataset.cache_dir=/tmp/cache",
    ]
    assert _key(spec, overrides=execution) == key
    others = [
        _key(spec, seed=1),
        _key(spec, scale="full"),
        _key(spec, overrides=["model.epochs=3"]),
        _key(spec, overrides=["hydra.sweeper.n_trials=5"]),
        _key(spec, overrides=["dataset.relevance_threshold=2"]),
        _key(spec, data={"mq2008": {"Fold1/train.txt": "b" * 64}}),
        _key(spec, data={}),
    ]
    assert key not in others and len(set(others)) == len(others)
    assert override_class("hydra.sweeper.study_per=[dataset.fold]") == DECIDING
    assert override_class("++hydra.launcher.n_jobs=2") == EXECUTION


def test_the_compile_switch_decides() -> None:
    """``model.compile`` changes the numbers (the captured step's weights are eager's to about
    1e-5, not to 1e-9), so each of its values is its own results key; so are its options."""
    spec = _specs("fig2c")["quick"]
    keys = {
        _key(spec),
        _key(spec, overrides=["model.compile=true"]),
        _key(spec, overrides=["model.compile=step"]),
        _key(
            spec,
            overrides=["model.compile=step", "++model.compile_options.cpu.fallback_random=true"],
        ),
    }
    assert len(keys) == 4
    assert override_class("model.compile=step") == DECIDING


def test_execution_overrides_inside_a_spec_list_keep_the_key() -> None:
    """An override list of the spec (a deciding option) without its execution overrides: a
    progress bar or the tracking of the runs is not what they compute."""
    spec = _specs("fig2c")["quick"]
    runs = [o for o in spec["run_overrides"] if override_class(o) == DECIDING]
    assert runs != spec["run_overrides"]  # the file's list has tracking and progress in it
    assert _key({**spec, "run_overrides": runs}) == _key(spec)
    assert _key({**spec, "run_overrides": runs[:-1]}) != _key(spec)


def test_a_stale_record_names_the_inputs_that_differ() -> None:
    spec = _specs("table1")["full"]
    then = results_inputs("table1", "full", 0, spec, [], {"mq2008": {"F/t.txt": "a"}})
    now = results_inputs(
        "table1",
        "full",
        0,
        {**spec, "n_trials": 20},
        ["model.epochs=3"],
        {"mq2008": {"F/t.txt": "b"}},
    )
    assert differences(then, now) == [
        "`n_trials=30` then, `n_trials=20` now",
        "override `model.epochs=3` now, not then",
        "dataset mq2008: files F/t.txt differ (sha256)",
    ]
    assert differences(then, json.loads(json.dumps(then))) == []
    absent = results_inputs("table1", "full", 0, spec, [], {"mq2008": None})
    assert differences(then, absent) == []  # data absent here: matched by the rest
    assert results_key(absent) != results_key(then)


def test_a_moved_data_folder_keeps_the_key_and_an_edited_file_changes_it(
    tmp_path: Path, letor_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from omegaconf import OmegaConf

    from ltr_bench.experiments.common import invocation_key

    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "cache"))
    for where in ("a", "b"):
        shutil.copytree(letor_dir, tmp_path / where / "GEN")
    spec = OmegaConf.create({**_specs("table1")["quick"], "datasets": ["letor"]})
    key_a = invocation_key("table1", "quick", 0, spec, [f"dataset.path={tmp_path / 'a' / 'GEN'}"])
    key_b = invocation_key("table1", "quick", 0, spec, [f"dataset.path={tmp_path / 'b' / 'GEN'}"])
    assert key_a == key_b
    edited = tmp_path / "b" / "GEN" / "Fold2" / "vali.txt"
    edited.write_text(edited.read_text() + "0 qid:999 1:0 2:0 3:0 4:0 5:0 6:0\n")
    assert (
        invocation_key("table1", "quick", 0, spec, [f"dataset.path={tmp_path / 'b' / 'GEN'}"])
        != key_a
    )
