"""Watching a sweep in optuna-dashboard as a user does, in a real (headless) browser.

The test runs a small racing sweep with the real ``ltr-bench`` into a temporary SQLite storage,
starts optuna-dashboard with the very command the sweep printed (plus a free port; no ``--host``,
so it binds to 127.0.0.1), and opens its pages in Debian's ``chromium`` (``--dump-dom`` for the
rendered DOM, ``--screenshot`` for a picture). It checks that

- the study is listed by name, and its trials page counts its trials;
- a pruned trial shows the intermediate value it was stopped at (the running mean of its inner
  folds, at step = folds done);
- the parameters are named as the search space names them.

Screenshots go to ``$LTR_BROWSER_SHOTS`` (default ``<tmp>/ltr_bench_dashboard``);
``make docs-screenshots`` points it at ``docs/img/optuna/``, which the sweeps guide shows. The test
stops only the processes it started (their own process groups). Skipped without chromium
(``.ci/run`` installs it) or without optuna-dashboard (the dev extra).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from tests.browser.headless import run_headless
from tests.browser.test_mlflow_ui import CHROMIUM, _free_port, _parse
from tests.sweeper.pruners import PRUNE_ODD, REPO, pythonpath_with_repo
from tests.waiting import HANG_GUARD_S, stop_group, wait_until

BIN = Path(sys.executable).parent
pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium on PATH (.ci/run installs Debian's chromium)"
    ),
    pytest.mark.skipif(
        shutil.which("optuna-dashboard", path=str(BIN)) is None,
        reason="no optuna-dashboard in this environment (the dev extra installs it)",
    ),
]

N_TRIALS = 4
WATCH = "Watch the sweep live: "  # the line a sweep prints when its first study opens
SHOTS = Path(
    os.environ.get("LTR_BROWSER_SHOTS") or Path(tempfile.gettempdir()) / "ltr_bench_dashboard"
)
#: What each screenshot shows (the captions of ``screenshots.md``).
CAPTIONS = {
    "study": "A study in optuna-dashboard: its history, parameter importances and the "
    "intermediate values (the running mean of the inner folds, at step = folds done); the pruned "
    "trials stop after fold 1.",
    "pruned_trial": "The trials page (the study's trial count on top) with a pruned trial "
    "selected: its one intermediate value, and its parameters under the search space's names.",
}


@dataclass
class Dashboard:
    base: str  # http://127.0.0.1:<port>
    study_id: int
    study: optuna.Study
    work: Path


def _run_sweep(work: Path) -> str:
    """A 4-trial racing sweep of LambdaMART (odd trials pruned after their first inner fold);
    the dashboard command it printed."""
    proc = subprocess.run(
        [
            str(BIN / "ltr-bench"),
            "-m",
            "search=lambdamart",
            "model=lambdamart",
            f"hydra.sweeper.n_trials={N_TRIALS}",
            "hydra.sweeper.reevaluate.top_k=0",
            *PRUNE_ODD,
            "protocol.inner_cv=2",
            "dataset.n_train=300",
            "dataset.n_vali=100",
            "dataset.n_test=100",
            "dataset.docs_per_query=20",
            "threads=1",
            "tracking.log_model=false",
            f"tracking.tracking_uri=sqlite:///{work}/mlflow.db",
            f"hydra.sweep.dir={work}/sweep",
            f"hydra.sweeper.storage_dir={work}/optuna",
        ],
        cwd=work,
        env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": pythonpath_with_repo()},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    (line,) = [ln for ln in output.splitlines() if WATCH in ln]
    command = line.split(WATCH, 1)[1].split("   ", 1)[0]
    # the same command beside the MLflow links at the study's end
    assert f"Optuna dashboard: {command}" in output
    return command


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dashboard]:
    work = tmp_path_factory.mktemp("dashboard")
    command = shlex.split(_run_sweep(work))
    assert command[0] == "optuna-dashboard" and "--host" not in command
    url = command[1]
    assert url == f"sqlite:///{(work / 'optuna').resolve()}/" + url.rsplit("/", 1)[1]
    port = _free_port()
    server = subprocess.Popen(
        [str(BIN / command[0]), *command[1:], "--port", str(port)],
        cwd=work,
        stdout=open(work / "dashboard.log", "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"  # its default host: nothing listens beyond this machine
        found: list[dict] = []

        def answering() -> bool:
            try:
                with urllib.request.urlopen(base + "/api/studies", timeout=5) as r:
                    found[:] = json.load(r)["study_summaries"]
                    return True
            except OSError:
                return False

        wait_until(answering, "optuna-dashboard answering /api/studies", proc=server)
        (summary,) = found  # the sweep's one study (no re-evaluation here)
        study = optuna.load_study(study_name=summary["study_name"], storage=url)
        yield Dashboard(base, int(summary["study_id"]), study, work)
    finally:
        stop_group(server)


def _write_gallery() -> None:
    """``<SHOTS>/screenshots.md``: the screenshots taken so far with their captions."""
    shots = [name for name in CAPTIONS if (SHOTS / f"{name}.png").exists()]
    lines = [f"![{CAPTIONS[n]}](../img/optuna/{n}.png)\n\n*{CAPTIONS[n]}*\n" for n in shots]
    (SHOTS / "screenshots.md").write_text("\n".join(lines), encoding="utf-8")


def _texts(url: str, work: Path, shot: str | None = None, height: int = 1400) -> list[str]:
    """The texts of ``url``'s rendered DOM; a screenshot of it to ``<SHOTS>/<shot>.png``."""
    dom = run_headless(CHROMIUM, url, work, height, "--dump-dom")
    if shot is not None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        run_headless(CHROMIUM, url, work, height, f"--screenshot={SHOTS / (shot + '.png')}")
        _write_gallery()
    return _parse(dom).texts


