"""DDP on CPU: two gloo processes train DirectRanker like one process, and only rank 0 writes.

Both runs are the real ``ltr-bench`` command on the same synthetic data and seed; the DDP run
only adds ``trainer=ddp trainer.accelerator=cpu`` (Lightning starts rank 1 by re-running the
command). ``model.batch_size`` counts a step over all ranks, so both runs take the same number of
steps of the same size; they differ only in which random pairs are drawn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ltr_bench import tracking_keys as keys
from tests.scale.cli import TINY, ltr_bench, results
from tests.waiting import TEST_GUARD_S

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

# 2000 training documents; 51 validation queries (an odd number, so a validation set split over
# two ranks and averaged per rank would not reproduce the whole-set mean); label noise, so that
# NDCG@10 is far from 1 and differences would show.
DATA = [
    "dataset.n_train=2000",
    "dataset.n_vali=1020",
    "dataset.n_test=200",
    "dataset.n_features=20",
    "dataset.docs_per_query=20",
    "dataset.sigma=1.0",
    "model.epochs=8",
    "trainer.enable_progress_bar=false",
    "threads=1",
    "seed=0",
]
DDP = ["trainer=ddp", "trainer.accelerator=cpu", "trainer.devices=2"]
NDCG_TOLERANCE = 0.02  # sampling noise of 51 queries; seeds 0-2 differed by 0.003-0.007


def _store(cwd: Path) -> tuple[Any, list[Any]]:
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{cwd}/mlflow.db")
    exp = client.get_experiment_by_name("ltr_bench")
    return client, client.search_runs([exp.experiment_id])


def _fold_run(runs: list[Any]) -> Any:
    (fold,) = [r for r in runs if r.data.tags[keys.TAG_ROLE] == keys.ROLE_FOLD]
    return fold


def _curve(client: Any, run: Any, key: str) -> list[float]:
    return [
        m.value
        for m in sorted(client.get_metric_history(run.info.run_id, key), key=lambda m: m.step)
    ]


@pytest.mark.heavy
def test_ddp_on_two_cpu_processes_matches_one_process_and_only_rank0_writes(tmp_path: Path) -> None:
    single_dir, ddp_dir = tmp_path / "single", tmp_path / "ddp"
    single_dir.mkdir()
    ddp_dir.mkdir()
    single = ltr_bench(single_dir, *DATA)
    assert single.returncode == 0, single.stderr[-3000:]
    ddp = ltr_bench(ddp_dir, *DATA, *DDP)
    assert ddp.returncode == 0, ddp.stderr[-3000:]

    # Same validation NDCG@10 to tolerance (and both runs trained: the loss fell).
    (res_single,), (res_ddp,) = results(single_dir), results(ddp_dir)
    v_single = res_single["folds"][0]["metrics"]["vali"]["ndcg@10"]
    v_ddp = res_ddp["folds"][0]["metrics"]["vali"]["ndcg@10"]
    assert abs(v_ddp - v_single) <= NDCG_TOLERANCE, (v_single, v_ddp)
    for cwd in (single_dir, ddp_dir):
        client, runs = _store(cwd)
        loss = _curve(client, _fold_run(runs), "curve/train_loss")
        assert len(loss) >= 2 and loss[-1] < loss[0]

    # Really two processes with DDP: rank 1 was started by Lightning (Hydra named its job).
    client, runs = _store(ddp_dir)
    fold = _fold_run(runs)
    assert fold.data.params["trainer"] == "ddp" and fold.data.params["trainer.accelerator"] == "cpu"
    (run_dir,) = (ddp_dir / "outputs").glob("*/*")
    assert (run_dir / "train_ddp_process_1.log").is_file()

    # Validation during training covered the whole validation set on every rank: the best epoch's
    # logged (rank-synced) NDCG@10 equals rank 0's evaluation of the restored best weights on all
    # 51 queries after training.
    assert fold.data.tags[keys.TAG_N_VALI_QUERIES] == "51"
    best_logged = max(_curve(client, fold, "curve/vali_ndcg_at_10"))
    assert best_logged == pytest.approx(fold.data.metrics["vali/ndcg_at_10"], abs=1e-5)
    assert best_logged == pytest.approx(v_ddp, abs=1e-5)

    # Only rank 0 tracked: one protocol run with one fold run, no run of rank 1.
    roles = sorted(r.data.tags[keys.TAG_ROLE] for r in runs)
    assert roles == [keys.ROLE_FOLD, keys.ROLE_PROTOCOL]
    assert {r.info.status for r in runs} == {"FINISHED"}
    artifact_dirs = {p.name for p in (ddp_dir / "mlruns").glob("*/*") if p.is_dir()}
    assert artifact_dirs - {"models"} == {r.info.run_id for r in runs}
    # the logged scoring model (MLflow keeps logged models under <experiment>/models/): rank 0's only
    assert len([p for p in (ddp_dir / "mlruns").glob("*/models/*") if p.is_dir()]) == 1
    # Only rank 0 wrote files: one results.json, one output folder; rank 1 left nothing but the
    # job log Hydra opens for every process (Lightning starts it with hydra.output_subdir=null).
    files = {p.relative_to(run_dir).as_posix() for p in run_dir.rglob("*") if p.is_file()}
    assert {f for f in files if not f.startswith(".hydra/")} == {
        "results.json",
        "ltr-bench.log",
        "train_ddp_process_1.log",
    }
    assert sorted(p.name for p in ddp_dir.iterdir()) == ["mlflow.db", "mlruns", "outputs"]
    # ... and printed the results once.
    assert ddp.stdout.count("objective (vali ndcg@10)") == 1


def test_ddp_inside_a_multirun_is_rejected_with_one_sentence(tmp_path: Path) -> None:
    """Lightning would start rank 1 by re-running the command line, i.e. the whole sweep."""
    proc = ltr_bench(tmp_path, "-m", *DDP, "seed=0,1", *TINY, "threads=1")
    assert proc.returncode == 2
    assert "cannot run inside a multirun" in proc.stderr and "Traceback" not in proc.stderr
    assert results(tmp_path) == []
