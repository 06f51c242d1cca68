"""benchmarks/bench_job_phases.py: a worker's stamps split into a job's phases."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_modules import import_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_benchmark("bench_job_phases")


def _job(start: float, sweep_run: bool) -> list[tuple[float, float, str]]:
    """One job's stamps from ``start`` (wall s; CPU runs at half the wall's pace): 1 s to unpack,
    2 to compose, 3 to run_job, 4 in run_job (two set_config calls of 0.5 s, three saves of
    0.25 s), 0.5 to the task, 5 in the run up to the trial's start_run (after the study's sweep
    run's own start_run when ``sweep_run``), 10 in the run, 1.5 after it, 0.25 to the job's end."""
    edges = [
        (0.0, "job>"),
        (1.0, "compose>"),
        (3.0, "<compose"),
        (6.0, "run_job>"),
        (6.5, "set_config>"),
        (7.0, "<set_config"),
        (7.0, "set_config>"),
        (7.5, "<set_config"),
        (7.5, "save>"),
        (7.75, "<save"),
        (7.75, "save>"),
        (8.0, "<save"),
        (8.0, "save>"),
        (8.25, "<save"),
        (10.0, "task>"),
        (10.5, "run>"),
        *([(11.0, "start_run>"), (11.5, "<start_run")] if sweep_run else []),
        (15.5, "start_run>"),
        (16.0, "<start_run"),
        (25.5, "end_run>"),
        (26.0, "<end_run"),
        (27.5, "<run"),
        (27.75, "<task"),
        (27.75, "<run_job"),
        (28.0, "<job"),
    ]
    return [(start + t, (start + t) / 2, mark) for t, mark in edges]


def test_a_workers_stamps_split_into_each_jobs_phases_its_first_job_left_out(
    bench: ModuleType,
) -> None:
    marks = [*_job(0.0, True), *_job(30.0, True), *_job(60.0, False)]
    marks.append((90.0, 45.0, "job>"))  # a job that never ended: left out
    phases = bench.job_phases(marks)
    walls = {label: [w for w, _ in values] for label, values in phases.items()}
    assert walls == {
        "the payload unpacked, Hydra's singleton state set": [1.0, 1.0],
        "the job's config composed by Hydra from the config files": [2.0, 2.0],
        "the launcher's job, up to run_job": [3.0, 3.0],
        "run_job, up to the task": [4.0, 4.0],
        "the task, up to ltr_bench.runner.run": [0.5, 0.5],
        "ltr_bench.runner.run, up to the trial's MLflow run": [5.0, 5.0],
        "the MLflow run's end, until run returns": [1.5, 1.5],
        "run's return, until the job ends": [0.5, 0.5],
        "- of which the three .hydra YAML files": [0.75, 0.75],
        "- of which HydraConfig.set_config (each call of the job)": [1.0, 1.0],
        "a worker idle between its jobs": [2.0],
    }
    cpu = {label: [c for _, c in values] for label, values in phases.items()}
    assert cpu["run_job, up to the task"] == [2.0, 2.0]
    assert cpu["a worker idle between its jobs"] == [1.0]


def test_the_marks_file_reads_back_as_wall_cpu_and_mark(bench: ModuleType, tmp_path: Path) -> None:
    path = tmp_path / "1.marks"
    path.write_text("10.5 1.25 job>\n11.0 1.5 <job\n")
    assert bench.read_marks(path) == [(10.5, 1.25, "job>"), (11.0, 1.5, "<job")]
