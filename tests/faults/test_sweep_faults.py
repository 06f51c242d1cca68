"""Fault injection on sweeps, refits and their tracking state.

Each test reproduces one case a new user hit and asserts the exit code, the one line that names
the key or file, that no traceback is printed, and the state afterwards: Optuna trial counts and
states, MLflow run statuses, files not overwritten. Bad input runs ``ltr_bench.cli.main.main`` in
process (no start-up cost); kills and signals run real processes: the toy Hydra app of
``tests/sweeper`` where the sweeper alone is tested, the ``ltr-bench`` command where its MLflow runs
and exit codes are.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.sweeper.toy import (
    both_workers_run,
    calls,
    complete,
    load,
    point,
    reasons,
    run_toy,
    start_toy,
    wait_for_file,
)
from tests.waiting import HANG_GUARD_S, TEST_GUARD_S, wait_until

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

TINY = [
    "dataset.n_train=300",
    "dataset.n_vali=100",
    "dataset.n_test=200",
    "dataset.n_features=10",
    "dataset.docs_per_query=20",
    "model.epochs=2",
    "trainer.enable_progress_bar=false",
    "threads=1",
    "protocol.inner_cv=2",
]


# ------------------------------------------------------------------------------ helpers
def cli(
    cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture, *args: str
) -> tuple[int, str, str]:
    """``ltr-bench <args>`` in this process (cwd = ``cwd``): exit code, stdout, stderr."""
    from ltr_bench.cli.main import main

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
def test_a_garbage_file_as_the_tracking_store_is_one_sentence(
    tmp_path, monkeypatch, capsys
) -> None:
    db = tmp_path / "garbage.db"
    data = garbage(db)
    code, _, err = cli(
        tmp_path, monkeypatch, capsys, f"tracking.tracking_uri=sqlite:///{db}", *TINY
    )
    line = assert_one_sentence(
        code, err, "tracking.tracking_uri=", str(db), "is not a SQLite database"
    )
    assert "DatabaseError" not in line
    assert db.read_bytes() == data  # the file is left as it was


def test_a_garbage_file_as_the_sweeper_storage_is_one_sentence(
    tmp_path, monkeypatch, capsys
) -> None:
    db = tmp_path / "garbage.db"
    data = garbage(db)
    code, _, err = cli(
        tmp_path,
        monkeypatch,
        capsys,
        "-m",
        "hydra/sweeper=ltr_optuna",
        f"hydra.sweeper.storage=sqlite:///{db}",
        "optimizer.lr=choice(0.01,0.001)",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *TINY,
    )
    assert_one_sentence(code, err, "hydra.sweeper.storage=", str(db), "is not a SQLite database")
    assert db.read_bytes() == data
    assert not (tmp_path / "sweep" / "0").exists()  # no trial ran


# ------------------------------------------------------------------------------ item 12: one rule for missing folders
def test_a_missing_folder_in_a_sqlite_url_is_refused_in_both_places(
    tmp_path, monkeypatch, capsys
) -> None:
    missing = tmp_path / "nonexistent_dir"
    code, _, err = cli(
        tmp_path,
        monkeypatch,
        capsys,
        "-m",
        "hydra/sweeper=ltr_optuna",
        f"hydra.sweeper.storage=sqlite:///{missing / 'o.db'}",
        "optimizer.lr=choice(0.01,0.001)",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "tracking=none",
        *TINY,
    )
    sweeper = assert_one_sentence(
        code, err, "hydra.sweeper.storage=", f"folder {missing} does not exist"
    )
    assert not missing.exists()  # refused, not silently created
    code, _, err = cli(
        tmp_path, monkeypatch, capsys, f"tracking.tracking_uri=sqlite:///{missing / 'o.db'}", *TINY
    )
    tracking = assert_one_sentence(
        code, err, "tracking.tracking_uri=", f"folder {missing} does not exist"
    )
    assert not missing.exists()
    # the same rule in the same words
    assert sweeper.split(": ", 2)[2] == tracking.split(": ", 2)[2].replace(
        "tracking.tracking_uri", "hydra.sweeper.storage"
    )


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
    study = tmp_path / "study.db"  # e.g. the sweep's Optuna database, a binary file
    study.write_bytes(b"SQLite format 3\x00\xfb\x10\x00\x02")
    code, _, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={study}")
    assert_one_sentence(code, err, f"refit_best={study}", "not a sweep results file")


def test_a_search_space_without_its_model_says_which_model_to_add(
    tmp_path, monkeypatch, capsys
) -> None:
    """search=lambdamart on the default model: its keys (model.n_estimators...) are not the
    default model's, and the sentence says which model the space is for."""
    data = [o for o in TINY if o.startswith(("dataset.", "threads="))]
    code, _, err = cli(
        tmp_path,
        monkeypatch,
        capsys,
        "-m",
        "search=lambdamart",
        "hydra.sweeper.n_trials=1",
        "tracking=none",
        *data,
    )
    assert_one_sentence(
        code,
        err,
        "model.n_estimators is not a key of the default model",
        "search=lambdamart samples the keys of model=lambdamart; add model=lambdamart",
    )
    # with its model, no such hint (here a misspelt key of that model)
    code, _, err = cli(
        tmp_path,
        monkeypatch,
        capsys,
        "model=lambdamart",
        "model.n_estimaters=5",
        "tracking=none",
        *data,
    )
    line = assert_one_sentence(code, err, "model.n_estimaters is not a config key")
    assert "add model=" not in line


