"""The import-linter contracts of pyproject.toml hold for the code, and each catches a wrong
arrow the code once had (put back into a copy of the package).

``make test`` runs ``lint-imports`` before pytest; this test shows what it would say.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import HANG_GUARD_S

REPO = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")

pytestmark = pytest.mark.skipif(
    not LINT.exists(), reason="import-linter is not installed (dev extra)"
)

# (file to append the wrong import to, the import, the contract that must break, and the arrow
#  it reports): each arrow was once in the code and has been removed since
WRONG_ARROWS = [
    (
        "experiments/common.py",
        "from ltr_bench.cli.main import config_dir",  # the cli <-> experiments cycle
        "layers",
        "ltr_bench.experiments.common -> ltr_bench.cli.main",
    ),
    (
        "experiments/common.py",
        "from ltr_bench.cli.main import config_dir",
        "entry-points",
        "ltr_bench.experiments.common -> ltr_bench.cli.main",
    ),
    (
        "metrics/flat.py",
        "from ltr_bench.data.queryset import QuerySet",
        "pure-numbers",
        "ltr_bench.metrics.flat -> ltr_bench.data.queryset",
    ),
    (
        "data/batching.py",
        "from ltr_bench.metrics import gains",
        "layers",
        "ltr_bench.data.batching -> ltr_bench.metrics",
    ),
    (
        "models/neural.py",
        "from ltr_bench.tracking_keys import metric_key",
        "no-tracking-below-runner",
        "ltr_bench.models.neural -> ltr_bench.tracking_keys",
    ),
    (
        "protocols.py",
        "import yaml",  # reading a sweep's files (refit planning) belongs to ltr_bench.refit_plan
        "protocols-split-data",
        "ltr_bench.protocols -> yaml",
    ),
    (
        "experiments/letor_tables.py",
        "from ltr_bench.cli.report import main",
        "entry-points",
        "ltr_bench.experiments.letor_tables -> ltr_bench.cli.report",
    ),
    (
        "models/direct_ranker.py",
        "from ltr_bench.tracking import Tracker",
        "no-tracking-below-runner",
        "ltr_bench.models.direct_ranker -> ltr_bench.tracking",
    ),
    (
        "sweeper/search/grid.py",
        "from ltr_bench.runner import run",
        "sweeper-generic",
        "ltr_bench.sweeper.search.grid -> ltr_bench.runner",
    ),
    (
        "runner/inner_cv.py",
        "from ltr_bench.sweeper.storage import redact",  # the job's side is sweeper.job alone
        "sweeper-one-way-in",
        "ltr_bench.runner.inner_cv -> ltr_bench.sweeper.storage",
    ),
]


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run(
        [str(LINT), "--no-cache", "--no-logo", str(root / "pyproject.toml")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def test_the_code_keeps_every_contract() -> None:
    proc = lint(REPO)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert "0 broken" in proc.stdout


def test_each_wrong_arrow_breaks_its_contract(tmp_path: Path) -> None:
    shutil.copytree(
        REPO / "ltr_bench",
        tmp_path / "ltr_bench",
        ignore=shutil.ignore_patterns("__pycache__", "conf"),
    )
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    for file, line in dict.fromkeys((f, i) for f, i, _, _ in WRONG_ARROWS):
        with open(tmp_path / "ltr_bench" / file, "a") as f:
            f.write(f"\n{line}  # a wrong arrow\n")
    proc = lint(tmp_path)
    assert proc.returncode == 1, proc.stdout[-4000:]
    report = proc.stdout
    for _, _, contract, arrow in WRONG_ARROWS:
        section = _broken_section(report, contract)
        assert arrow in section, f"{contract} does not report {arrow}:\n{section}"


def _broken_section(report: str, contract: str) -> str:
    """The part of lint-imports' report that lists the broken contract ``contract``."""
    names = {
        "layers": "Layers:",
        "entry-points": "Nothing imports a command",
        "pure-numbers": "metrics and losses take",
        "no-tracking-below-runner": "Rankers and data",
        "protocols-split-data": "Protocols split data",
        "sweeper-generic": "The sweeper is generic",
        "sweeper-one-way-in": "The app reaches the sweeper",
    }
    broken = report.split("Broken contracts", 1)[-1]
    starts = sorted((broken.find(n), c) for c, n in names.items() if broken.find(n) >= 0)
    for i, (pos, c) in enumerate(starts):
        if c == contract:
            end = starts[i + 1][0] if i + 1 < len(starts) else len(broken)
            return broken[pos:end]
    raise AssertionError(f"contract {contract} is not broken:\n{report[-4000:]}")
