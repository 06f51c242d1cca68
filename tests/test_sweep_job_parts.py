"""benchmarks/sweep_job_parts.py: a job's CPU counted by part, exclusive of inner calls."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

from tests.benchmark_modules import import_benchmark


@pytest.fixture(scope="module")
def parts() -> ModuleType:
    return import_benchmark("sweep_job_parts")


class Clock:
    """A CPU clock that advances only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _counting(parts: ModuleType) -> tuple[Any, Clock, list[str], Any]:
    clock, stamps = Clock(), []
    account = parts.JobParts(stamps.append, clock)

    class Work:
        @staticmethod
        def job(inner_s: float, own_s: float) -> str:
            clock.now += own_s
            Work.outer(inner_s)
            return "done"

        @staticmethod
        def outer(inner_s: float) -> None:
            clock.now += 0.25
            Work.inner(inner_s)

        @staticmethod
        def inner(inner_s: float) -> None:
            clock.now += inner_s
            if inner_s >= 5:
                raise ValueError(inner_s)

        @classmethod
        def made(cls, x: int) -> tuple[str, int]:
            clock.now += 0.5
            return cls.__name__, x

    account.counted(Work, "outer", "lib: outer")
    account.counted(Work, "inner", "lib: inner")
    account.counted(Work, "made", "other: made")
    account.counted_job(Work, "job")
    return account, clock, stamps, Work


def test_each_part_counts_its_own_time_and_jobs_after_the_first_are_stamped(
    parts: ModuleType,
) -> None:
    account, clock, stamps, work = _counting(parts)
    assert work.job(1.0, 0.125) == "done"  # a worker's first job: counted, not stamped
    assert stamps == []
    assert work.job(2.0, 0.5) == "done"
    (stamp,) = stamps
    assert stamp.startswith("parts ")
    job = json.loads(stamp[len("parts ") :])
    assert job["job"] == pytest.approx(2.75)
    assert job["parts"] == pytest.approx(
        {parts.OUTSIDE: 0.5, "lib: outer": 0.25, "lib: inner": 2.0}
    )  # the outer call less the inner one; the job less both
    assert account.stack == []


def test_calls_outside_a_job_are_not_counted_and_a_raising_call_still_ends(
    parts: ModuleType,
) -> None:
    account, clock, stamps, work = _counting(parts)
    work.outer(1.0)  # outside any job (the study's end in a worker)
    assert dict(account.cpu) == {}
    work.job(0.0, 0.0)
    with pytest.raises(ValueError):
        work.job(5.0, 0.0)
    assert account.stack == []  # every call ended although the inner one raised
    job = json.loads(stamps[-1][len("parts ") :])
    assert job["parts"]["lib: inner"] == pytest.approx(5.0)


def test_a_wrapped_classmethod_is_still_called_on_its_class(parts: ModuleType) -> None:
    account, clock, stamps, work = _counting(parts)
    assert work.made(3) == ("Work", 3)
    account.enter(parts.OUTSIDE)
    assert work.made(4) == ("Work", 4)
    account.leave()
    assert account.cpu["other: made"] == pytest.approx(0.5)


def test_the_table_gives_each_parts_mean_and_share_then_each_library(parts: ModuleType) -> None:
    jobs = [
        {"job": 0.4, "parts": {parts.OUTSIDE: 0.1, "MLflow: Tracker.start_run": 0.1, "x: y": 0.2}},
        {"job": 0.6, "parts": {parts.OUTSIDE: 0.1, "MLflow: Tracker.start_run": 0.3, "x: y": 0.2}},
    ]
    stamps = [(0.0, 0.0, "job>"), *((1.0, 1.0, "parts " + json.dumps(j)) for j in jobs)]
    assert parts.jobs_of(stamps) == jobs
    lines = parts.parts_table(jobs)
    assert lines[0].endswith("(the mean of 2 jobs: 500 ms a job):")
    assert f"| {parts.OUTSIDE} | 100.0 | 20% |" in lines
    assert "| MLflow: Tracker.start_run | 200.0 | 40% |" in lines
    assert "| x: y | 200.0 | 40% |" in lines  # a part not in PARTS comes last
    by_library = lines[lines.index("| spent in | CPU ms a job | share |") + 2 :]
    assert by_library == [
        "| MLflow | 200.0 | 40% |",
        "| x | 200.0 | 40% |",
        "| Hydra | 100.0 | 20% |",
    ]
    assert parts.parts_table([]) == []


@pytest.mark.parametrize("entry", import_benchmark("sweep_job_parts").PARTS, ids=lambda e: e[2])
def test_every_part_names_a_function_that_exists(entry: tuple[str, str | None, str, str]) -> None:
    module, owner, name, _ = entry
    loaded = importlib.import_module(module)
    target = getattr(loaded, owner) if owner else loaded
    assert callable(getattr(target, name)), f"{module}.{owner or ''}.{name} is gone"


def test_two_patches_of_one_module_both_apply_as_it_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    timeline = import_benchmark("bench_sweep_timeline")
    (tmp_path / "parts_probe.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "parts_probe", raising=False)
    seen: list[str] = []
    timeline.on_import("parts_probe", lambda m: seen.append("first"))
    timeline.on_import("parts_probe", lambda m: seen.append("second"))
    import parts_probe  # noqa: F401

    assert seen == ["first", "second"]
    monkeypatch.delitem(sys.modules, "parts_probe")


def test_install_wraps_each_modules_functions_once_it_loads(parts: ModuleType) -> None:
    account = parts.JobParts(lambda s: None)
    modules: dict[str, Any] = {}
    for module, owner, name, _ in parts.PARTS:
        holder = modules.setdefault(module, SimpleNamespace())
        target = holder
        if owner:
            target = getattr(holder, owner, None) or type(owner, (), {})
            setattr(holder, owner, target)
        setattr(target, name, lambda *a, **k: "called")
    account.install(lambda name, patch: patch(modules[name]))
    wrapped = modules["ltr_bench.runner.inner_cv"].prepare
    assert wrapped() == "called" and wrapped.__wrapped__ is not None
    account.enter(parts.OUTSIDE)
    modules["ltr_bench.tracking.tracker"].Tracker.start_run()
    account.leave()
    assert "MLflow: Tracker.start_run" in account.cpu