def test_a_text_learning_rate_names_the_key(tmp_path, monkeypatch, capsys) -> None:
    code, _, err = cli(tmp_path, monkeypatch, capsys, "optimizer.lr=abc", "tracking=none", *TINY)
    line = assert_one_sentence(code, err, "optimizer.lr='abc' is not a number")
    assert "TypeError" not in line and "not supported between" not in line
    assert not (tmp_path / "mlflow.db").exists()  # stopped before anything ran


def test_a_negative_learning_rate_is_refused_before_any_run_is_tracked(
    tmp_path, monkeypatch, capsys
) -> None:
    """Was: torch refused lr=-1 inside fit, after the MLflow run had started (a FAILED run)."""
    code, _, err = cli(tmp_path, monkeypatch, capsys, "optimizer.lr=-1", *TINY)
    assert_one_sentence(code, err, "optimizer.lr=-1")
    db = tmp_path / "mlflow.db"
    if db.exists():  # the store may be created, but holds no run
        with sqlite3.connect(db) as con:
            assert list(con.execute("select name, status from runs")) == []


# ------------------------------------------------------------------------------ item 4: refits never overwrite
def _fake_sweep(folder: Path) -> Path:
    """A finished sweep's folder as the sweeper leaves it: one study, its best config."""
    folder.mkdir()
    (folder / "optimization_results.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "ltr_optuna",
                "study_name": "s",
                "best_value": 0.7,
                "best_params": {"optimizer.lr": 0.004},
                "best_overrides": ["optimizer.lr=0.004"],
                "study_overrides": [],
            }
        )
    )
    (folder / "multirun.yaml").write_text(
        yaml.safe_dump(
            {
                "seed": 0,
                "hydra": {"overrides": {"task": [*TINY, "optimizer.lr=choice(0.004,0.001)"]}},
            }
        )
    )
    return folder


def test_refits_never_overwrite_one_another_and_the_table_reads_them_all(
    tmp_path, monkeypatch, capsys
) -> None:
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
    test_ndcg = [
        json.loads((sweep / "refit" / "s" / f"seed{k}" / "results.json").read_text())["mean"][
            "test"
        ]["ndcg@10"]
        for k in (1, 2)
    ]
    row = next(ln for ln in out.splitlines() if ln.startswith("s "))
    assert float(row.split()[4]) == pytest.approx(sum(test_ndcg) / 2, abs=1e-4)  # ndcg@10 column
    # The same seed again: a folder of its own; the table counts the latest per seed, and says so.
    code, out, err = cli(tmp_path, monkeypatch, capsys, f"refit_best={sweep}", "seed=1")
    assert code == 0, err[-3000:]
    assert first.read_bytes() == before
    assert (sweep / "refit" / "s" / "seed1-2" / "results.json").is_file()
    assert (
        "(mean over seeds 1, 2)" in out
        and "1 older refit(s) of the same study and seed left out" in out
    )


