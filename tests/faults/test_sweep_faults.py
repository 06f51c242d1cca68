"""Fault injection on sweeps, refits and their tracking state (issue 14: items 4-7 and 10-13).

Each test reproduces one case a new user hit and asserts the exit code, the one line that names
the key or file, that no traceback is printed, and the state afterwards: Optuna trial counts and
states, MLflow run statuses, files not overwritten. Bad input runs ``ltr_bench.cli.main`` in
process (no start-up cost); kills and signals run real processes: the toy Hydra app of
``tests/sweeper`` where the sweeper alone is tested, the ``ltr-bench`` command where its MLflow runs
and exit codes are.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.sweeper.toy import calls, complete, load, point, reasons, run_toy, start_toy, wait_for_file

pytestmark = pytest.mark.timeout(300)

TINY = ["dataset.n_train=300", "dataset.n_vali=100", "dataset.n_test=200", "dataset.n_features=10",
        "dataset.docs_per_query=20", "model.epochs=2", "trainer.enable_progress_bar=false", "threads=1",
        "protocol.inner_cv=2"]


# ------------------------------------------------------------------------------ helpers
def cli(cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    """``ltr-bench <args>`` in this process (cwd = ``cwd``): exit code, stdout, stderr."""
    from ltr_bench.cli import main

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["ltr-bench"])
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    handler = signal.getsignal(signal.SIGTERM)
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.signal(signal.SIGTERM, handler)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_sentence(code: int, err: str, *names: str) -> str:
    """Exit 2, no traceback, and one ``ltr-bench: error:`` line naming each of ``names``."""
    assert code == 2, err[-3000:]
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("ltr-bench: error:")]
    assert len(lines) == 1, err[-3000:]
    for name in names:
        assert name in lines[0], lines[0]
    return lines[0]


def garbage(path: Path) -> bytes:
    data = os.urandom(4096)
    path.write_bytes(data)
    return data


# ------------------------------------------------------------------------------ item 10: garbage SQLite files
def test_a_garbage_file_as_the_tracking_store_is_one_sentence(tmp_path, monkeypatch, capsys) -> None:
    db = tmp_path / "garbage.db"
    data = garbage(db)
    code, _, err = cli(tmp_path, monkeypatch, capsys, f"tracking.tracking_uri=sqlite:///{db}", *TINY)
    line = assert_one_sentence(code, err, "tracking.tracking_uri=", str(db), "is not a SQLite database")
    assert "DatabaseError" not in line
    assert db.read_bytes() == data  # the file is left as it was


def test_a_garbage_file_as_the_sweeper_storage_is_one_sentence(tmp_path, monkeypatch, capsys) -> None:
    db = tmp_path / "garbage.db"
    data = garbage(db)
    code, _, err = cli(tmp_path, monkeypatch, capsys, "-m", "hydra/sweeper=ltr_optuna",
                       f"hydra.sweeper.storage=sqlite:///{db}", "optimizer.lr=choice(0.01,0.001)",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}", *TINY)
    assert_one_sentence(code, err, "hydra.sweeper.storage=", str(db), "is not a SQLite database")
    assert db.read_bytes() == data
    assert not (tmp_path / "sweep" / "0").exists()  # no trial ran


# ------------------------------------------------------------------------------ item 12: one rule for missing folders
def test_a_missing_folder_in_a_sqlite_url_is_refused_in_both_places(tmp_path, monkeypatch, capsys) -> None:
    missing = tmp_path / "nonexistent_dir"
    code, _, err = cli(tmp_path, monkeypatch, capsys, "-m", "hydra/sweeper=ltr_optuna",
                       f"hydra.sweeper.storage=sqlite:///{missing / 'o.db'}", "optimizer.lr=choice(0.01,0.001)",
                       f"hydra.sweep.dir={tmp_path / 'sweep'}", "tracking=none", *TINY)
    sweeper = assert_one_sentence(code, err, "hydra.sweeper.storage=", f"folder {missing} does not exist")
    assert not missing.exists()  # refused, not silently created
    code, _, err = cli(tmp_path, monkeypatch, capsys, f"tracking.tracking_uri=sqlite:///{missing / 'o.db'}", *TINY)
    tracking = assert_one_sentence(code, err, "tracking.tracking_uri=", f"folder {missing} does not exist")
    assert not missing.exists()
    # the same rule in the same words
    assert sweeper.split(": ", 2)[2] == tracking.split(": ", 2)[2].replace("tracking.tracking_uri", "hydra.sweeper.storage")


# ------------------------------------------------------------------------------ item 13: words naming the key
def test_refit_best_of_a_folder_that_is_not_a_sweep_says_so(tmp_path, monkeypatch, capsys) -> None:
    plain = tmp_path / "some_folder"
    plain.mkdir()
    code, _, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={plain}")
    line = assert_one_sentence(code, err, f"refit_best={plain}", "not a sweep's output folder")
    assert "no such file" not in line
    code, _, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={tmp_path / 'nowhere'}")
    assert_one_sentence(code, err, "refit_best=", "no such file or folder")
    started = tmp_path / "started_sweep"  # a sweep folder before its first trial finished
    started.mkdir()
    (started / "multirun.yaml").write_text("seed: 0\n")
    code, _, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={started}")
    assert_one_sentence(code, err, "refit_best=", "no optimization_results.yaml yet")


def test_a_text_learning_rate_names_the_key(tmp_path, monkeypatch, capsys) -> None:
    code, _, err = cli(tmp_path, monkeypatch, capsys, "optimizer.lr=abc", "tracking=none", *TINY)
    line = assert_one_sentence(code, err, "optimizer.lr='abc' is not a number")
    assert "TypeError" not in line and "not supported between" not in line
    assert not (tmp_path / "mlflow.db").exists()  # stopped before anything ran


# ------------------------------------------------------------------------------ item 4: refits never overwrite
def _fake_sweep(folder: Path) -> Path:
    """A finished sweep's folder as the sweeper leaves it: one study, its best config."""
    folder.mkdir()
    (folder / "optimization_results.yaml").write_text(yaml.safe_dump({
        "name": "ltr_optuna", "study_name": "s", "best_value": 0.7, "best_params": {"optimizer.lr": 0.004},
        "best_overrides": ["optimizer.lr=0.004"], "study_overrides": []}))
    (folder / "multirun.yaml").write_text(yaml.safe_dump(
        {"seed": 0, "hydra": {"overrides": {"task": [*TINY, "optimizer.lr=choice(0.004,0.001)"]}}}))
    return folder


