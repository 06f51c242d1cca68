"""``ltr-bench experiment=leaderboard scale=quick`` on a LETOR folder of one's own: three models
swept, refit and tested through Table 1's driver, the page with its tests and diagram in the run's
output folder, the parts' work and bundles in the work folder, nothing under ``docs/``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.experiments.conftest import generated_letor
from tests.inprocess import run_ltr_bench

REPO = Path(__file__).resolve().parents[2]


def _docs() -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in (REPO / "docs").rglob("*") if p.is_file()}


@pytest.mark.heavy
def test_the_leaderboard_on_a_letor_folder_of_ones_own(tmp_path: Path) -> None:
    data = generated_letor(tmp_path / "my_letor", n_queries=12)
    before = _docs()
    command = [
        "experiment=leaderboard",
        "scale=quick",
        "dataset=letor",
        f"dataset.path={data}",
        "experiment.models=[direct_ranker,lambdamart,adarank]",
        "threads=1",
        "tracking=none",
    ]
    res = run_ltr_bench(*command, f"hydra.run.dir={tmp_path / 'out'}", cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    page = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "# Leaderboard: 3 rankers on the two my_letor folds (quick)" in page
    assert "3 models, 3 measured." in page
    assert "| command | `ltr-bench experiment=leaderboard scale=quick dataset=letor" in page
    for name in ("RankNet* (DirectRanker)", "LambdaMART (LightGBM)", "AdaRank"):
        assert f"| {name} |" in page
    friedman = page.split("## Friedman + Nemenyi (test NDCG@10)")[1].split("##")[0]
    assert "over 3 models and 2 folds" in friedman
    assert "![Critical-difference diagram, test NDCG@10](leaderboard-cd-ndcg10.png)" in friedman
    assert (tmp_path / "out" / "leaderboard-cd-ndcg10.png").read_bytes().startswith(b"\x89PNG")
    assert "the mean over the splits' own query counts" in page
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv")
    assert sorted(board["label"]) == ["adarank", "direct_ranker", "lambdamart"]
    assert (board["folds"] == 2).all() and (board["status"] == "measured").all()
    # the parts' work and bundles under the key-addressed work folder, nothing under docs/
    work = tmp_path / "multirun" / "leaderboard"
    assert len(list((work / "quick").glob("letor.*-*/refits.csv"))) == 3
    assert len(list((work / "bundles" / "quick").glob("letor.*-*/provenance.json"))) == 3
    assert not (tmp_path / "docs").exists() and _docs() == before
    # the same command again: every part found, nothing run
    again = run_ltr_bench(*command, f"hydra.run.dir={tmp_path / 'again'}", cwd=tmp_path)
    assert again.returncode == 0, again.stdout[-3000:]
    assert again.stdout.count("re-using results bundle") == 3 and "running (log" not in again.stdout
