"""The generated reference (docs/gen_reference.py) covers every config group, option and key,
and its parser reads the comment convention of conf/."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "docs" / "gen_reference.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_reference"] = module
    spec.loader.exec_module(module)
    return module


gen = _load_generator()

SAMPLE = """\
# @package dataset
# What this option is.
# Second line of the description.
_target_: some.Class
# Rows of the training set.
n_train: 2000
sigma: 1.5    # label noise
nested:
  # inner key
  lr: 0.01   # learning rate, trailing wins
  plain: 3
items:
  - a: 1
    b: 2
  - c
help: |
  text: not a key
  more: text
after: true  # after the block scalar
url: "http://x#y"  # a '#' inside quotes is no comment
"""


def test_parser_follows_the_comment_convention(tmp_path: Path) -> None:
    path = tmp_path / "opt.yaml"
    path.write_text(SAMPLE)
    rows = {k: (d, c, line) for k, d, c, line in gen.iter_documented_keys(path)}
    assert rows["_target_"] == ("some.Class", "", 4)  # the file's block is the file's
    assert rows["n_train"] == ("2000", "Rows of the training set.", 6)
    assert rows["sigma"] == ("1.5", "label noise", 7)
    assert rows["nested"][0] is None
    assert rows["nested.lr"] == ("0.01", "learning rate, trailing wins", 10)
    assert rows["nested.plain"] == ("3", "", 11)
    assert rows["items"][0] is None and "a" not in rows and "items.a" not in rows
    assert rows["help"][0] == "|" and "text" not in rows and "help.text" not in rows
    assert rows["after"] == ("true", "after the block scalar", 19)
    assert rows["url"] == ('"http://x#y"', "a '#' inside quotes is no comment", 20)
    assert gen.leading_comment(path) == "What this option is.\nSecond line of the description."
    assert gen.package_of(path) == "dataset"


def test_generation_covers_every_group_option_and_key(tmp_path: Path) -> None:
    written = gen.generate(tmp_path, with_cli=False)
    assert tmp_path / "api.md" in written
    conf = ROOT / "conf"
    index = (tmp_path / "config" / "index.md").read_text()
    # every option file of a group folder, and every shared base conf/_<group>_*.yaml
    files = [p for p in conf.rglob("*.yaml") if p.parent != conf or p.name.startswith("_")]
    group_of = {path: group for group, paths in gen.groups(conf).items() for path in paths}
    assert files and set(files) == set(group_of)
    for path in files:
        rel = path.relative_to(conf)
        group = group_of[path]
        page = (tmp_path / "config" / (group.replace("/", "-") + ".md")).read_text()
        assert f"[`{group}`]" in index, f"group {group} missing from the index"
        assert f"File: `conf/{rel.as_posix()}`" in page, f"{rel} missing from {group}.md"
        for key, _default, _comment, line in gen.iter_documented_keys(path):
            assert f"{key}` |" in page and f"| {line} |" in page, f"{rel}:{line} {key}"
    sweeper = (tmp_path / "config" / "sweeper.md").read_text()
    for key in ("heartbeat_interval", "grace_period", "max_duplicate_retries", "fatal_errors"):
        assert f"`hydra.sweeper.{key}`" in sweeper
    top = [k for k, *_ in gen.iter_documented_keys(conf / "config.yaml")]
    assert "seed" in top and all(f"`{k}` |" in index for k in top)


def test_api_page_names_the_public_api(tmp_path: Path) -> None:
    text = gen.api_page(tmp_path).read_text()
    for name in (
        "ltr_bench.data.load_letor",
        "ltr_bench.data.QuerySet",
        "ltr_bench.data.synthetic.make_synthetic",
        "ltr_bench.metrics.ndcg_at_k",
        "ltr_bench.metrics.average_precision",
        "ltr_bench.models.DirectRanker",
        "ltr_bench.stats",
    ):
        assert f"::: {name}\n" in text


@pytest.mark.heavy  # three console scripts as subprocesses (imports: seconds each)
def test_cli_page_holds_each_scripts_help(tmp_path: Path) -> None:
    text = gen.cli_page(tmp_path).read_text()
    for script in gen.SCRIPTS:
        assert f"## `{script}`" in text
    assert "== Config groups" in text and "--experiment" in text


def test_results_pages_are_generated() -> None:
    """Every page under docs/results/ but the index was written by ltr_bench.provenance."""
    from ltr_bench.provenance import GENERATED_MARK

    pages = [p for p in (ROOT / "docs" / "results").glob("*.md") if p.name != "index.md"]
    assert pages
    for page in pages:
        text = page.read_text()
        assert text.startswith(GENERATED_MARK), page
        for field in ("command", "git commit", "machine", "date", "wall time"):
            assert f"| {field} |" in text, (page, field)


def test_make_docs_generates_then_builds_strict() -> None:
    make = (ROOT / "Makefile").read_text()
    assert "docs/gen_reference.py" in make and "mkdocs build --strict" in make
    assert "make docs" in (ROOT / ".ci" / "run").read_text()
    assert (
        subprocess.run(["git", "check-ignore", "-q", "docs/reference/api.md"], cwd=ROOT).returncode
        == 0
    )