def test_the_refit_table_names_each_studys_seeds_when_they_differ() -> None:
    from ltr_bench.cli.refits import refit_summary

    text = refit_summary(
        [
            ("fold=1", 0, {"ndcg@10": 0.7}),
            ("fold=1", 1, {"ndcg@10": 0.8}),
            ("fold=2", 0, {"ndcg@10": 0.6}),
        ]
    )
    lines = text.splitlines()
    assert (
        lines[0]
        == "refit test metrics per study (mean over each study's seeds, listed after its metrics)"
    )
    assert lines[2].split() == ["fold=1", "0.7500", "seeds", "0,1"]
    assert lines[3].split() == ["fold=2", "0.6000", "seeds", "0"]
    assert "SD(seeds)" not in text  # only one seed (0) is common to both studies
    assert (
        refit_summary([("fold=1", 3, {"ndcg@10": 0.7})]).splitlines()[0]
        == "refit test metrics per study (seed 3)"
    )


# ------------------------------------------------------------------------------ item 5: the enqueued default
def _fixed(trials: list) -> list[tuple[int, str, dict]]:
    """(number, state, fixed params) of the enqueued trials."""
    return [
        (t.number, t.state.name, t.system_attrs["fixed_params"])
        for t in trials
        if "fixed_params" in t.system_attrs
    ]


def test_a_killed_default_trial_is_enqueued_again_on_resume(tmp_path: Path) -> None:
    common = [
        "hydra.sweeper.study_name=dflt",
        "hydra.sweeper.enqueue_defaults=true",
        "hydra.sweeper.n_trials=4",
    ]
    proc = start_toy(tmp_path, *common, "hang_at_trial=0", f"hang_marker={tmp_path / 'hang'}")
    wait_for_file(tmp_path / "hang", proc)  # trial 0, the config's defaults x=0 y=0, is running
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=HANG_GUARD_S)
    resumed = run_toy(tmp_path, *common)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "Skipping enqueue" not in resumed.stdout + resumed.stderr
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'dflt.db'}", "dflt")
    # trial 0 interrupted, the default enqueued again and run first on resume
    assert _fixed(trials) == [(0, "FAIL", {"x": 0, "y": 0}), (1, "COMPLETE", {"x": 0, "y": 0})]
    assert reasons(trials) == {0: "interrupted"}
    assert len(complete(trials)) == 4 and len({point(t) for t in complete(trials)}) == 4
    assert (calls(tmp_path)[1]["x"], calls(tmp_path)[1]["y"]) == (0, 0)


def test_a_default_trial_stopped_by_a_config_error_runs_once_the_config_is_fixed(
    tmp_path: Path,
) -> None:
    common = [
        "hydra.sweeper.study_name=fixed",
        "hydra.sweeper.enqueue_defaults=true",
        "hydra.sweeper.n_trials=3",
    ]
    aborted = run_toy(tmp_path, *common, "user_error_x=0")  # e.g. bad data: every trial would fail
    assert aborted.returncode != 0 and "toy config error for x=0" in aborted.stderr
    ok = run_toy(tmp_path, *common)  # the data fixed, the same command again
    assert ok.returncode == 0, ok.stderr[-3000:]
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'fixed.db'}", "fixed")
    assert _fixed(trials) == [(0, "FAIL", {"x": 0, "y": 0}), (1, "COMPLETE", {"x": 0, "y": 0})]
    assert reasons(trials) == {0: "config_error"} and len(complete(trials)) == 3


# ------------------------------------------------------------------------------ item 7: claimed re-evaluations
def _claims(url: str, name: str) -> list:
    from ltr_bench.sweeper.job import LOCKS_SUFFIX as CLAIMS_SUFFIX

    return optuna.load_study(study_name=name + CLAIMS_SUFFIX, storage=url).get_trials(
        deepcopy=False
    )


