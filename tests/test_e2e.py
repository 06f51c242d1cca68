"""End to end: the ``ltr-bench`` command, then the MLflow store read back.

Every run uses a temporary working directory (outputs/, mlflow.db and artifacts land there) and
one thread. Runs go through ``ltr_bench.cli.main.main`` in this process (:mod:`tests.inprocess`); real
subprocesses only where the process is what is tested: ``--help`` / ``--cfg job`` start without
torch, Lightning or MLflow, and killed runs (signals, exit codes) end KILLED.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking.tags import git_commit
from tests.inprocess import CliResult, run_ltr_bench
from tests.waiting import HANG_GUARD_S, wait_until

LTR_BENCH = str(Path(sys.executable).parent / "ltr-bench")
DATA_ROOT = Path(
    os.environ.get("LTR_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data" / "letor"
)
METRICS = ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "mrr"]
TINY = [
    "dataset.n_train=300",
    "dataset.n_vali=100",
    "dataset.n_test=200",
    "dataset.n_features=10",
    "dataset.docs_per_query=20",
    "model.epochs=2",
    "trainer.enable_progress_bar=false",
    "threads=1",
]


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("HYDRA_FULL_ERROR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


def ltr_bench(cwd: Path, *args: str, timeout: float = 180) -> CliResult:
    """``ltr-bench <args>`` in ``cwd``, in this process."""
    return run_ltr_bench(*args, cwd=cwd)


# A process that runs ltr-bench's main() and reports which heavy libraries it imported.
_REPORT_IMPORTS = (
    "import sys\n"
    "from ltr_bench.cli.main import main\n"
    "try:\n    main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code\n"
    "heavy = sorted(m for m in ('torch', 'lightning', 'mlflow') if m in sys.modules)\n"
    "print('HEAVY=' + ','.join(heavy), file=sys.stderr)\n"
)


def ltr_bench_process(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``ltr-bench <args>`` in a fresh interpreter; stderr ends with ``HEAVY=<modules>``."""
    return subprocess.run(
        [sys.executable, "-c", _REPORT_IMPORTS, *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _client(cwd: Path) -> Any:
    import mlflow

    return mlflow.MlflowClient(f"sqlite:///{cwd}/mlflow.db")


def _runs(client: Any, experiment: str = "ltr_bench") -> dict[str, list]:
    exp = client.get_experiment_by_name(experiment)
    by_role: dict[str, list] = {}
    for r in client.search_runs([exp.experiment_id]):
        by_role.setdefault(r.data.tags[keys.TAG_ROLE], []).append(r)
    return by_role


def _artifacts(client: Any, run_id: str, path: str | None = None) -> set[str]:
    return {a.path for a in client.list_artifacts(run_id, path)}


# ------------------------------------------------------------------------------ happy paths
def test_default_run_logs_everything(tmp_path: Path) -> None:
    proc = ltr_bench(tmp_path, *TINY)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    # The results table: a header with every metric, a vali and a test row, run times.
    header = next(line for line in out.splitlines() if "ndcg@10" in line)
    assert header.split() == METRICS
    rows = {
        line.split()[0]: line.split()[1:]
        for line in out.splitlines()
        if line.split() and line.split()[0] in ("vali", "test")
    }
    assert set(rows) == {"vali", "test"} and all(len(v) == 6 for v in rows.values())
    assert "run times: read" in out and "fit" in out
    # results.json in the Hydra output folder, whose path is printed.
    printed = next(line for line in out.splitlines() if line.startswith("results: "))
    results_path = Path(printed.split(" ", 1)[1])
    assert results_path.parent.parent.parent == tmp_path / "outputs"
    res = json.loads(results_path.read_text())
    (fold,) = res["folds"]
    assert set(fold["metrics"]) == {"vali", "test"} and set(fold["metrics"]["test"]) == set(METRICS)
    assert float(rows["test"][3]) == pytest.approx(fold["metrics"]["test"]["ndcg@10"], abs=6e-5)
    assert res["objective"] == pytest.approx(fold["metrics"]["vali"]["ndcg@10"])
    assert all(fold["times"][k] > 0 for k in (keys.TIME_READ, keys.TIME_FIT, keys.TIME_EVAL))
    assert res["mean"]["test"]["map"] == pytest.approx(fold["metrics"]["test"]["map"])

    # MLflow: a protocol run with one fold child, both FINISHED.
    client = _client(tmp_path)
    runs = _runs(client)
    (parent,), (child,) = runs[keys.ROLE_PROTOCOL], runs[keys.ROLE_FOLD]
    assert res["mlflow"]["run_id"] == parent.info.run_id
    assert parent.info.status == child.info.status == "FINISHED"
    assert child.data.tags["mlflow.parentRunId"] == parent.info.run_id
    tags = child.data.tags
    assert tags[keys.TAG_MODEL] == "direct_ranker" and tags[keys.TAG_DATASET] == "synthetic"
    assert tags[keys.TAG_PROTOCOL] == "single" and tags[keys.TAG_EVAL] == "paper"
    assert tags[keys.TAG_FOLD] == "0" and tags[keys.TAG_SEED] == "0"
    assert len(tags[keys.TAG_FINGERPRINT]) == 16 and tags[keys.TAG_VERSION]
    commit = git_commit()  # None outside a git clone: then the tag is simply absent
    assert tags.get(keys.TAG_GIT_COMMIT) == commit
    # Params: the run's choices (group options, hyperparameters, changed values), each once;
    # machine facts and fold sizes are tags. Every model value is a param (the compile switch and
    # its per-device options too: they decide results), nothing else beyond the choices.
    p = child.data.params
    assert p["model"] == "direct_ranker" and p["loss"] == "l2" and p["optimizer.lr"] == "0.004"
    assert p["dataset.n_train"] == "300" and p["seed"] == "0" and p["model.epochs"] == "2"
    assert p["model.compile"] == "false" and "model.compile_options.cuda.triton.cudagraphs" in p
    assert "threads" not in p and not any("_target_" in k for k in p) and len(p) <= 45
    assert tags["ltr.threads"] == "1"
    assert int(tags[keys.TAG_N_TRAIN_QUERIES]) == 15
    assert 0 < int(tags[keys.TAG_N_TEST_QUERIES]) <= 10
    assert parent.data.params == p
    # Names and MLflow's own fields.
    assert child.info.run_name == "direct_ranker · synthetic/0"
    assert parent.info.run_name == "direct_ranker · synthetic/0 · single"
    assert (
        tags["mlflow.note.content"].startswith("ltr-bench ")
        and "dataset.n_train=300" in tags["mlflow.note.content"]
    )
    assert {(i.dataset.name, i.tags[0].value) for i in child.inputs.dataset_inputs} == {
        ("synthetic/0", c) for c in ("train", "vali", "test")
    }
    assert (
        "workflowType=machine_learning" in proc.stdout
        and "tags.`ltr.invocation` = '" in proc.stdout
    )
    # The model's URI, as ltr-bench-predict takes it (docs/guides/predict.md).
    assert f"model of synthetic/0: runs:/{child.info.run_id}/model" in out.splitlines()
    # Metrics: test and vali, run times; per-epoch training loss and vali NDCG@10.
    m = child.data.metrics
    for split in ("vali", "test"):
        for name in METRICS:
            assert m[keys.metric_key(split, name)] == pytest.approx(fold["metrics"][split][name])
    assert all(m[k] > 0 for k in (keys.TIME_READ, keys.TIME_FIT, keys.TIME_EVAL))
    assert parent.data.metrics[keys.TIME_FIT] == pytest.approx(m[keys.TIME_FIT])
    for curve in ("curve/train_loss", "curve/vali_ndcg_at_10", "curve/lr"):  # step = epoch
        hist = client.get_metric_history(child.info.run_id, curve)
        assert sorted(h.step for h in hist) == [0, 1], (curve, sorted(m))
    assert not any(k in m for k in ("lr", "train_lr", "vali_ndcg_at_10", "train_loss"))
    # Artifacts.
    assert {"config.yaml", "results.json"} <= _artifacts(client, parent.info.run_id)
    fold_art = _artifacts(client, child.info.run_id)
    assert {"per_query_metrics.csv", "learning_curve.png"} <= fold_art
    (logged,) = client.search_logged_models(
        [child.info.experiment_id], filter_string=f"source_run_id = '{child.info.run_id}'"
    )
    assert logged.name == "model" and {
        a.path for a in client.list_logged_model_artifacts(logged.model_id)
    } >= {"MLmodel", "data"}
    art_dir = Path(child.info.artifact_uri.replace("file://", ""))
    csv = (art_dir / "per_query_metrics.csv").read_text().splitlines()
    assert csv[0].split(",")[:2] == ["split", "qid"]
    assert len(csv) - 1 == int(tags[keys.TAG_N_VALI_QUERIES]) + int(tags[keys.TAG_N_TEST_QUERIES])
    config_yaml = Path(parent.info.artifact_uri.replace("file://", "")) / "config.yaml"
    assert "n_train: 300" in config_yaml.read_text()


def test_letor_folds_protocol_prints_progress_and_mean_se(tmp_path: Path) -> None:
    proc = ltr_bench(
        tmp_path, *TINY, "protocol=letor_folds", "dataset.n_folds=2", "experiment_name=folds"
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert (
        "[1/2] letor_folds: reading and training" in out
        and "[2/2] synthetic/1: vali ndcg@10=" in out
    )
    assert "synthetic/0 test" in out and "synthetic/1 test" in out
    mean_row = next(line for line in out.splitlines() if line.startswith("mean(SE) test"))
    assert len(mean_row.split()) == 2 + 6 and "(" in mean_row.split()[2]  # 0.xxx(yy)
    runs = _runs(_client(tmp_path), "folds")
    (parent,) = runs[keys.ROLE_PROTOCOL]
    folds = sorted(runs[keys.ROLE_FOLD], key=lambda r: r.data.tags[keys.TAG_FOLD])
    assert [r.data.tags[keys.TAG_FOLD] for r in folds] == ["0", "1"]
    assert all(r.data.tags["mlflow.parentRunId"] == parent.info.run_id for r in folds)
    ndcg = [r.data.metrics["test/ndcg_at_10"] for r in folds]
    assert parent.data.metrics["test/ndcg_at_10"] == pytest.approx(sum(ndcg) / 2)
    assert parent.data.metrics[keys.TIME_FIT] == pytest.approx(
        sum(r.data.metrics[keys.TIME_FIT] for r in folds)
    )


@pytest.mark.realdata
def test_mq2008_one_fold(tmp_path: Path) -> None:
    if not (DATA_ROOT / "MQ2008" / "Fold1" / "train.txt").is_file():
        pytest.skip(f"MQ2008 not found under {DATA_ROOT}")
    proc = ltr_bench(
        tmp_path,
        "dataset=mq2008",
        f"dataset.root={DATA_ROOT}",
        "dataset.fold=1",
        "model.epochs=3",
        "trainer.enable_progress_bar=false",
        "threads=1",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = _runs(_client(tmp_path))
    (fold,) = runs[keys.ROLE_FOLD]
    t, m = fold.data.tags, fold.data.metrics
    assert t[keys.TAG_N_TRAIN_QUERIES] == "471"  # Fold1/train.txt
    assert 100 < int(t[keys.TAG_N_TEST_QUERIES]) < 156  # 156 test queries, no-relevant dropped
    assert (
        fold.info.run_name == "direct_ranker · mq2008/Fold1"
        and fold.data.params["dataset.fold"] == "1"
    )
    assert {i.dataset.name for i in fold.inputs.dataset_inputs} == {"mq2008/Fold1"}
    assert fold.data.tags[keys.TAG_DATASET] == "mq2008" and fold.data.tags[keys.TAG_FOLD] == "0"
    assert m["test/ndcg_at_10"] > 0.6 and m["test/map"] > 0.55  # random ranking: ~0.4 / ~0.4


# ------------------------------------------------------------------------------ user errors
@pytest.mark.parametrize(
    "args, needle",
    [
        (["model=nosuch"], "model=nosuch is not an option of the config group 'model'"),
        (["dataset=mq2008", "dataset.root=/no/such/dir"], "dataset.root"),
        (
            ["loss=none"],
            "loss=none is not a known loss; choose a pair loss, one of [",
        ),
        (["seed=-1"], "seed must be a non-negative integer"),
    ],
)
def test_user_errors_print_one_line_and_exit_2(
    tmp_path: Path, args: list[str], needle: str
) -> None:
    proc = ltr_bench(tmp_path, *args, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("ltr-bench: error: ") and needle in lines[0]
    assert not (tmp_path / "mlflow.db").exists()  # failed before any run was created


def test_help_and_cfg_job(tmp_path: Path) -> None:
    """A fresh process: --help and --cfg job answer without importing torch, Lightning or MLflow."""
    help_ = ltr_bench_process(tmp_path, "--help")
    assert help_.returncode == 0
    for group in (
        "model:",
        "dataset:",
        "protocol: holdout, letor_folds, single",
        "tracking:",
        "trainer: cpu, ddp, gpu",
        "loss:",
        "optimizer:",
        "activation:",
        "eval:",
    ):
        assert group in help_.stdout, group
    cfg = ltr_bench_process(tmp_path, "--cfg", "job", "model.epochs=7")
    assert cfg.returncode == 0
    for proc in (help_, cfg):
        assert proc.stderr.strip().splitlines()[-1] == "HEAVY=", proc.stderr[-2000:]
    import yaml

    job = yaml.safe_load(cfg.stdout)
    assert job["model"]["epochs"] == 7 and job["protocol"]["name"] == "single"
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("name", ["ltr-bench", "ltr-bench-report", "ltr-bench-predict"])
def test_each_console_script_answers_help(name: str) -> None:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip(f"the {name} console script is not installed beside this Python")
    done = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=_env())
    assert done.returncode == 0 and name in done.stdout, done.stderr[-2000:]


def test_the_console_script_ends_with_the_commands_status(tmp_path: Path) -> None:
    if not Path(LTR_BENCH).exists():
        pytest.skip("the ltr-bench console script is not installed beside this Python")
    bad = subprocess.run(
        [LTR_BENCH, "model=no_such_model"], capture_output=True, text=True, cwd=tmp_path, env=_env()
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("ltr-bench: error: model=no_such_model is not an option")


# ------------------------------------------------------------------------------ killed runs
def _fold_run_training(db: Path) -> bool:
    """A RUNNING fold run that already logged an epoch metric (i.e. training is under way)."""
    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as con:
            rows = con.execute(
                "select count(*) from runs r join tags t on r.run_uuid = t.run_uuid "
                "join metrics m on m.run_uuid = r.run_uuid "
                "where t.key = 'ltr.role' and t.value = 'fold' and r.status = 'RUNNING'"
            ).fetchone()
        return bool(rows and rows[0])
    except sqlite3.Error:
        return False


def test_killed_runs_end_killed_not_running(tmp_path: Path) -> None:
    """SIGTERM and Ctrl-C (SIGINT) mid-training: the runs end KILLED, exit 143 / 130."""
    procs = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        cwd = tmp_path / sig.name
        cwd.mkdir()
        args = [a for a in TINY if not a.startswith(("model.epochs", "dataset.n_train"))]
        procs[sig] = (
            cwd,
            subprocess.Popen(
                [
                    LTR_BENCH,
                    *args,
                    "dataset.n_train=3000",
                    "model.epochs=500",
                    "model.early_stopping_patience=null",
                ],
                cwd=cwd,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                # as from a terminal: an ignored SIGINT is inherited through exec (a non-interactive
                # shell ignores it in its background jobs), and Python then never raises KeyboardInterrupt
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            ),
        )
    try:
        # the event: each process's fold run is training (start-up alone can take minutes on a
        # busy 2-core machine; the guard only stops a hang)
        pending = dict(procs)

        def signal_the_training() -> bool:
            for sig, (cwd, proc) in list(pending.items()):
                assert proc.poll() is None, proc.communicate()[1][-2000:]
                if _fold_run_training(cwd / "mlflow.db"):
                    proc.send_signal(sig)
                    del pending[sig]
            return not pending

        wait_until(signal_the_training, "training started in both processes", every_s=0.2)
        for sig, (cwd, proc) in procs.items():
            _, err = proc.communicate(timeout=HANG_GUARD_S)
            assert proc.returncode == {signal.SIGTERM: 143, signal.SIGINT: 130}[sig], err[-2000:]
            assert "Traceback" not in err
            runs = _runs(_client(cwd))
            statuses = {
                r.data.tags[keys.TAG_ROLE]: r.info.status for rs in runs.values() for r in rs
            }
            assert statuses == {keys.ROLE_PROTOCOL: "KILLED", keys.ROLE_FOLD: "KILLED"}, (
                sig,
                statuses,
            )
    finally:
        for _, proc in procs.values():
            if proc.poll() is None:
                proc.kill()
