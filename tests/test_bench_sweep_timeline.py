"""benchmarks/bench_sweep_timeline.py: the processes' stamps made into spans, table and chart."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.benchmark_modules import import_benchmark

LAUNCH = 1000.0  # wall clock of the launch in the stamp files below


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return import_benchmark("bench_sweep_timeline")


def _write(path: Path, stamps: list[tuple[float, float, str]]) -> None:
    path.write_text("".join(f"{LAUNCH + t:.6f} {c:.6f} {label}\n" for t, c, label in stamps))


SWEEPER = [
    (0.1, 0.1, "<python"),
    (1.0, 0.9, "workers>"),
    (1.1, 1.0, "<workers"),
    (2.0, 1.5, "study>"),
    (3.0, 2.0, "<study"),
    (6.0, 2.5, "tell>"),
    (6.1, 2.6, "<tell"),
    (8.0, 2.8, "tell>"),
    (8.2, 3.0, "<tell"),
    (8.3, 3.1, "study end>"),
    (9.3, 3.2, "<study end"),
    (9.4, 3.2, "release>"),
    (9.6, 3.3, "<release"),
    (9.7, 3.4, "exit"),
]
WORKER_A = [  # boot ends at 2 s, imports at 5 s, two jobs, then the study's end
    (2.0, 0.5, "<boot"),
    (5.0, 3.0, "<imports"),
    (5.0, 3.0, "job>"),
    (6.0, 3.8, "<job"),
    (6.5, 3.9, "job>"),
    (8.0, 5.0, "<job"),
    (8.4, 5.0, "end>"),
    (9.3, 5.8, "<end"),
]
WORKER_B = [(2.5, 0.6, "<boot"), (5.5, 3.1, "<imports"), (5.5, 3.1, "job>"), (7.5, 4.6, "<job")]


def test_stamps_become_each_processs_spans_in_order(bench: ModuleType, tmp_path: Path) -> None:
    _write(tmp_path / "11.stamps", WORKER_B)  # files are read in name order: B's boot ends later
    _write(tmp_path / "12.stamps", SWEEPER)
    _write(tmp_path / "13.stamps", WORKER_A)
    spans = bench.spans_of(tmp_path, LAUNCH, wall=10.0)
    rows = {(s.process, s.what.split(" (")[0]): s for s in spans}
    start = rows["sweeper", "start-up until the workers start"]
    assert (start.start, start.end, start.cpu) == pytest.approx(
        (0.0, 1.0, 0.9)
    )  # CPU since the process began
    study = rows["sweeper", "the study opened"]
    assert (study.start, study.end, study.cpu) == pytest.approx((2.0, 3.0, 0.5))
    search = next(s for s in spans if s.kind == "search")
    assert search.what.startswith("the search: asking and telling 2 trials")
    assert (search.start, search.end) == pytest.approx((3.0, 8.2))
    assert search.cpu == pytest.approx(1.0)
    assert rows["sweeper", "exit"].end == pytest.approx(
        10.0
    )  # the process's end, after its last stamp
    assert [s.process for s in spans if s.what.startswith("boot")] == ["worker 1", "worker 2"]
    boot = next(s for s in spans if s.process == "worker 1" and s.kind == "boot")
    assert (boot.start, boot.end, boot.cpu) == pytest.approx(
        (1.0, 2.0, 0.5)
    )  # from the sweeper's start of it
    imports = next(s for s in spans if s.process == "worker 1" and s.kind == "imports")
    assert (imports.wall, imports.cpu) == pytest.approx((3.0, 2.5))
    jobs = [s for s in spans if s.process == "worker 1" and s.kind in bench.JOB_KINDS]
    assert [pytest.approx((j.start, j.end)) for j in jobs] == [(5.0, 6.0), (6.5, 8.0)]
    end = next(s for s in spans if s.process == "worker 1" and s.kind == "end")
    assert (end.wall, end.cpu) == pytest.approx((0.9, 0.8))
    totals = {s.process: s.cpu for s in spans if s.kind == "total"}
    assert totals == pytest.approx({"sweeper": 3.4, "worker 1": 5.8, "worker 2": 4.6})


def test_the_table_sums_the_jobs_after_the_first_and_the_cpu_against_two_cores(
    bench: ModuleType, tmp_path: Path
) -> None:
    _write(tmp_path / "1.stamps", SWEEPER)
    _write(tmp_path / "2.stamps", WORKER_A)
    text = bench.table(bench.spans_of(tmp_path, LAUNCH, wall=10.0), wall=10.0, tiny=5.0)
    assert text.splitlines()[0].endswith("tiny sweep / tiny run: 2.00")
    assert "| worker 1 | its first job | 5.00 | 6.00 | 1.00 | 0.80 |" in text
    assert "| worker 1 | its other 1 jobs (summed; each 1.50 s wall, 1.10 s CPU" in text
    assert "| all | 9.20 |" in text and "| 2 cores over the sweep's wall time | 20.00 |" in text
    assert "| used | 46% |" in text
    # imports done at 5 s, the last job ends at 8 s, the process at 10 s; one tiny run: 5 s
    assert "| launch until every worker has imported its libraries | 5.00 | 1.00 |" in text
    assert "| from then until the last job ends | 3.00 | 0.60 |" in text
    assert "| the study's end, the workers released, the exit | 2.00 | 0.40 |" in text


def test_the_chart_is_a_png(bench: ModuleType, tmp_path: Path) -> None:
    _write(tmp_path / "1.stamps", SWEEPER)
    _write(tmp_path / "2.stamps", WORKER_A)
    path = tmp_path / "timeline.png"
    bench.plot(bench.spans_of(tmp_path, LAUNCH, wall=10.0), wall=10.0, tiny=5.0, path=path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_missing_stamp_says_which(bench: ModuleType, tmp_path: Path) -> None:
    _write(tmp_path / "1.stamps", [s for s in SWEEPER if s[2] != "<release"])
    with pytest.raises(SystemExit, match="no stamp '<release'"):
        bench.spans_of(tmp_path, LAUNCH, wall=10.0)


def test_a_module_is_patched_once_it_loads_or_at_once_when_loaded(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "timeline_probe.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "timeline_probe", raising=False)
    seen: list[str] = []
    bench.on_import("timeline_probe", lambda m: seen.append(f"patched {m.f()}"))
    assert seen == []  # nothing imported early
    import timeline_probe  # noqa: F401

    assert seen == ["patched 1"]
    assert not any(isinstance(f, bench._PatchOnImport) for f in sys.meta_path)  # removed
    bench.on_import("timeline_probe", lambda m: seen.append("again"))
    assert seen == ["patched 1", "again"]
    monkeypatch.delitem(sys.modules, "timeline_probe")


def test_stamped_marks_a_calls_edges_even_when_it_raises(
    bench: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(bench.OUT_ENV, str(tmp_path))

    class Owner:
        @staticmethod
        def work(x: int) -> int:
            if x < 0:
                raise ValueError(x)
            return 2 * x

    bench.stamped(Owner, "work", "w")
    assert Owner.work(3) == 6
    with pytest.raises(ValueError):
        Owner.work(-1)
    (path,) = tmp_path.glob("*.stamps")
    labels = [line.split(" ", 2)[2] for line in path.read_text().splitlines()]
    assert labels == ["w>", "<w", "w>", "<w"]