def test_two_workers_sharing_a_study_reevaluate_each_top_trial_once(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    args = [
        f"hydra.sweeper.storage={url}",
        "hydra.sweeper.study_name=shared",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=6",
        "sleep_s=0.3",
        *both_workers_run(tmp_path),
        "hydra.sweeper.reevaluate.top_k=3",
        "se=0.1",
    ]
    workers = [
        start_toy(tmp_path, *args, f"hydra.sweep.dir={tmp_path / f'w{i}'}", log_name=f"w{i}.log")
        for i in (0, 1)
    ]
    for w in workers:
        assert w.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / "w0.log").read_text()[-2000:] + (
            tmp_path / "w1.log"
        ).read_text()[-2000:]
    records = calls(tmp_path)
    again = [r for r in records if r["reevaluation"]]
    trials = load(url, "shared")
    top = sorted(complete(trials), key=lambda t: (-t.value, t.number))[:3]
    assert len(again) == 3  # not 6: each top trial re-evaluated once, by one of the workers
    assert sorted(r["trial"] for r in again) == sorted(t.number for t in top)
    assert (
        len([r for r in records if not r["reevaluation"]]) == 6
        and len({r["pid"] for r in records}) == 2
    )
    claims = _claims(url, "shared")
    assert sorted(
        t.user_attrs["ltr_sweeper.reevaluates"] for t in claims if t.state == TrialState.COMPLETE
    ) == sorted(t.number for t in top)
    assert {
        t.user_attrs.get("ltr_sweeper.fail_reason") for t in claims if t.state == TrialState.FAIL
    } <= {"duplicate"}
    # both workers waited for the other's re-evaluations: the same complete choice in each folder
    results = [
        yaml.safe_load((tmp_path / f"w{i}" / "optimization_results.yaml").read_text())
        for i in (0, 1)
    ]
    assert results[0]["best_trial"] == results[1]["best_trial"]
    assert [len(r["reevaluated"]) for r in results] == [3, 3]


def test_a_killed_reevaluation_is_claimed_again_and_runs_once_more(tmp_path: Path) -> None:
    common = [
        "hydra.sweeper.study_name=rk",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.reevaluate.top_k=2",
    ]
    proc = start_toy(
        tmp_path, *common, "hang_reevaluation=true", f"hang_marker={tmp_path / 'hang'}"
    )
    wait_for_file(tmp_path / "hang", proc)  # the three trials done, the first re-evaluation running
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=HANG_GUARD_S)
    killed = int((tmp_path / "hang").read_text())
    resumed = run_toy(tmp_path, *common)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    url = f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'rk.db'}"
    again = [r["trial"] for r in calls(tmp_path) if r["reevaluation"]]
    assert again.count(killed) == 2 and len(again) == 3  # the killed one once more, the other once
    claims = _claims(url, "rk")
    assert [
        (t.user_attrs["ltr_sweeper.reevaluates"], t.user_attrs.get("ltr_sweeper.fail_reason"))
        for t in claims
        if t.state == TrialState.FAIL
    ] == [(killed, "interrupted")]
    assert len([t for t in claims if t.state == TrialState.COMPLETE]) == 2
    assert not [t for t in claims + load(url, "rk") if t.state == TrialState.RUNNING]
    results = yaml.safe_load(
        (tmp_path / "multirun" / "sweep" / "optimization_results.yaml").read_text()
    )
    assert len(results["reevaluated"]) == 2


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_parallel_launchers_job_stops_when_its_sweeper_is_killed(tmp_path: Path) -> None:
    """A SIGKILLed sweeper would leave its worker running the job (its trial failed as
    interrupted on resume, the job going on as if nothing had happened): the guard stops it."""
    common = [
        "hydra.sweeper.study_name=orphan",
        "hydra.sweeper.n_trials=2",
        "hydra/launcher=ltr_pool",
        "hydra.launcher.n_jobs=2",
        "hydra.sweeper.n_jobs=2",
    ]
    proc = start_toy(tmp_path, *common, "hang_at_trial=0", f"hang_marker={tmp_path / 'hang'}")
    wait_for_file(tmp_path / "hang", proc)  # a worker process runs the hanging job (1 h sleep)
    (job,) = [
        r["pid"] for r in calls(tmp_path) if r["trial"] == int((tmp_path / "hang").read_text())
    ]
    assert job != proc.pid
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=HANG_GUARD_S)
    # The event: the job's process ends (the guard's SIGTERM, at worst orphan_grace_period = 1 s
    # of the toy's config later). The limit only stops a hang; the job itself sleeps for an hour.
    wait_until(lambda: not _alive(job), f"the orphaned job (pid {job}) ended")
    resumed = run_toy(tmp_path, *common)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'orphan.db'}", "orphan")
    assert len(complete(trials)) == 2 and set(reasons(trials).values()) <= {"interrupted"}


