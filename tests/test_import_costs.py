"""A run imports only what it uses: checked in fresh processes through ``sys.modules``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _modules_after(code: str, cwd: Path) -> set[str]:
    """The top-level packages loaded after ``code`` runs in a fresh interpreter."""
    probe = (
        code
        + "\nimport sys\nprint('MODULES', ' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False, cwd=cwd, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("MODULES ")][-1]
    return set(line.split()[1:])


def test_the_model_and_stats_packages_import_nothing_heavy(tmp_path: Path) -> None:
    loaded = _modules_after(
        "import ltr_bench.models, ltr_bench.stats\nfrom ltr_bench.stats import mean_se", tmp_path
    )
    assert not loaded & {"torch", "lightning", "scipy", "sklearn", "pandas"}


def test_a_class_is_imported_on_first_use(tmp_path: Path) -> None:
    loaded = _modules_after(
        "from ltr_bench.models import LambdaMART\nimport ltr_bench.models as m\nassert m.LambdaMART is LambdaMART",
        tmp_path,
    )
    assert "lightning" not in loaded


def test_an_unknown_name_is_an_attribute_error() -> None:
    import ltr_bench.models

    with pytest.raises(AttributeError, match="NoSuchRanker"):
        _ = ltr_bench.models.NoSuchRanker  # type: ignore[attr-defined]


@pytest.fixture(scope="module")
def tracked_lambdamart_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], Path]:
    """A LambdaMART run tracked in MLflow's default store in its folder, in a fresh interpreter
    that then reads its runs back and checks their commit tag: the packages loaded, and the
    folder (one interpreter for the two tests below that need this run)."""
    folder = tmp_path_factory.mktemp("lambdamart")
    run = (
        "from ltr_bench.cli.main import main\n"
        "try:\n    main(['model=lambdamart', 'tracking=mlflow', 'hydra.run.dir=run', 'trainer.enable_progress_bar=false'])\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "import mlflow\n"
        "runs = mlflow.MlflowClient('sqlite:///mlflow.db').search_runs(['1'])\n"
        "from ltr_bench.tracking.tags import git_commit\n"
        "assert runs and git_commit()\n"
        "assert all(r.data.tags.get('mlflow.source.git.commit') == git_commit() for r in runs)\n"
    )
    return _modules_after(run, folder), folder


@pytest.mark.parametrize(("model", "tracking"), [("lambdamart", "mlflow"), ("adarank", "none")])
def test_a_tree_or_boosting_run_imports_neither_lightning_nor_torch(
    tmp_path: Path, model: str, tracking: str, request: pytest.FixtureRequest
) -> None:
    """Tracked (MLflow's default store in the run's folder) or not: its fit takes no Lightning
    logger, so none is built, and its evaluation is NumPy's."""
    if model == "lambdamart":
        loaded, tmp_path = request.getfixturevalue("tracked_lambdamart_run")
    else:
        run = (
            "from ltr_bench.cli.main import main\n"
            f"try:\n    main(['model={model}', 'tracking={tracking}', 'hydra.run.dir=run', 'trainer.enable_progress_bar=false'])\n"
            "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        )
        loaded = _modules_after(run, tmp_path)
    assert "ltr_bench" in loaded
    assert not loaded & {"lightning", "torch"}  # metrics, seeds and machine facts need no torch
    assert (tmp_path / "run" / "results.json").is_file()


def test_a_tracked_run_imports_no_gitpython_and_still_tags_the_commit(
    tracked_lambdamart_run: tuple[set[str], Path],
) -> None:
    loaded, _ = tracked_lambdamart_run
    assert "mlflow" in loaded
    assert "git" not in loaded


def test_a_neural_run_gets_torchs_threads_and_seed_once_its_ranker_loads_torch(
    tmp_path: Path,
) -> None:
    """The job sets torch's thread count and seed after building the ranker, whose module loads
    torch: a DirectRanker run still runs torch on ``threads`` threads."""
    run = (
        "import torch\n"
        "torch.set_num_threads(2)\n"
        "from ltr_bench.cli.main import main\n"
        "try:\n    main(['dataset.n_train=100', 'dataset.docs_per_query=10', 'model.epochs=1',"
        " 'threads=1', 'tracking=none', 'hydra.run.dir=run', 'trainer.enable_progress_bar=false'])\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "assert torch.get_num_threads() == 1, torch.get_num_threads()\n"
    )
    loaded = _modules_after(run, tmp_path)
    assert "torch" in loaded and (tmp_path / "run" / "results.json").is_file()
