"""Each config file's YAML parsed once per process (ltr_bench.launching.parsed_yaml): every config
file loads as ``OmegaConf.load`` loads it, the first time and from the kept parse; each load is a
config of its own; an edited file, a YAML error and ``LTR_COMPOSE_CACHE=off`` behave as without."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import hydra
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from ltr_bench.config_tree import config_dir
from ltr_bench.launching import composing, parsed_yaml


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The kept parses installed (as the composing cache installs them), none kept yet; the names
    of the files parsed, in order."""
    monkeypatch.setenv(composing.CACHE_ENV, "on")
    composing._install()
    monkeypatch.setattr(parsed_yaml, "_parsed", type(parsed_yaml._parsed)())
    parsed: list[str] = []
    parse = parsed_yaml._parse

    def counted(file_):
        parsed.append(getattr(file_, "name", "?"))
        return parse(file_)

    monkeypatch.setattr(parsed_yaml, "_parse", counted)
    yield parsed


def _original(path: Path):
    assert parsed_yaml._original_load is not None
    with open(path, encoding="utf-8") as f:
        return parsed_yaml._original_load(f)


def _config_files() -> list[Path]:
    """The project's config files and Hydra's own."""
    own = sorted(Path(config_dir()).rglob("*.yaml"))
    hydras = sorted((Path(hydra.__file__).parent / "conf").rglob("*.yaml"))
    assert own and hydras
    return own + hydras


def test_every_config_file_loads_as_omegaconf_loads_it_first_and_from_the_kept_parse(
    parses: list[str],
) -> None:
    files = _config_files()
    for round_ in range(2):
        for path in files:
            with open(path, encoding="utf-8") as f:
                loaded = OmegaConf.load(f)
            found = composing.difference(loaded, _original(path))
            assert found is None, (str(path), round_, found)
    assert len(parses) == len({p.read_text() for p in files})  # each text parsed once


def test_each_load_is_a_config_of_its_own(parses: list[str], tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: {b: [1, 2]}\nc: x\n")
    with open(path) as f:
        first = OmegaConf.load(f)
    first.a.b.append(3)
    first.c = "changed"
    with open(path) as f:
        second = OmegaConf.load(f)
    assert OmegaConf.to_container(second) == {"a": {"b": [1, 2]}, "c": "x"}
    assert len(parses) == 1


def test_an_edited_file_is_parsed_afresh(parses: list[str], tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    for value in ("1", "2", "1"):
        path.write_text(f"a: {value}\n")
        with open(path) as f:
            assert OmegaConf.load(f).a == int(value)
    assert len(parses) == 2  # the first text came back: its parse was kept


def test_a_yaml_error_names_the_file_and_line_as_before(parses: list[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [2\nc: 3\n")
    with open(path) as f, pytest.raises(yaml.YAMLError) as original:
        assert parsed_yaml._original_load is not None
        parsed_yaml._original_load(f)
    for _ in range(2):  # nothing kept: the second load fails the same way
        with open(path) as f, pytest.raises(yaml.YAMLError) as kept:
            OmegaConf.load(f)
        assert str(kept.value) == str(original.value) and str(path) in str(kept.value)


def test_paths_streams_off_and_bypassed_loads_are_omegaconfs_own(
    parses: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\n")
    assert OmegaConf.load(path).a == 1 and OmegaConf.load(str(path)).a == 1  # a path
    read, write = os.pipe()
    os.write(write, b"a: 2\n")
    os.close(write)
    with os.fdopen(read) as pipe:  # a stream read once
        assert OmegaConf.load(pipe).a == 2
    with parsed_yaml.bypassed(), open(path) as f:
        assert OmegaConf.load(f).a == 1
    monkeypatch.setenv(composing.CACHE_ENV, "off")
    with open(path) as f:
        assert OmegaConf.load(f).a == 1
    assert parses == []
    monkeypatch.setenv(composing.CACHE_ENV, "on")
    assert OmegaConf.load(io.StringIO("a: 3\n")).a == 3
    assert len(parses) == 1


def test_a_compose_from_kept_parses_is_hydras(parses: list[str]) -> None:
    overrides = ["model=direct_ranker", "search=direct_ranker"]

    def composed():
        GlobalHydra.instance().clear()
        with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
            return compose("config", overrides=overrides, return_hydra_config=True)

    first, second = composed(), composed()
    with parsed_yaml.bypassed():
        fresh = composed()
    n_files = len(parses)
    composed()
    assert n_files > 10 and len(parses) == n_files  # all kept: none parsed again
    assert composing.difference(first, fresh) is None
    assert composing.difference(second, fresh) is None


def test_the_oldest_parse_is_forgotten_beyond_the_limit_and_threads_share_the_rest(
    parses: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(parsed_yaml, "MAX_TEXTS", 2)
    for text in ("a: 1\n", "a: 2\n", "a: 3\n", "a: 3\n", "a: 1\n"):
        assert OmegaConf.load(io.StringIO(text)).a == int(text[3])
    assert len(parses) == 4  # a: 1 parsed again: forgotten when a: 3 came
    assert list(parsed_yaml._parsed) == ["a: 3\n", "a: 1\n"]

    def load_all(offset: int) -> list[int]:
        return [OmegaConf.load(io.StringIO(f"a: {offset + i % 7}\n")).a for i in range(60)]

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(load_all, range(0, 60, 10)))
    assert results == [[offset + i % 7 for i in range(60)] for offset in range(0, 60, 10)]