def _space() -> set[str]:
    """The parameter names of the sweep's search space (conf/search/lambdamart.yaml)."""
    config = yaml.safe_load((REPO / "conf" / "search" / "lambdamart.yaml").read_text())
    return set(config["hydra"]["sweeper"]["params"])


def test_the_sweep_and_its_study_are_in_the_one_storage(dashboard: Dashboard) -> None:
    study = dashboard.study
    states = [t.state for t in sorted(study.trials, key=lambda t: t.number)]
    assert states == [TrialState.COMPLETE, TrialState.PRUNED] * (N_TRIALS // 2)
    assert {p for t in study.trials for p in t.params} == _space()
    # the name says what the study is: the model and search space chosen on the command line
    assert "model=lambdamart" in study.study_name and "search=lambdamart" in study.study_name


def test_the_study_list_and_the_study_page(dashboard: Dashboard) -> None:
    listed = _texts(f"{dashboard.base}/dashboard", dashboard.work)
    assert any(t.endswith(dashboard.study.study_name) for t in listed), listed
    page = _texts(
        f"{dashboard.base}/dashboard/studies/{dashboard.study_id}", dashboard.work, "study", 2600
    )
    assert {"History", "Intermediate values", "Hyperparameter Importance"} <= set(page)
    # every trial's running means, the pruned ones' too, in the intermediate-values plot
    assert {f"trial #{n}" for n in range(N_TRIALS)} <= set(page)
    assert _space() <= set(page)  # the importances, by the search space's names


def test_a_pruned_trial_shows_its_intermediate_value_and_parameters(dashboard: Dashboard) -> None:
    pruned = next(t for t in dashboard.study.trials if t.state == TrialState.PRUNED)
    url = f"{dashboard.base}/dashboard/studies/{dashboard.study_id}/trials?numbers={pruned.number}"
    texts = _texts(url, dashboard.work, "pruned_trial")
    assert f"{N_TRIALS} Trials" in texts  # the study's trial count
    i = next(k for k, t in enumerate(texts) if t.startswith(f"Trial {pruned.number} (trial_id="))
    assert texts[i + 1] == "Pruned"
    shown = texts[texts.index("Intermediate Values", i) : texts.index("Parameter", i)]
    ((step, value),) = pruned.intermediate_values.items()
    assert step == 1 and shown[1:] == [f"{step} {value!r}"]
    params = texts[texts.index("Parameter", i) + 1 : texts.index("Started At", i)]
    assert {p.split(" ", 1)[0] for p in params} == _space()