def test_refits_never_overwrite_one_another_and_the_table_reads_them_all(tmp_path, monkeypatch, capsys) -> None:
    sweep = _fake_sweep(tmp_path / "sweep")
    code, out, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={sweep}", "seed=1")
    assert code == 0, err[-3000:]
    first = sweep / "refit" / "s" / "seed1" / "results.json"
    before = first.read_bytes()
    assert "refit test metrics per study" not in out  # one refit: its own results table only
    code, out, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={sweep}", "seed=2")
    assert code == 0, err[-3000:]
    assert first.read_bytes() == before  # the seed=1 refit is kept
    assert "refit test metrics per study (mean over seeds 1, 2)" in out
    test_ndcg = [json.loads((sweep / "refit" / "s" / f"seed{k}" / "results.json").read_text())["mean"]["test"]["ndcg@10"]
                 for k in (1, 2)]
    row = next(ln for ln in out.splitlines() if ln.startswith("s "))
    assert float(row.split()[4]) == pytest.approx(sum(test_ndcg) / 2, abs=1e-4)  # ndcg@10 column
    # The same seed again: a folder of its own; the table counts the latest per seed, and says so.
    code, out, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={sweep}", "seed=1")
    assert code == 0, err[-3000:]
    assert first.read_bytes() == before
    assert (sweep / "refit" / "s" / "seed1-2" / "results.json").is_file()
    assert "(mean over seeds 1, 2)" in out and "1 older refit(s) of the same study and seed left out" in out


def test_the_refit_table_names_each_studys_seeds_when_they_differ() -> None:
    from ltr_bench.cli import refit_summary

    text = refit_summary([("fold=1", 0, {"ndcg@10": 0.7}), ("fold=1", 1, {"ndcg@10": 0.8}),
                          ("fold=2", 0, {"ndcg@10": 0.6})])
    lines = text.splitlines()
    assert lines[0] == "refit test metrics per study (mean over each study's seeds, listed after its metrics)"
    assert lines[2].split() == ["fold=1", "0.7500", "seeds", "0,1"]
    assert lines[3].split() == ["fold=2", "0.6000", "seeds", "0"]
    assert "SD(seeds)" not in text  # only one seed (0) is common to both studies
    assert refit_summary([("fold=1", 3, {"ndcg@10": 0.7})]).splitlines()[0] == "refit test metrics per study (seed 3)"
