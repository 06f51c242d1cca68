"""Where the tiny sweep's wall time goes, process by process: a timeline with each span's CPU.

The fixed-costs page (``bench_fixed_costs.py``) sets the 20-trial tiny sweep (5 inner folds, 2
workers of the ``ltr_pool`` launcher, no pruner) against one tiny run; this page shows how the sweep spends its time.
The sweep runs once, each of its processes stamping wall-clock and CPU time at the edges of its
phases into ``$LTR_TIMELINE_OUT``:

- the sweeper: this script run as ``ltr-bench`` (``--as-sweeper``: the command's entry point,
  with stamps around the sweeper's functions as their modules load): start-up until the workers
  are started (Python, ``ltr_bench.cli.main``, Hydra's compose, the sweeper's setup), the study opened,
  each trial told, the study's end handed to a worker and waited for, the workers released;
- each worker, through its hook (``sweep.on_worker_start=bench_sweep_timeline.worker_hook``,
  which applies the default hook's garbage-collector policy too): its boot (spawned until the
  hook runs), its imports of ``sweep.warm_up`` (until their ``gc.freeze``), each job, the study's
  end (plots, trials table, MLflow); and each job's CPU by part (``sweep_job_parts.py``: Hydra's
  steps, each MLflow call, the fits, ltr_bench's own steps).

One tiny run in a warm folder (the median of ``--runs``) is measured beside it. Printed: each
process's spans (start and end after launch, wall and CPU seconds), the CPU all processes used
against two cores over the sweep, the sweep in three stretches against one tiny run (until every
worker has imported its libraries, the jobs from then on, what follows the last job), a later
job's CPU by part and by library, and the chart's file (``--plot``, a PNG Gantt chart).

    .venv/bin/python benchmarks/bench_sweep_timeline.py [--trials 20] [--runs 3] [--plot FILE]
"""

from __future__ import annotations

import argparse
import functools
import importlib.abc
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sweep_job_parts

OUT_ENV = "LTR_TIMELINE_OUT"  # the folder each process's stamps go to
CORES = 2


def stamp(label: str) -> None:
    """Append ``<wall clock> <process CPU> <label>`` to this process's stamp file."""
    with (Path(os.environ[OUT_ENV]) / f"{os.getpid()}.stamps").open("a") as out:
        out.write(f"{time.time():.6f} {time.process_time():.6f} {label}\n")