# ------------------------------------------------------------------------------ item 11: SIGTERM
def test_sigterm_ends_a_plain_hydra_apps_sweep_as_sigterm(tmp_path: Path) -> None:
    """An app without a SIGTERM handler of its own: the trial is marked, then the process ends by
    SIGTERM (status 143 in a shell), not as an interrupt (130)."""
    common = ["hydra.sweeper.study_name=term", "hydra.sweeper.n_trials=3"]
    proc = start_toy(tmp_path, *common, "hang_at_trial=1", f"hang_marker={tmp_path / 'hang'}")
    wait_for_file(tmp_path / "hang", proc)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=HANG_GUARD_S) == -signal.SIGTERM
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'term.db'}", "term")
    assert reasons(trials) == {int((tmp_path / "hang").read_text()): "interrupted"}
    assert len(complete(trials)) == 1


def test_sigterm_on_a_sweep_with_trials_in_flight_marks_them_and_stops_their_workers(
    tmp_path: Path,
) -> None:
    """Trials in flight in warm workers (hydra/launcher=ltr_pool): SIGTERM ends
    the sweeper by SIGTERM once the running trials are marked, their workers are stopped, and the
    same command resumes to the full budget."""
    common = [
        "hydra.sweeper.study_name=flight",
        "hydra.sweeper.n_trials=4",
        "hydra/launcher=ltr_pool",
        "hydra.launcher.n_jobs=2",
        "hydra.sweeper.n_jobs=2",
    ]
    proc = start_toy(tmp_path, *common, "hang_at_trial=0", f"hang_marker={tmp_path / 'hang'}")
    wait_for_file(tmp_path / "hang", proc)
    (job,) = [r["pid"] for r in calls(tmp_path) if r["trial"] == 0]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=HANG_GUARD_S) == -signal.SIGTERM
    wait_until(lambda: not _alive(job), f"the stopped job (pid {job}) ended")
    url = f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'flight.db'}"
    trials = load(url, "flight")
    assert reasons(trials).get(0) == "interrupted"
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    resumed = run_toy(tmp_path, *common)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(complete(load(url, "flight"))) == 4


