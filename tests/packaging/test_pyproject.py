"""The package's metadata matches its code: every package ships, every import is declared."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from ltr_bench.config.tree import config_dir
from ltr_bench.errors import UserError

REPO = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())
SOURCES = ("ltr_bench", "hydra_plugins")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _norm(re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0])


def _imported_top_level_modules() -> set[str]:
    names: set[str] = set()
    for root in SOURCES:
        for path in (REPO / root).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return names - set(sys.stdlib_module_names) - {"ltr_bench", "hydra_plugins", "__future__"}


def test_conf_ships_as_the_package_ltr_bench_conf() -> None:
    """ltr_bench/conf is a symlink to the top-level conf/, whose YAML files are package data."""
    link = REPO / "ltr_bench" / "conf"
    assert link.is_symlink() and link.resolve() == (REPO / "conf").resolve()
    assert (REPO / "conf" / "__init__.py").is_file()
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert "package-dir" not in setuptools  # it would break Hydra's plugin scan when editable
    assert set(setuptools["package-data"]["ltr_bench"]) == {"conf/__init__.py", "conf/**/*.yaml"}
    assert set(setuptools["packages"]["find"]["include"]) == {"ltr_bench*", "hydra_plugins*"}


def test_hydra_finds_the_sweeper_plugin_in_this_install() -> None:
    from hydra.core.plugins import Plugins
    from hydra.plugins.sweeper import Sweeper

    names = {p.__name__ for p in Plugins.instance().discover(Sweeper)}
    assert "LtrOptunaSweeper" in names


def test_every_runtime_import_is_a_declared_dependency() -> None:
    """A dependency or, for the optional models (``ltr_bench[gbdt]``: imported only when their
    model is chosen, and a missing one is one sentence naming the extra), an extra's package."""
    declared = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    declared |= {_requirement_name(r) for r in extras["gbdt"]}
    dists = packages_distributions()
    missing = {}
    for module in sorted(_imported_top_level_modules()):
        owners = {_norm(d) for d in dists.get(module, [module])}
        if not owners & declared:
            missing[module] = sorted(owners)
    assert missing == {}, f"imported but not declared in [project] dependencies: {missing}"


def test_undeclared_extras_and_unused_dependencies() -> None:
    declared = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    # the launchers behind hydra/launcher=joblib and =submitit_local|slurm_example are not
    # imported, only selected by config
    assert {"hydra-joblib-launcher", "hydra-submitit-launcher"} <= declared
    # the dashboard a sweep's printed command opens comes with `make setup` (the dev extra)
    assert {_requirement_name(r) for r in extras["dashboard"]} == {"optuna-dashboard"}
    assert any(r.startswith("ltr_bench[dashboard]") for r in extras["dev"])
    assert {_requirement_name(r) for r in extras["postgres"]} == {"psycopg2-binary"}
    assert "psycopg2-binary" not in declared
    assert any(r.startswith("ltr_bench[postgres]") for r in extras["dev"])


def test_config_tree_is_the_installed_package_resource() -> None:
    conf = Path(config_dir())
    assert (conf / "config.yaml").is_file()
    assert conf.resolve() == (REPO / "conf").resolve()  # editable install maps ltr_bench.conf


def test_no_data_root_outside_a_checkout_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from ltr_bench.data import datasets

    monkeypatch.delenv("LTR_DATA", raising=False)
    monkeypatch.setattr(datasets, "default_data_root", lambda: None)
    with pytest.raises(
        UserError, match=r"set the environment variable LTR_DATA \(or dataset\.root"
    ):
        datasets.resolve_data_root(None)
    assert datasets.resolve_data_root("/data/letor") == Path("/data/letor")


def test_git_commit_only_in_a_checkout(tmp_path: Path) -> None:
    from ltr_bench.tracking.tags import git_commit

    assert git_commit(tmp_path) is None  # not a clone: no tag


def test_the_sweeper_plugin_is_discoverable_beside_other_plugins() -> None:
    import pkgutil

    import hydra_plugins

    assert "hydra_plugins*" in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    names = {m.name for m in pkgutil.iter_modules(hydra_plugins.__path__)}
    assert {"ltr_bench_sweeper", "hydra_joblib_launcher"} <= names
