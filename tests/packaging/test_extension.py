"""The "Your own model" guide, word for word: a package and a config folder outside the repository.

The files are taken from the guide's code blocks (docs/guides/own-model.md) and written into a temporary folder; the two
``ltr-bench`` command lines of its bash block run there (the real CLI: the search path, the import
of the user's class and the sweeper plugin are what is tested), each with ``threads=1``. Without
the MQ2008 data the run falls back to the default synthetic dataset.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ltr_bench.data.datasets import resolve_data_root
from tests.waiting import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


GUIDE = REPO / "docs" / "guides" / "own-model.md"


def files_and_commands() -> tuple[dict[str, str], list[list[str]]]:
    section = GUIDE.read_text()
    files = dict(re.findall(r"^`([\w./]+)`:\n\n```\w+\n(.*?)```", section, flags=re.S | re.M))
    bash = re.search(r"```bash\n(.*?)```", section, flags=re.S)
    assert bash is not None
    commands = [
        shlex.split(line.split("#")[0])
        for line in bash.group(1).splitlines()
        if line.startswith("ltr-bench")
    ]
    return files, commands


@pytest.mark.heavy
def test_own_model_guide_runs_once_and_sweeps_two_trials(tmp_path: Path) -> None:
    files, commands = files_and_commands()
    assert set(files) == {
        "my_rankers/__init__.py",
        "my_conf/model/ridge.yaml",
        "my_conf/search/ridge.yaml",
    }
    assert not tmp_path.resolve().is_relative_to(REPO)
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    once, sweep = commands
    assert once[:4] == ["ltr-bench", "--config-dir", "my_conf", "model=ridge"]
    assert "-m" in sweep and "search=ridge" in sweep and "hydra.sweeper.n_trials=2" in sweep
    have_mq2008 = (resolve_data_root(os.environ.get("LTR_DATA")) / "MQ2008" / "Fold1").is_dir()
    if not have_mq2008:
        once = [a for a in once if not a.startswith("dataset")]
    env = dict(os.environ, PYTHONPATH=str(tmp_path), OMP_NUM_THREADS="1")
    env.pop("MLFLOW_TRACKING_URI", None)

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BIN / argv[0]), *argv[1:], "threads=1"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )

    proc = run(once)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (results,) = (tmp_path / "outputs").glob("*/*/results.json")
    res = json.loads(results.read_text())
    assert res["config"]["model"]["_target_"] == "my_rankers.RidgeRanker"
    assert 0 < res["mean"]["test"]["ndcg@10"] <= 1
    # its model was saved through the class's own save_params: w.npy, nothing else of the ranker
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    fold_run = res["folds"][0]["mlflow_run_id"]
    (logged,) = client.search_logged_models([client.get_run(fold_run).info.experiment_id])
    ranker_files = {
        a.path for a in client.list_logged_model_artifacts(logged.model_id, "data/pipeline/ranker")
    }
    assert ranker_files == {"data/pipeline/ranker/w.npy"}

    proc = run(sweep)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (opt,) = (tmp_path / "multirun").glob("*/*/optimization_results.yaml")
    best = yaml.safe_load(opt.read_text())
    assert "model.alpha" in best["best_params"]
    trials = [json.loads(p.read_text()) for p in opt.parent.glob("*/results.json")]
    assert len(trials) == 2 and all(
        t["config"]["model"]["_target_"] == "my_rankers.RidgeRanker" for t in trials
    )