def stamped(owner: Any, name: str, label: str) -> None:
    """Stamp ``<label>`` as ``owner.<name>`` is called and ``<label`` as it returns."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        stamp(f"{label}>")
        try:
            return inner(*args, **kwargs)
        finally:
            stamp(f"<{label}")

    setattr(owner, name, wrapper)


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patch a module right after it first loads (so that stamping it imports nothing early)."""

    def __init__(self, name: str, patch: Callable[[Any], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        assert spec is not None and spec.loader is not None
        exec_module = spec.loader.exec_module

        def exec_then_patch(module: Any) -> None:
            exec_module(module)
            self.patch(module)

        spec.loader.exec_module = exec_then_patch  # type: ignore[method-assign]
        return spec


def on_import(name: str, patch: Callable[[Any], None]) -> None:
    """``patch(module)`` once the module ``name`` has loaded (now, when it has already)."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        sys.meta_path.insert(0, _PatchOnImport(name, patch))


def worker_hook() -> None:
    """``sweep.on_worker_start``: stamps the worker's boot, its imports, its jobs, the study end."""
    import gc

    from ltr_bench.cli.gc_policy import tune_garbage_collection

    stamp("<boot")
    tune_garbage_collection()  # the default hook's policy
    freeze = gc.freeze

    def freeze_after_imports() -> None:  # the warm-up's last call (ltr_bench.launching.worker)
        gc.freeze = freeze
        stamp("<imports")
        freeze()

    gc.freeze = freeze_after_imports
    parts = sweep_job_parts.JobParts(stamp)

    def stamp_jobs(worker: Any) -> None:  # (each job's call finds worker.run by its name)
        parts.counted_job(worker, "run")
        stamped(worker, "run", "job")

    on_import("ltr_bench.launching.worker", stamp_jobs)
    parts.install(on_import)
    on_import("ltr_bench.sweeper.results", lambda m: stamped(m, "finish_stored_study", "end"))


def _stamp_the_wait(results: Any) -> None:
    """The study's end: from handing it to a worker until the sweeper's wait for it returns."""
    finish_study = results.finish_study

    @functools.wraps(finish_study)
    def handed(*args: Any, **kwargs: Any) -> Callable[[], None]:
        stamp("study end>")
        wait = finish_study(*args, **kwargs)

        def waited() -> None:
            try:
                wait()
            finally:
                stamp("<study end")

        return waited

    results.finish_study = handed


def run_as_sweeper(args: list[str]) -> None:
    """``ltr-bench <args>`` in this process, stamping the sweeper's phases."""
    stamp("<python")
    import atexit

    from ltr_bench.cli import main as cli

    on_import("ltr_bench.launching.pools", _stamp_pools)
    on_import("ltr_bench.sweeper.state", lambda m: stamped(m, "open_study_state", "study"))
    on_import("ltr_bench.sweeper.search.loop", lambda m: stamped(m, "tell_outcome", "tell"))
    on_import("ltr_bench.sweeper.results", _stamp_the_wait)
    atexit.register(stamp, "exit")
    sys.argv = ["ltr-bench", *args]
    cli.console_main()


def _stamp_pools(pools: Any) -> None:
    stamped(pools.Jobs, "__init__", "workers")  # the launcher's workers started
    stamped(pools.Jobs, "release", "release")


@dataclass
class Span:
    """One phase of one process: wall seconds after launch, CPU seconds of the process."""

    process: str
    what: str
    start: float
    end: float
    cpu: float
    kind: str  # the chart's colour

    @property
    def wall(self) -> float:
        return self.end - self.start


def read_stamps(path: Path, launch: float) -> list[tuple[float, float, str]]:
    """A stamp file's ``(seconds after launch, CPU seconds, label)`` in order."""
    out = []
    for line in path.read_text().splitlines():
        wall, cpu, label = line.split(" ", 2)
        out.append((float(wall) - launch, float(cpu), label))
    return out


def _at(stamps: list[tuple[float, float, str]], label: str) -> tuple[float, float]:
    """``(seconds after launch, CPU seconds)`` of the first stamp ``label``."""
    hits = [(t, c) for t, c, name in stamps if name == label]
    if not hits:
        raise SystemExit(f"no stamp '{label}': the sweep did not run as timed")
    return hits[0]


def sweeper_spans(stamps: list[tuple[float, float, str]], wall: float) -> list[Span]:
    """The sweeper's phases from its stamps (``wall``: the process's end after launch)."""
    spans = []

    def span(what: str, a: tuple[float, float], b: tuple[float, float], kind: str) -> None:
        spans.append(Span("sweeper", what, a[0], b[0], b[1] - a[1], kind))

    up = _at(stamps, "workers>")
    launch = (0.0, 0.0)  # the process's CPU counts from its start
    span(
        "start-up until the workers start (Python, ltr_bench.cli.main, Hydra's compose, setup)",
        launch,
        up,
        "start",
    )
    span(
        "the workers started, the sweep's start (Optuna, the search space, multirun.yaml)",
        up,
        _at(stamps, "study>"),
        "start",
    )
    span(
        "the study opened (Optuna storage, sampler, MLflow sweep run)",
        _at(stamps, "study>"),
        _at(stamps, "<study"),
        "study",
    )
    tells = [(t, c) for t, c, name in stamps if name == "<tell"]
    span(
        f"the search: asking and telling {len(tells)} trials, waiting for their jobs",
        _at(stamps, "<study"),
        tells[-1],
        "search",
    )
    span(
        "the study's end, handed to a worker, waited for",
        _at(stamps, "study end>"),
        _at(stamps, "<study end"),
        "end",
    )
    span("the workers released", _at(stamps, "release>"), _at(stamps, "<release"), "exit")
    last = _at(stamps, "exit")
    spans.append(Span("sweeper", "exit", last[0], wall, 0.0, "exit"))
    spans.append(Span("sweeper", "CPU of the whole process", 0.0, wall, last[1], "total"))
    return spans


def worker_spans(name: str, stamps: list[tuple[float, float, str]], started: float) -> list[Span]:
    """A worker's phases from its stamps (``started``: when the sweeper started the workers)."""
    spans = []
    boot, imports = _at(stamps, "<boot"), _at(stamps, "<imports")
    spans.append(
        Span(
            name,
            "boot: spawned until its hook (Python, Hydra)",
            started,
            boot[0],
            boot[1],
            "boot",
        )
    )
    spans.append(
        Span(name, "imports (sweep.warm_up)", boot[0], imports[0], imports[1] - boot[1], "imports")
    )
    jobs = _pairs(stamps, "job")
    for i, (a, b) in enumerate(jobs):
        what = "its first job" if i == 0 else f"job {i + 1}"
        spans.append(Span(name, what, a[0], b[0], b[1] - a[1], JOB_KINDS[i % 2]))
    for a, b in _pairs(stamps, "end"):
        spans.append(
            Span(
                name,
                "the study's end (plots, trials table, MLflow)",
                a[0],
                b[0],
                b[1] - a[1],
                "end",
            )
        )
    last = max(stamps, key=lambda s: s[0])
    spans.append(
        Span(
            name, "CPU of the whole process (to its last stamp)", started, last[0], last[1], "total"
        )
    )
    return spans


def _pairs(
    stamps: list[tuple[float, float, str]], label: str
) -> list[tuple[tuple[float, float], tuple[float, float]]]:
    starts = [(t, c) for t, c, name in stamps if name == f"{label}>"]
    ends = [(t, c) for t, c, name in stamps if name == f"<{label}"]
    return list(zip(starts, ends))


JOB_KINDS = ("job", "job2")


def table(spans: list[Span], wall: float, tiny: float) -> str:
    """The page's text: every span (a worker's jobs after its first summed), the CPU against two
    cores over the sweep."""
    lines = [
        f"tiny sweep, launch to exit: {wall:.2f} s; one tiny run (median): {tiny:.2f} s; "
        f"tiny sweep / tiny run: {wall / tiny:.2f}",
        "",
        "| process | span | from s | to s | wall s | CPU s |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for process in dict.fromkeys(s.process for s in spans):
        mine = [s for s in spans if s.process == process and s.kind != "total"]
        jobs = [s for s in mine if s.kind in JOB_KINDS]
        for s in mine:
            if s.kind in JOB_KINDS and s is not jobs[0]:
                continue
            lines.append(
                f"| {process} | {s.what} | {s.start:.2f} | {s.end:.2f} | {s.wall:.2f} | {s.cpu:.2f} |"
            )
            if s.kind in JOB_KINDS and len(jobs) > 1:
                rest = jobs[1:]
                walls, cpus = [r.wall for r in rest], [r.cpu for r in rest]
                what = (
                    f"its other {len(rest)} jobs (summed; each {statistics.mean(walls):.2f} s "
                    f"wall, {statistics.mean(cpus):.2f} s CPU on average)"
                )
                lines.append(
                    f"| {process} | {what} | {rest[0].start:.2f} | {rest[-1].end:.2f} | "
                    f"{sum(walls):.2f} | {sum(cpus):.2f} |"
                )
    totals = [s for s in spans if s.kind == "total"]
    used = sum(s.cpu for s in totals)
    lines += ["", "| process | CPU s |", "| --- | ---: |"]
    lines += [f"| {s.process} | {s.cpu:.2f} |" for s in totals]
    lines += [
        f"| all | {used:.2f} |",
        f"| {CORES} cores over the sweep's wall time | {CORES * wall:.2f} |",
        f"| used | {used / (CORES * wall):.0%} |",
        "",
        *milestones(spans, wall, tiny),
    ]
    return "\n".join(lines)


def milestones(spans: list[Span], wall: float, tiny: float) -> list[str]:
    """The sweep in three stretches, each against one tiny run: until every worker has imported
    its libraries, the jobs from then on, and what follows the last job."""
    ready = max(s.end for s in spans if s.kind == "imports")
    last_job = max(s.end for s in spans if s.kind in JOB_KINDS)
    return [
        "| stretch | s | tiny runs |",
        "| --- | ---: | ---: |",
        f"| launch until every worker has imported its libraries | {ready:.2f} | {ready / tiny:.2f} |",
        f"| from then until the last job ends | {last_job - ready:.2f} | {(last_job - ready) / tiny:.2f} |",
        f"| the study's end, the workers released, the exit | {wall - last_job:.2f} | "
        f"{(wall - last_job) / tiny:.2f} |",
        f"| the sweep | {wall:.2f} | {wall / tiny:.2f} |",
    ]


COLOURS = {
    "start": "#9e9e9e",
    "study": "#ff9800",
    "search": "#ffe0b2",
    "boot": "#bdbdbd",
    "imports": "#1e88e5",
    "job": "#43a047",
    "job2": "#81c784",
    "end": "#8e24aa",
    "exit": "#616161",
}


def plot(spans: list[Span], wall: float, tiny: float, path: Path) -> None:
    """A Gantt chart of the spans, with one tiny run's and 1.5 tiny runs' time marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    processes = list(dict.fromkeys(s.process for s in spans))
    fig, ax = plt.subplots(figsize=(10, 1 + 0.6 * len(processes)))
    for row, process in enumerate(reversed(processes)):
        for s in spans:
            if s.process == process and s.kind != "total":
                ax.broken_barh([(s.start, s.wall)], (row - 0.35, 0.7), color=COLOURS[s.kind])
    for x, label in ((tiny, "one tiny run"), (1.5 * tiny, "1.5 tiny runs (the goal)")):
        ax.axvline(x, color="black", linestyle="--", linewidth=1)
        ax.text(x, len(processes) - 0.4, f" {label}", fontsize=8, va="bottom")
    ax.set_yticks(range(len(processes)), list(reversed(processes)))
    ax.set_xlim(0, max(wall, 1.5 * tiny) * 1.02)
    ax.set_xlabel("seconds after launch")
    legend = {
        "start-up": "start",
        "study opened": "study",
        "search (asks, tells, waits)": "search",
        "worker boot": "boot",
        "imports": "imports",
        "jobs": "job",
        "study end": "end",
        "release, exit": "exit",
    }
    handles = [plt.Rectangle((0, 0), 1, 1, color=COLOURS[k]) for k in legend.values()]
    ax.legend(
        handles, list(legend), loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=4, fontsize=8
    )
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20, help="trials of the tiny sweep")
    ap.add_argument("--runs", type=int, default=3, help="tiny runs (the median is shown)")
    ap.add_argument("--plot", type=Path, default=None, help="write the Gantt chart here (PNG)")
    args = ap.parse_args()
    from bench_fixed_costs import LTR_BENCH, QUIET, TINY, env, sweep_command, timed

    with tempfile.TemporaryDirectory(prefix="ltr-timeline-") as tmp:
        root = Path(tmp)
        (root / "warm").mkdir()
        timed([LTR_BENCH, *TINY, *QUIET], root / "warm")  # the MLflow store exists from here on
        tiny = statistics.median(
            timed([LTR_BENCH, *TINY, *QUIET, f"hydra.run.dir=r{i}"], root / "warm")
            for i in range(args.runs)
        )
        stamps = root / "stamps"
        stamps.mkdir()
        here = str(Path(__file__).resolve().parent)
        command = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--as-sweeper",
            *sweep_command(root, args.trials)[1:],
            "sweep.on_worker_start=bench_sweep_timeline.worker_hook",
        ]
        sweep_env = {
            **env(),
            OUT_ENV: str(stamps),
            "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p),
        }
        launch = time.time()
        done = subprocess.run(command, cwd=root, env=sweep_env, capture_output=True, text=True)
        wall = time.time() - launch
        if done.returncode != 0:
            raise SystemExit(f"the sweep failed ({done.returncode}):\n{done.stderr[-3000:]}")
        spans = spans_of(stamps, launch, wall)
        jobs = [j for path in sorted(stamps.glob("*.stamps")) for j in job_parts(path, launch)]
    print(table(spans, wall, tiny))
    print("\n".join(["", *sweep_job_parts.parts_table(jobs)]))
    if args.plot:
        plot(spans, wall, tiny, args.plot)
        print(f"\nchart: {args.plot.name}")


def job_parts(path: Path, launch: float) -> list[dict[str, Any]]:
    """The jobs' CPU by part in one process's stamp file (none for the sweeper)."""
    return sweep_job_parts.jobs_of(read_stamps(path, launch))


def spans_of(folder: Path, launch: float, wall: float) -> list[Span]:
    """Every process's spans from the stamp files in ``folder``: the sweeper's, then the workers'
    in the order their boot ended."""
    files = {path: read_stamps(path, launch) for path in sorted(folder.glob("*.stamps"))}
    sweeper = [s for s in files.values() if any(label == "<python" for _, _, label in s)]
    if len(sweeper) != 1:
        raise SystemExit(f"{len(sweeper)} sweeper stamp files in {folder}")
    started = _at(sweeper[0], "workers>")[0]
    workers = sorted(
        (s for s in files.values() if any(label == "<boot" for _, _, label in s)),
        key=lambda s: _at(s, "<boot")[0],
    )
    spans = sweeper_spans(sweeper[0], wall)
    for i, stamps in enumerate(workers, 1):
        spans += worker_spans(f"worker {i}", stamps, started)
    return spans


if __name__ == "__main__":
    if sys.argv[1:2] == ["--as-sweeper"]:
        run_as_sweeper(sys.argv[2:])
    else:
        main()
