"""``tracking=server``: a real ``mlflow server`` on 127.0.0.1, a real ``ltr-bench`` run against it,
and the run read back over the server's REST API (as any other machine of a team would)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ltr_bench import tracking_keys as keys
from tests.scale.cli import TINY, env, free_port, ltr_bench, results
from tests.waiting import HANG_GUARD_S, TEST_GUARD_S, stop_group

pytestmark = pytest.mark.timeout(TEST_GUARD_S)

MLFLOW = str(Path(sys.executable).parent / "mlflow")
EXPERIMENT = "scale_server"


def _get(url: str, timeout: float = 10) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``(http://127.0.0.1:<port>, server dir)`` of a server with a temporary SQLite backend."""
    root = tmp_path_factory.mktemp("mlflow_server")
    port = free_port()
    log = open(root / "server.log", "w")
    proc = subprocess.Popen(
        [
            MLFLOW,
            "server",
            "--backend-store-uri",
            f"sqlite:///{root / 'db.sqlite'}",
            "--artifacts-destination",
            str(root / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # The background job runner (huey workers) is not needed for tracking.
        env=env(MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + HANG_GUARD_S  # a last guard; /health answering is the event
        while True:  # readiness: the server answers /health
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"mlflow server did not come up: {(root / 'server.log').read_text()[-2000:]}"
                )
            time.sleep(0.25)
        yield url, root
    finally:
        stop_group(proc, grace_s=20)  # the server stops uvicorn below it first
        log.close()


def test_run_is_logged_to_a_tracking_server_and_read_back_over_rest(
    tmp_path: Path, mlflow_server: tuple[str, Path]
) -> None:
    url, server_dir = mlflow_server
    proc = ltr_bench(
        tmp_path,
        "tracking=server",
        f"tracking.tracking_uri={url}",
        f"experiment_name={EXPERIMENT}",
        "seed=3",
        *TINY,
        "threads=1",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (res,) = results(tmp_path)
    assert res["mlflow"]["tracking_uri"] == url
    # Nothing was tracked locally: no SQLite store, no artifact folder beside the run.
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()

    api = f"{url}/api/2.0/mlflow"
    exp = _get(
        f"{api}/experiments/get-by-name?" + urllib.parse.urlencode({"experiment_name": EXPERIMENT})
    )
    exp_id = exp["experiment"]["experiment_id"]
    found = _post(f"{api}/runs/search", {"experiment_ids": [exp_id], "max_results": 100})["runs"]
    by_role: dict[str, list[dict[str, Any]]] = {}
    for run in found:
        tags = {t["key"]: t["value"] for t in run["data"].get("tags", [])}
        by_role.setdefault(tags[keys.TAG_ROLE], []).append(run)
    assert {r: len(v) for r, v in by_role.items()} == {keys.ROLE_PROTOCOL: 1, keys.ROLE_FOLD: 1}
    (protocol,), (fold,) = by_role[keys.ROLE_PROTOCOL], by_role[keys.ROLE_FOLD]
    assert protocol["info"]["run_id"] == res["mlflow_run_id"]
    assert {protocol["info"]["status"], fold["info"]["status"]} == {"FINISHED"}

    # Params: the run's choices; metrics: the same numbers as results.json, plus a curve.
    params = {p["key"]: p["value"] for p in fold["data"]["params"]}
    assert params["seed"] == "3" and params["model"] == "direct_ranker"
    metrics = {m["key"]: m["value"] for m in fold["data"]["metrics"]}
    for split in ("vali", "test"):
        assert metrics[f"{split}/ndcg_at_10"] == pytest.approx(
            res["folds"][0]["metrics"][split]["ndcg@10"], abs=1e-9
        )
    history = _get(
        f"{api}/metrics/get-history?"
        + urllib.parse.urlencode(
            {"run_id": fold["info"]["run_id"], "metric_key": "curve/vali_ndcg_at_10"}
        )
    )["metrics"]
    assert len(history) == 2  # model.epochs=2

    # Artifacts went through the server into its artifact store.
    listed = _get(
        f"{api}/artifacts/list?" + urllib.parse.urlencode({"run_id": protocol["info"]["run_id"]})
    )
    assert {"config.yaml", "results.json"} <= {f["path"] for f in listed.get("files", [])}
    assert list((server_dir / "artifacts").rglob("config.yaml"))
