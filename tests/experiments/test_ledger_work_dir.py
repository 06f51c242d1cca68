"""Where the claims ledger runs an invocation: the same keyed folder each time (so an interrupted
run resumes its sweeps there), its log keeping every attempt; without ``work_dir``, the ledger's
own output folder."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from ltr_bench.experiments.ledger.runs import Context, execute
from ltr_bench.experiments.ledger.spec import RunSpec
from ltr_bench.experiments.ledger.tables import Invocation

KEY = "0123456789abcdef0123"
PART = Invocation(RunSpec("table1_mq2008_binary.part2", "table1"), KEY)


def _context(out_dir: Path, work: Path | None) -> Context:
    exp = cast(Any, SimpleNamespace(out_dir=out_dir))
    return Context(exp, cast(Any, None), "full", 0, [], True, None, work)


def test_a_run_works_in_the_same_keyed_folder_whichever_ledger_starts_it(tmp_path: Path) -> None:
    first = _context(tmp_path / "outputs" / "first", tmp_path / "work")
    second = _context(tmp_path / "outputs" / "second", tmp_path / "work")
    expected = tmp_path / "work" / "full" / "table1_mq2008_binary.part2-0123456789ab"
    assert first.run_dir(PART) == second.run_dir(PART) == expected


def test_without_a_work_dir_a_run_works_in_the_ledgers_own_output(tmp_path: Path) -> None:
    ctx = _context(tmp_path / "outputs" / "first", None)
    assert ctx.run_dir(PART) == tmp_path / "outputs" / "first" / "runs" / PART.run.name


@pytest.mark.parametrize("in_process", [False, True], ids=["subprocess", "in_process"])
def test_a_runs_log_keeps_the_attempts_before_it(tmp_path: Path, in_process: bool) -> None:
    """Two attempts of a run that cannot start (an experiment that does not exist): each fails
    with the log's tail, and the log holds both, the first above the second; in a new process or
    in this one alike."""
    out = tmp_path / "work" / "full" / "broken-0123456789ab"
    log = out.with_name(f"{out.name}.log")
    log.parent.mkdir(parents=True)
    log.write_text("the log of an attempt the machine did not finish\n")
    run = RunSpec("broken", "no_such_experiment")
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"exit [1-9].*broken-0123456789ab\.log"):
            execute(run, "quick", 0, ["threads=1"], out, log, in_process)
    text = log.read_text()
    assert text.startswith("the log of an attempt the machine did not finish\n=== ltr-bench ")
    headers = [line for line in text.splitlines() if line.startswith("=== ltr-bench ")]
    assert len(headers) == 2
    assert all(
        f"experiment=no_such_experiment scale=quick threads=1 seed=0 hydra.run.dir={out}" in h
        for h in headers
    )
    assert text.count("no_such_experiment") > 2  # each attempt's own error is in the log too
