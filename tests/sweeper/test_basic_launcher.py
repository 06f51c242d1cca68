"""A sweep whose jobs run in the sweeper's own process (Hydra's basic launcher, the default)."""

from __future__ import annotations

import os
from typing import Any

from tests.sweeper.toy import calls, run_toy


def test_the_basic_launchers_jobs_run_in_the_sweepers_process_sweep_after_sweep(
    tmp_path: Any,
) -> None:
    """Two sweeps of one process (as an experiment runs its sweeps in its own process): every
    job of each runs in it, composed by Hydra from the config files."""
    sweeps = ["multirun/a", "multirun/b"]
    for sweep in sweeps:
        proc = run_toy(
            tmp_path,
            "hydra/sweeper/sampler=grid",
            "hydra.sweeper.n_trials=null",
            "x=range(0,3)",
            f"hydra.sweeper.study_name={sweep[-1]}",
            f"hydra.sweep.dir={sweep}",
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    runs = {(r["study"], r["x"]) for r in calls(tmp_path)}
    assert runs == {(study, x) for study in "ab" for x in range(3)}
    assert {r["pid"] for r in calls(tmp_path)} == {os.getpid()}
