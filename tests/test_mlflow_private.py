"""Guards of ``ltr_bench.tracking.mlflow_private``: what it relies on in MLflow is still there."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from ltr_bench.tracking.mlflow_private import pinned_requirements_unchecked
from ltr_bench.tracking.model_logging import _model_requirements


def test_mlflow_still_checks_requirements_through_the_replaced_name() -> None:
    from mlflow.utils import environment

    assert callable(environment.warn_dependency_requirement_mismatches)
    source = inspect.getsource(environment._process_pip_requirements)
    assert "warn_dependency_requirement_mismatches(" in source


def test_the_pinned_requirements_are_what_the_check_would_accept() -> None:
    from mlflow.utils.requirements_utils import _check_requirement_satisfied

    requirements = _model_requirements()
    assert any(r.startswith("torch==") for r in requirements)
    assert [r for r in requirements if _check_requirement_satisfied(r) is not None] == []


def test_saving_a_model_skips_the_scan_of_installed_packages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow
    from mlflow.utils import environment, requirements_utils

    scans: list[str] = []

    def scan() -> None:  # MLflow's check swallows exceptions: count the calls instead
        scans.append("scan")
        raise RuntimeError("no package map in this test")

    monkeypatch.setattr(requirements_utils, "_MODULES_TO_PACKAGES", None)
    monkeypatch.setattr(requirements_utils, "_init_modules_to_packages_map", scan)
    (tmp_path / "data").mkdir()
    with pinned_requirements_unchecked():
        mlflow.pyfunc.save_model(
            str(tmp_path / "model"),
            loader_module="ltr_bench.saved_model",
            data_path=str(tmp_path / "data"),
            pip_requirements=_model_requirements(),
        )
    requirements = (tmp_path / "model" / "requirements.txt").read_text().split()
    assert set(_model_requirements()) <= set(requirements)
    assert scans == []
    mlflow.pyfunc.save_model(  # without the context MLflow scans, and the check is back in place
        str(tmp_path / "again"),
        loader_module="ltr_bench.saved_model",
        data_path=str(tmp_path / "data"),
        pip_requirements=_model_requirements(),
    )
    assert scans
    assert environment.warn_dependency_requirement_mismatches.__name__ != "_no_check"
