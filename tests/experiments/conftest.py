"""Fixtures of the experiment tests: a generated LETOR folder and running ``ltr-bench`` (in this
process, see :mod:`tests.inprocess`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.data.letor_files import write_letor
from tests.inprocess import CliResult, run_ltr_bench


def generated_letor(root: Path, n_queries: int = 10, n_features: int = 6, seed: int = 0) -> Path:
    """A five-fold LETOR folder whose labels (0-2) follow a noisy linear score of the features, so
    rankers can learn something; the test parts of the folds hold disjoint queries."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=n_features)
    parts = []
    for k in range(5):  # five disjoint query blocks, rotated through train/vali/test like LETOR
        lengths = rng.integers(6, 14, size=n_queries)
        qids = np.repeat(np.arange(n_queries) + 100 * k, lengths)
        feats = np.round(rng.uniform(0, 1, size=(len(qids), n_features)), 4)
        z = feats @ w + rng.normal(scale=0.3, size=len(qids))
        labels = np.digitize(z, np.quantile(z, [0.5, 0.8]))
        parts.append((labels, qids, feats))
    for fold in range(1, 6):
        order = [(fold - 1 + i) % 5 for i in range(5)]
        train = [parts[i] for i in order[:3]]

        def cat(ps: list, j: int) -> np.ndarray:
            return np.concatenate([p[j] for p in ps])

        write_letor(root / f"Fold{fold}" / "train.txt", cat(train, 0), cat(train, 1), cat(train, 2))
        write_letor(root / f"Fold{fold}" / "vali.txt", *parts[order[3]])
        write_letor(root / f"Fold{fold}" / "test.txt", *parts[order[4]])
    return root


@pytest.fixture(scope="session")
def letor_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated_letor(tmp_path_factory.mktemp("letor") / "GEN")


def run_cli(args: list[str], workdir: Path) -> CliResult:
    """``ltr-bench <args>`` in ``workdir`` (its own MLflow store), one thread; asserts exit 0."""
    proc = run_ltr_bench(
        *args, "threads=1", f"tracking.tracking_uri=sqlite:///{workdir}/mlflow.db", cwd=workdir
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    )
    return proc


@pytest.fixture
def cli_in_process(monkeypatch: pytest.MonkeyPatch):
    """Put back what ``ltr_bench.cli.main.main`` changes in the test process (argv, an environment
    variable, the SIGTERM handler, the root logger Hydra configures)."""
    import logging
    import signal
    import sys

    monkeypatch.setattr(sys, "argv", list(sys.argv))
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    handler = signal.getsignal(signal.SIGTERM)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    signal.signal(signal.SIGTERM, handler)
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
        h.close()
    root.setLevel(level)
