"""A sweep whose jobs run in the sweeper's own process (Hydra's basic launcher, the default)."""

from __future__ import annotations

from typing import Any

import pytest

from ltr_bench.launching import composing
from tests.sweeper.toy import calls, run_toy


def test_a_sweeper_composes_the_basic_launchers_jobs_through_its_cache_from_fresh_files(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The jobs a sweeper runs in its own process (Hydra's basic launcher) are composed through
    the cache (``check``: each also by Hydra, failing on any difference); the next sweep of the
    process starts from the config files again."""
    monkeypatch.setenv(composing.CACHE_ENV, "check")
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
        # one defaults tree kept, for this sweep's jobs: the earlier sweep's were forgotten
        assert [shape[0] for shape in composing._trees] == [sweep]
    runs = {(r["study"], r["x"]) for r in calls(tmp_path)}
    assert runs == {(study, x) for study in "ab" for x in range(3)}
