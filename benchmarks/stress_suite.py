"""Stress the test suite: ``make test`` N times, each in a fresh clone of the committed HEAD, in
random order (pytest-randomly, a new seed per run), while a busy loop keeps one core loaded; print
the pass count. A suite that passes here does not depend on timing, test order or leftovers.

Setup of each clone (``--setup``):
  * ``copy`` (default, seconds): the source checkout's ``.venv`` is copied as hard links and the
    source path in its text files (script shebangs, the editable install's finder) is rewritten to
    the clone's, so the clone's own code is what gets imported. Needs ``make setup`` done once in
    the source checkout.
  * ``make`` (minutes per clone, needs the package index): ``make setup`` in every clone, as a new
    user does.

Examples (the machine should be otherwise idle; these take a long time):
  .venv/bin/python benchmarks/stress_suite.py --runs 10             # `make test` x 10
  .venv/bin/python benchmarks/stress_suite.py --runs 3 --heavy      # `make test-heavy` x 3
  .venv/bin/python benchmarks/stress_suite.py --runs 1 --skip-lint \\
      --pytest-args tests/test_stats.py                              # a smoke check of the script
Export LTR_DATA (the LETOR folder) so that the clones' real-data tests run instead of skipping.
A failed run's log and seed are kept in the work folder; re-run its order with
``make test SEED=<seed>`` in a checkout.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEED_LINE = re.compile(r"Using --randomly-seed=(\d+)")


@dataclass
class Outcome:
    """One run's verdict, its seed and where its log is."""

    index: int
    passed: bool
    seed: str
    log: Path
    minutes: float


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=10, help="fresh clones to test (default 10)")
    parser.add_argument(
        "--heavy", action="store_true", help="run `make test-heavy` (pytest -m heavy) instead"
    )
    parser.add_argument("--setup", choices=("copy", "make"), default="copy")
    parser.add_argument(
        "--repo", type=Path, default=REPO, help="checkout to clone (default: this one)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="default: a new temp folder")
    parser.add_argument("--no-busy", action="store_true", help="do not load a core meanwhile")
    parser.add_argument(
        "--skip-lint", action="store_true", help="`make -o lint test`: tests only, no ruff/mypy"
    )
    parser.add_argument("--pytest-args", default="", help="passed as make's PYTEST_ARGS")
    parser.add_argument("--keep", action="store_true", help="keep the clones (default: removed)")
    return parser.parse_args(argv)


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def fresh_clone(repo: Path, commit: str, dest: Path) -> None:
    """``dest``: a clone of ``repo`` with ``commit`` checked out (committed files only)."""
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(repo), str(dest)], check=True)
    git("checkout", "--quiet", "--detach", commit, cwd=dest)


def relocated_venv(source: Path, clone: Path) -> None:
    """``clone/.venv``: hard links to ``source/.venv`` (a copy where linking fails), with the
    text files naming ``source`` rewritten to name ``clone`` (so imports find the clone)."""
    src, dst = source / ".venv", clone / ".venv"
    if not (src / "bin" / "python").exists():
        sys.exit(f"stress_suite: {src} has no python; run `make setup` in {source} first")
    try:
        subprocess.run(["cp", "-al", str(src), str(dst)], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        shutil.rmtree(dst, ignore_errors=True)
        subprocess.run(["cp", "-a", str(src), str(dst)], check=True)
    found = subprocess.run(
        ["grep", "-rlIF", str(source), str(dst)], capture_output=True, text=True
    ).stdout.split()
    old, new = str(source), str(clone)
    for name in found:
        path = Path(name)
        if path.is_symlink():
            continue
        text = path.read_text(errors="surrogateescape").replace(old, new)
        tmp = path.with_name(path.name + ".stress-tmp")
        tmp.write_text(text, errors="surrogateescape")
        tmp.chmod(path.stat().st_mode)
        tmp.replace(path)  # a new file: the source venv's hard-linked original stays as it was


def setup_clone(args: argparse.Namespace, clone: Path, log: Path) -> None:
    if args.setup == "copy":
        relocated_venv(args.repo.resolve(), clone)
        return
    with open(log, "a") as out:
        subprocess.run(
            ["make", "setup"], cwd=clone, stdout=out, stderr=subprocess.STDOUT, check=True
        )


def test_command(args: argparse.Namespace, seed: int) -> list[str]:
    target = "test-heavy" if args.heavy else "test"
    cmd = ["make"]
    if args.skip_lint and not args.heavy:
        cmd += ["-o", "lint"]
    cmd += [target, f"SEED={seed}"]
    if args.pytest_args:
        cmd.append(f"PYTEST_ARGS={args.pytest_args}")
    return cmd


def run_once(args: argparse.Namespace, index: int, workdir: Path, commit: str) -> Outcome:
    """Clone, set up and test once; the log goes to ``workdir/run<index>.log``."""
    clone = workdir / f"clone{index}"
    log = workdir / f"run{index}.log"
    seed = int.from_bytes(os.urandom(4), "big")
    start = time.monotonic()
    fresh_clone(args.repo, commit, clone)
    setup_clone(args, clone, log)
    with open(log, "a") as out:
        code = subprocess.call(
            test_command(args, seed), cwd=clone, stdout=out, stderr=subprocess.STDOUT
        )
    found = SEED_LINE.findall(log.read_text(errors="replace"))
    if not args.keep:
        shutil.rmtree(clone, ignore_errors=True)
    minutes = (time.monotonic() - start) / 60
    return Outcome(index, code == 0, found[-1] if found else str(seed), log, minutes)


def start_busy_loop() -> subprocess.Popen:
    """One process spinning on a core for as long as the runs take; it also ends when this
    script is killed (it checks its parent now and then), so it never keeps a core busy after."""
    spin = (
        "import os\n"
        "parent = os.getppid()\n"
        "while os.getppid() == parent:\n"
        "    for _ in range(1_000_000): pass\n"
    )
    return subprocess.Popen([sys.executable, "-c", spin])


def report(outcomes: list[Outcome], what: str) -> int:
    passed = sum(o.passed for o in outcomes)
    for o in outcomes:
        verdict = "passed" if o.passed else f"FAILED (log {o.log})"
        print(f"run {o.index}: {verdict}, seed {o.seed}, {o.minutes:.1f} min")
        if not o.passed:
            tail = o.log.read_text(errors="replace").splitlines()[-15:]
            print("    " + "\n    ".join(tail))
    print(f"{what}: {passed} of {len(outcomes)} runs passed")
    return 0 if passed == len(outcomes) else 1


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    commit = git("rev-parse", "HEAD", cwd=args.repo)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="ltr_bench_stress_"))
    workdir.mkdir(parents=True, exist_ok=True)
    what = f"make {'test-heavy' if args.heavy else 'test'} at {commit[:10]}"
    print(f"{what}: {args.runs} fresh clone(s) in {workdir}", flush=True)
    busy = None if args.no_busy else start_busy_loop()
    outcomes = []
    try:
        for i in range(1, args.runs + 1):
            outcome = run_once(args, i, workdir, commit)
            print(
                f"run {i}/{args.runs}: {'passed' if outcome.passed else 'FAILED'} "
                f"(seed {outcome.seed}, {outcome.minutes:.1f} min)",
                flush=True,
            )
            outcomes.append(outcome)
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()
    return report(outcomes, what)


if __name__ == "__main__":
    sys.exit(main())
