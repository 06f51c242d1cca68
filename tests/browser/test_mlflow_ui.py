"""Comparing runs in the MLflow UI as a user does, in a real (headless) browser.

The test makes a store (3 models x 2 folds of generated data, and a 2-trial sweep) with the real
``ltr-bench``, serves it with ``mlflow ui`` on a free port of 127.0.0.1 and opens the pages the
printed links lead to in Debian's ``chromium`` (``--dump-dom`` for the rendered DOM,
``--screenshot`` for a picture). It checks that

- the runs table, in the machine-learning view and ltr-bench's saved view, lists the three model
  runs and the sweep by name, with metric columns;
- the comparison page of the three model runs shows each one's test NDCG@10, as tracked.

Screenshots go to ``$LTR_BROWSER_SHOTS`` (default ``<tmp>/ltr_bench_browser``) with a
``screenshots.md`` that shows them; ``make docs-screenshots`` points it at ``docs/img/mlflow/``,
which the MLflow UI guide includes, so the docs' pictures are regenerated, never hand-made.
The test stops only the processes it started (its own process groups). Skipped without chromium
(``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote

import pytest

from ltr_bench import tracking_keys as keys
from tests.browser.headless import run_headless
from tests.waiting import HANG_GUARD_S, stop_group, wait_until

CHROMIUM = next((p for p in (shutil.which(n) for n in ("chromium", "chromium-browser")) if p), None)
BIN = Path(sys.executable).parent
pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(
        CHROMIUM is None, reason="no chromium on PATH (.ci/run installs Debian's chromium)"
    ),
]

EXPERIMENT = "ui"
MODELS = ("direct_ranker", "ranknet", "lambdamart")
DATA = [
    "dataset.n_folds=2",
    "dataset.n_train=200",
    "dataset.n_vali=100",
    "dataset.n_test=100",
    "dataset.docs_per_query=20",
    "dataset.sigma=1.5",
    "protocol=letor_folds",
    "threads=1",
    "trainer.enable_progress_bar=false",
    f"experiment_name={EXPERIMENT}",
    "tracking.log_model=false",
    "tracking.log_artifacts=false",
]  # the pages need no files
SHOTS = Path(
    os.environ.get("LTR_BROWSER_SHOTS") or Path(tempfile.gettempdir()) / "ltr_bench_browser"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}


def _start(args: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    """A child in its own process group (so that stopping it stops only what it started)."""
    return subprocess.Popen(
        args,
        cwd=cwd,
        env=_env(),
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait(proc: subprocess.Popen, log: Path, timeout: float) -> None:
    code = proc.wait(timeout=timeout)
    assert code == 0, log.read_text()[-3000:]


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """``(base URL, tracking URI, workdir)`` of a served store holding the runs."""
    from ltr_bench.tracking.store import ensure_experiment

    work = tmp_path_factory.mktemp("ui")
    uri = f"sqlite:///{work}/mlflow.db"
    ensure_experiment(uri, EXPERIMENT)  # the store exists before the server and the jobs open it
    port = _free_port()
    procs = []
    try:
        server = _start(
            [
                str(BIN / "mlflow"),
                "ui",
                "--backend-store-uri",
                uri,
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            work,
            work / "server.log",
        )
        procs.append(server)
        runs = _start(
            [
                str(BIN / "ltr-bench"),
                "-m",
                f"model={','.join(MODELS)}",
                *DATA,
                f"tracking.tracking_uri={uri}",
                f"hydra.sweep.dir={work}/multirun",
            ],
            work,
            work / "runs.log",
        )
        sweep = _start(
            [
                str(BIN / "ltr-bench"),
                "-m",
                "search=lambdamart",
                "model=lambdamart",
                *DATA,
                "hydra.sweeper.n_trials=2",
                "hydra.sweeper.reevaluate.top_k=0",
                f"tracking.tracking_uri={uri}",
                f"hydra.sweep.dir={work}/sweep",
                f"hydra.sweeper.storage_dir={work}/optuna",
            ],
            work,
            work / "sweep.log",
        )
        procs += [runs, sweep]
        t0 = time.monotonic()
        _wait(runs, work / "runs.log", HANG_GUARD_S)
        print(f"runs {time.monotonic() - t0:.0f} s", flush=True)
        _wait(sweep, work / "sweep.log", HANG_GUARD_S)
        print(f"+sweep {time.monotonic() - t0:.0f} s", flush=True)
        base = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_until(healthy, "mlflow ui answering /health", proc=server, every_s=1.0)
        print(f"+server {time.monotonic() - t0:.0f} s", flush=True)
        yield base, uri, work
    finally:
        for proc in procs:
            stop_group(proc)


#: What each screenshot shows (the captions of ``screenshots.md``).
CAPTIONS = {
    "runs_table": "The printed link: the experiment's runs table in the machine-learning view, "
    "with the saved view 'ltr-bench: metrics' (model runs and the sweep by name, metric columns).",
    "compare_runs": "The comparison page of the three model runs: their params and metrics, "
    "test NDCG@10 among them.",
}


def _write_gallery() -> None:
    """``<SHOTS>/screenshots.md``: the screenshots taken so far with their captions (Markdown
    image links relative to the guide that includes it, docs/guides/mlflow-ui.md)."""
    shots = [name for name in CAPTIONS if (SHOTS / f"{name}.png").exists()]
    rel = "../img/mlflow"  # where `make docs-screenshots` puts them, seen from docs/guides/
    lines = [f"![{CAPTIONS[n]}]({rel}/{n}.png)\n\n*{CAPTIONS[n]}*\n" for n in shots]
    (SHOTS / "screenshots.md").write_text("\n".join(lines), encoding="utf-8")


def _page(url: str, work: Path, shot: str, height: int = 1300) -> str:
    """The rendered DOM of ``url``; a screenshot of it goes to ``<SHOTS>/<shot>.png``."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    dom = run_headless(CHROMIUM, url, work, 1300, "--dump-dom")
    run_headless(CHROMIUM, url, work, height, f"--screenshot={SHOTS / (shot + '.png')}")
    _write_gallery()
    return dom


