"""How long each experiment takes at ``scale=quick``: the smoke run a user starts first.

Runs ``ltr-bench experiment=<name> scale=quick`` for every experiment of ``conf/experiment/``,
one at a time, each in a new temporary folder (its own MLflow store and outputs, nothing re-used)
with ``OMP_NUM_THREADS=1``, and prints one Markdown row per experiment: wall seconds, CPU seconds
(user + system of the command and every process it waited for: sweeps, workers), the limit and
whether the wall time is within it. The limits: 60 s per experiment, 5 min for the claims ledger
(which runs every other experiment's quick invocation). CPU seconds are the figure to read on a
busy machine, where wall time also counts the waits for a core.

    .venv/bin/python benchmarks/bench_quick_scales.py                      # every experiment
    .venv/bin/python benchmarks/bench_quick_scales.py --only fig2a table1  # some
    .venv/bin/python benchmarks/bench_quick_scales.py --out quick.md       # the table into a file

A benchmark, not a test: it needs ``LTR_DATA`` (MQ2008) like the experiments themselves.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LIMITS_S = {"claims": 300.0}  # the ledger runs every experiment's quick invocation
DEFAULT_LIMIT_S = 60.0


@dataclass
class Measured:
    """One experiment's quick run."""

    name: str
    wall_s: float
    cpu_s: float
    limit_s: float
    exit_code: int

    @property
    def within(self) -> bool:
        return self.exit_code == 0 and self.wall_s <= self.limit_s


def experiments() -> list[str]:
    """Every experiment of ``conf/experiment/`` (the ledger last: it runs the others)."""
    names = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
    return [n for n in names if n != "claims"] + (["claims"] if "claims" in names else [])


def ltr_bench() -> str:
    """The console script beside this interpreter (the venv's), else the one on PATH."""
    here = Path(sys.executable).with_name("ltr-bench")
    return str(here) if here.is_file() else (shutil.which("ltr-bench") or "ltr-bench")


def measure(name: str, keep: bool = False) -> Measured:
    """``ltr-bench experiment=<name> scale=quick`` in a new temporary folder; the output goes to
    ``run.log`` there (the folder is kept, and named, when the run fails or ``keep``)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    folder = Path(tempfile.mkdtemp(prefix=f"quick-{name}-"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    with open(folder / "run.log", "w") as log:
        code = subprocess.call(
            [ltr_bench(), f"experiment={name}", "scale=quick"],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if code != 0 or keep:
        print(f"{name}: exit {code}, log {folder / 'run.log'}", file=sys.stderr, flush=True)
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return Measured(name, wall, cpu, LIMITS_S.get(name, DEFAULT_LIMIT_S), code)


def table(rows: list[Measured]) -> str:
    """The Markdown table with a total row."""
    lines = [
        "| experiment | wall s | CPU s | limit s | within limit |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        ok = "yes" if r.within else ("no (failed)" if r.exit_code else "no")
        lines.append(f"| {r.name} | {r.wall_s:.1f} | {r.cpu_s:.1f} | {r.limit_s:.0f} | {ok} |")
    wall, cpu = sum(r.wall_s for r in rows), sum(r.cpu_s for r in rows)
    n_ok = sum(r.within for r in rows)
    lines.append(f"| total | {wall:.1f} | {cpu:.1f} | | {n_ok} of {len(rows)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="these experiments only")
    parser.add_argument("--out", type=Path, help="also write the table into this file")
    parser.add_argument("--keep", action="store_true", help="keep every run's temporary folder")
    args = parser.parse_args(argv)
    known = experiments()
    names = list(args.only) if args.only else known
    unknown = [n for n in names if n not in known]
    if unknown:
        parser.error(f"not experiments of conf/experiment/: {', '.join(unknown)}")
    rows = []
    for name in names:
        rows.append(measure(name, args.keep))
        r = rows[-1]
        print(f"{name}: {r.wall_s:.1f} s wall, {r.cpu_s:.1f} s CPU", file=sys.stderr, flush=True)
    text = (
        f"Each experiment at `scale=quick`, one at a time, in a new folder, "
        f"OMP_NUM_THREADS=1, {os.cpu_count()} cores. CPU s = user + system of the run and "
        "the processes it waited for.\n\n" + table(rows)
    )
    print(text, end="", flush=True)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0 if all(r.exit_code == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