# ------------------------------------------------------------------------------ items 6 and 11 through ltr-bench
def _running(db: Path) -> list[str]:
    """Names of the RUNNING MLflow runs in ``db`` (read-only; [] while the store is being made)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            return [
                name for (name,) in con.execute("select name from runs where status = 'RUNNING'")
            ]
    except sqlite3.Error:
        return []


def _name(trial: int, reevaluation: bool = False) -> str:
    """The MLflow run name of a DirectRanker trial (``direct_ranker · trial 1``)."""
    from ltr_bench.tracking_keys import trial_run_name

    return trial_run_name("direct_ranker", trial, reevaluation)


def _signal_when_running(
    proc: subprocess.Popen, db: Path, wanted: str, sig: signal.Signals
) -> None:
    wait_until(lambda: wanted in _running(db), f"the run '{wanted}' was RUNNING", proc)
    proc.send_signal(sig)


def test_sigterm_on_an_ltr_bench_sweep_exits_143(tmp_path: Path) -> None:
    """The README's promise (was: exit 130 and "interrupted"): the sweeper keeps ltr-bench's own
    SIGTERM handler, so the trial is marked interrupted, its MLflow run KILLED, and the exit is 143."""
    from tests.test_e2e import LTR_BENCH, _env

    cmd = [
        LTR_BENCH,
        "-m",
        "hydra/sweeper=ltr_optuna",
        "hydra.sweeper.study_name=t",
        "hydra.sweeper.n_trials=2",
        "optimizer.lr=choice(0.004,0.002)",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *TINY,
        "model.epochs=10",
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _signal_when_running(proc, tmp_path / "mlflow.db", _name(0), signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, err[-3000:]
    assert "Traceback" not in out + err and "interrupted; the MLflow runs" not in err
    assert (
        err.strip().splitlines()[-1] == "ltr-bench: terminated; the MLflow runs are marked KILLED"
    )
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 't.db'}", "t")
    assert reasons(trials) == {0: "interrupted"} and not complete(trials)
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        assert list(con.execute("select name, status from runs where name like '%trial%'")) == [
            (_name(0), "KILLED")
        ]


def test_sigterm_on_a_parallel_ltr_bench_sweep_leaves_no_running_mlflow_run(tmp_path: Path) -> None:
    """Trials in flight in warm workers: on SIGTERM the sweeper stops the workers, fails their
    trials as interrupted and marks their MLflow runs KILLED before it exits 143."""
    from tests.test_e2e import LTR_BENCH, _env

    cmd = [
        LTR_BENCH,
        "-m",
        "hydra/sweeper=ltr_optuna",
        "hydra.sweeper.study_name=p",
        "hydra.sweeper.n_trials=2",
        "optimizer.lr=choice(0.004,0.002)",
        "hydra/launcher=ltr_pool",
        "hydra.launcher.n_jobs=2",
        "hydra.sweeper.n_jobs=2",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *TINY,
        "model.epochs=200",
    ]
    proc = subprocess.Popen(
        cmd, cwd=tmp_path, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    _signal_when_running(proc, tmp_path / "mlflow.db", _name(0), signal.SIGTERM)
    out, err = proc.communicate(timeout=HANG_GUARD_S)
    assert proc.returncode == 143, err[-3000:]
    assert _running(tmp_path / "mlflow.db") == []
    trials = load(f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 'p.db'}", "p")
    interrupted = {n for n, why in reasons(trials).items() if why == "interrupted"}
    assert 0 in interrupted and not [t for t in trials if t.state == TrialState.RUNNING]
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        status = dict(con.execute("select name, status from runs where name like '%trial%'"))
    # trial 0's run was RUNNING when the signal came; trial 1's, if its job had started one
    assert status[_name(0)] == "KILLED"
    assert {status[_name(n)] for n in interrupted if _name(n) in status} == {"KILLED"}


@pytest.mark.slow  # three ltr-bench processes (~1-2 min here); the hook itself is tested below
def test_killed_trials_and_reevaluations_leave_no_running_mlflow_run(tmp_path: Path) -> None:
    """SIGTERM during trial 1 (exit 143, its run KILLED by the process), SIGKILL during the
    re-evaluation (its run left RUNNING), then the same command: the left-over run is marked
    KILLED, the re-evaluation runs once more, and every complete trial has one FINISHED run."""
    from ltr_bench import tracking_keys as keys
    from ltr_bench.tracking_keys import TAG_REEVALUATION, TAG_TRIAL
    from tests.test_e2e import LTR_BENCH, _client, _env

    cmd = [
        LTR_BENCH,
        "-m",
        "hydra/sweeper=ltr_optuna",
        "hydra/sweeper/sampler=grid",
        "hydra.sweeper.study_name=s",
        "optimizer.lr=choice(0.004,0.002,0.001)",
        "hydra.sweeper.reevaluate.top_k=1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        *TINY,
        "model.epochs=10",
    ]
    db = tmp_path / "mlflow.db"

    def start(name: str) -> subprocess.Popen:
        return subprocess.Popen(
            cmd,
            cwd=tmp_path,
            env=_env(),
            stdout=open(tmp_path / f"{name}.out", "w"),
            stderr=open(tmp_path / f"{name}.err", "w"),
            text=True,
        )

    first = start("first")
    _signal_when_running(first, db, _name(1), signal.SIGTERM)
    assert first.wait(timeout=HANG_GUARD_S) == 143
    err = (tmp_path / "first.err").read_text()
    assert (
        "Traceback" not in err and "ltr-bench: terminated; the MLflow runs are marked KILLED" in err
    )
    assert _running(db) == []  # the process ended its own run

    second = start("second")  # re-evaluates the best trial, whichever learning rate wins
    reevaluating = "a re-evaluation's run was RUNNING"
    wait_until(lambda: any(n.endswith("re-evaluation") for n in _running(db)), reevaluating, second)
    second.send_signal(signal.SIGKILL)
    second.wait(timeout=HANG_GUARD_S)
    (left,) = _running(db)  # left behind by the killed process
    found = re.search(r"trial (\d+)", left)
    assert found is not None, left
    best = int(found.group(1))
    assert left == _name(best, True)

    third = start("third")
    assert third.wait(timeout=HANG_GUARD_S) == 0, (tmp_path / "third.err").read_text()[-3000:]
    assert _running(db) == []
    url = f"sqlite:///{tmp_path / 'multirun' / 'optuna' / 's.db'}"
    trials = load(url, "s")
    assert reasons(trials) == {1: "interrupted"} and len(complete(trials)) == 3
    runs = [
        r
        for r in _client(tmp_path).search_runs(
            [_client(tmp_path).get_experiment_by_name("ltr_bench").experiment_id]
        )
        if r.data.tags[keys.TAG_ROLE] == "trial"
    ]
    search = [r for r in runs if r.data.tags.get(TAG_REEVALUATION) != "true"]
    again = [r for r in runs if r.data.tags.get(TAG_REEVALUATION) == "true"]
    statuses = sorted((int(r.data.tags[TAG_TRIAL]), r.info.status) for r in search)
    done = sorted(t.number for t in complete(trials))
    assert statuses == sorted([(1, "KILLED")] + [(n, "FINISHED") for n in done])
    assert sorted(r.info.status for r in again) == ["FINISHED", "KILLED"]
    assert {r.data.tags[TAG_TRIAL] for r in again} == {str(best)}
    claims = _claims(url, "s")
    assert sorted((t.state.name, t.user_attrs.get("ltr_sweeper.fail_reason")) for t in claims) == [
        ("COMPLETE", None),
        ("FAIL", "interrupted"),
    ]


def test_the_interrupted_hook_kills_exactly_the_left_over_runs(tmp_path: Path) -> None:
    """``tracking.sweep_hooks.mark_interrupted_runs`` (the ``sweep.on_interrupted`` hook), in process."""
    from omegaconf import OmegaConf

    from ltr_bench import tracking_keys as keys
    from ltr_bench.tracking.sweep_hooks import mark_interrupted_runs
    from ltr_bench.tracking.tracker import Tracker
    from ltr_bench.tracking_keys import TAG_REEVALUATION, TAG_STUDY, TAG_TRIAL

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracker = Tracker(uri, "faults")

    def trial_run(study: str, number: int, reevaluation: bool = False) -> str:
        tags = {keys.TAG_ROLE: keys.ROLE_TRIAL, TAG_STUDY: study, TAG_TRIAL: number}
        if reevaluation:
            tags[TAG_REEVALUATION] = "true"
        return tracker.start_run(f"trial {number}", tags)

    gone = trial_run("s", 1)  # its Optuna trial was marked interrupted
    alive = trial_run("s", 2)  # still running in a live process
    # a job that ended just as its sweeper was killed: FINISHED, its result never told
    untold = trial_run("s", 3)
    tracker.end_run(untold, "FINISHED")
    told = trial_run("s", 4)  # a finished trial whose result was told
    tracker.end_run(told, "FINISHED")
    failed = trial_run("s", 5)  # the job itself failed, then its sweeper was killed
    tracker.end_run(failed, "FAILED")
    other = trial_run("t", 1)  # the same number in another study
    old_again = trial_run("s", 0, reevaluation=True)  # started before its claim was failed
    old_ms = tracker.client.get_run(old_again).info.start_time
    wait_until(lambda: time.time() * 1000 > old_ms + 2, "the clock moved past its start")
    new_again = trial_run("s", 0, reevaluation=True)  # the claim that re-runs it
    # the claim failed between the two starts, as recorded in the store (no sleeps to race)
    failed_at = (old_ms + tracker.client.get_run(new_again).info.start_time) / 2000
    config = OmegaConf.create(
        {"tracking": {"enabled": True, "tracking_uri": uri, "experiment_name": "faults"}}
    )
    killed = mark_interrupted_runs(config, "s", [1, 3, 5], {0: failed_at})
    assert sorted(killed) == sorted([gone, untold, old_again])
    runs = (gone, alive, other, old_again, new_again, untold, told, failed)
    status = {r: tracker.client.get_run(r).info.status for r in runs}
    assert status == {
        gone: "KILLED",
        alive: "RUNNING",
        other: "RUNNING",
        old_again: "KILLED",
        new_again: "RUNNING",
        untold: "KILLED",
        told: "FINISHED",
        failed: "FAILED",
    }
    assert (
        mark_interrupted_runs(config, "s", [1, 3, 5], {0: failed_at}) == []
    )  # repeating it changes nothing