class _Cells(HTMLParser):
    """Texts of the page in order, and the absolutely positioned grid cells (top, left, text)."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []
        self.cells: list[tuple[int, int, str, int]] = []  # top, left, text, index in texts
        self._stack: list[tuple[int, int] | None] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        style = dict(attrs).get("style") or ""
        pos = None
        if "position: absolute" in style and "top:" in style and "left:" in style:
            val = {k.strip(): v.strip() for k, _, v in (p.partition(":") for p in style.split(";"))}
            pos = (int(float(val["top"].rstrip("px"))), int(float(val["left"].rstrip("px"))))
        if tag not in ("br", "img", "input", "meta", "link", "hr", "path", "svg"):
            self._stack.append(pos)

    def handle_endtag(self, tag: str) -> None:
        if self._stack and tag not in ("br", "img", "input", "meta", "link", "hr", "path", "svg"):
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        text = data.strip()
        if not text:
            return
        self.texts.append(text)
        pos = next((p for p in reversed(self._stack) if p is not None), None)
        if pos is not None:
            self.cells.append((*pos, text, len(self.texts) - 1))


def _parse(dom: str) -> _Cells:
    p = _Cells()
    p.feed(dom)
    return p


def _model_runs(uri: str) -> dict[str, object]:
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs(
        [exp.experiment_id], f"tags.`{keys.TAG_ROLE}` = '{keys.ROLE_PROTOCOL}'"
    )
    return {r.data.tags[keys.TAG_MODEL]: r for r in runs}


def test_runs_table_lists_the_model_runs_by_name(ui: tuple[str, str, Path]) -> None:
    from ltr_bench.tracking.links import ui_link

    base, uri, work = ui
    runs = _model_runs(uri)
    assert set(runs) == set(MODELS)
    exp_id = next(iter(runs.values())).info.experiment_id
    # the "with metric columns" link ltr-bench prints (its saved view), pointed at this server
    url = ui_link(base, exp_id, view=keys.SAVED_VIEW_ID)
    dom = _page(url, work, "runs_table")
    texts = set(_parse(dom).texts)
    assert keys.SAVED_VIEW_NAME in texts  # the view is open ...
    assert {"test/ndcg_at_10", "test/map", "time_fit_s"} <= texts  # ... with its metric columns
    names = {m: keys.protocol_run_name(m, "synthetic", "letor_folds") for m in MODELS}
    assert {runs[m].info.run_name for m in MODELS} == set(names.values())
    missing = [n for n in names.values() if n not in texts]
    assert not missing, f"runs table lacks {missing}; screenshot {SHOTS / 'runs_table.png'}"
    assert keys.sweep_run_name("lambdamart", "synthetic", "tpe") in texts  # the sweep, by name
    assert "Run Name" in texts and "No data available" not in texts  # the runs view, not GenAI


def test_comparison_page_shows_test_ndcg_at_10(ui: tuple[str, str, Path]) -> None:
    base, uri, work = ui
    runs = _model_runs(uri)
    ids = [runs[m].info.run_id for m in MODELS]
    exp_id = runs[MODELS[0]].info.experiment_id
    url = (
        f"{base}/#/compare-runs?runs={quote(json.dumps(ids))}&experiments={quote(json.dumps([exp_id]))}"
        "&workflowType=machine_learning"
    )
    page = _parse(_page(url, work, "compare_runs", height=2600))  # tall: the metrics table shows
    key = keys.metric_key("test", "ndcg@10")
    # run names in the page's column order
    i = page.texts.index("Run Name:")
    order = [t for t in page.texts[i + 1 : i + 1 + len(MODELS)]]
    assert sorted(order) == sorted(r.info.run_name for r in runs.values()), order
    # the metrics grid: a name cell and value cells share their row's `top`
    start = max(k for k, t in enumerate(page.texts) if t == "Metrics")
    tops = [top for top, left, text, k in page.cells if k > start and text == key]
    assert tops, f"no {key} row on the comparison page; screenshot {SHOTS / 'compare_runs.png'}"
    values = sorted(
        (
            (left, text)
            for top, left, text, k in page.cells
            if k > start and top == tops[0] and text != key
        ),
        key=lambda c: c[0],
    )
    shown = [float(text) for _, text in values][-len(MODELS) :]
    by_name = {r.info.run_name: r.data.metrics[key] for r in runs.values()}
    expected = [by_name[n] for n in order]
    assert len(shown) == len(MODELS)
    for name, got, want in zip(order, shown, expected):
        assert abs(got - want) <= 6e-4, f"{name}: page shows {got}, tracked {want}"
