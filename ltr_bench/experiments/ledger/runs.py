"""Running the ledger's invocations: absent data, a re-used tracked run, or a new
``ltr-bench experiment=<...>`` subprocess -- each distinct invocation once."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from ltr_bench.errors import UserError, find_in_chain
from ltr_bench.experiments.common import (
    ROLE_EXPERIMENT,
    TAG_EXPERIMENT,
    TAG_EXPERIMENT_KEY,
    TAG_SCALE,
    ExperimentRun,
    compose_run_config,
    invocation_key,
)
from ltr_bench.experiments.ledger.spec import Claim, Ledger, RunSpec
from ltr_bench.experiments.ledger.tables import Invocation, Tables, combine


def absent_datasets(names: tuple[str, ...] | list[str]) -> list[str]:
    """``"<dataset> absent from <root>"`` for each named dataset whose folder is missing."""
    from hydra.utils import instantiate

    from ltr_bench.data.datasets import resolve_data_root

    out = []
    for ds in names:
        cfg = compose_run_config([f"dataset={ds}"])
        try:
            instantiate(cfg.dataset, _convert_="all")
        except Exception as exc:  # noqa: BLE001 - Hydra wraps the data layer's UserError
            exc = _user_error(exc)
            path = OmegaConf.select(cfg, "dataset.path")
            folder = OmegaConf.select(cfg, "dataset.folder")
            if path or not folder:
                out.append(f"{ds}: {exc}")
            else:
                out.append(
                    f"{folder} absent from {resolve_data_root(OmegaConf.select(cfg, 'dataset.root'))}"
                )
    return out


def _user_error(exc: BaseException) -> UserError:
    """The :class:`UserError` behind ``exc`` (Hydra's instantiate wraps it); re-raise otherwise."""
    found = find_in_chain(exc, UserError)
    if found is None:
        raise exc
    return found


def _sub_tracker(exp: ExperimentRun, mlflow_experiment: str) -> Any:
    from ltr_bench.runner import job_context
    from ltr_bench.tracking import NullTracker, Tracker

    if not exp.tracker.enabled:
        return NullTracker()
    tracking = OmegaConf.merge(exp.cfg.tracking, {"experiment_name": mlflow_experiment})
    return Tracker.from_config(cast(DictConfig, tracking), job_context().cwd)


def find_tracked(tracker: Any, name: str, scale: str, key: str) -> Any | None:
    """The newest FINISHED experiment run with this invocation key, or None."""
    from ltr_bench import tracking_keys as keys
    from ltr_bench.tracking import find_runs

    runs = find_runs(
        tracker,
        {
            keys.TAG_ROLE: ROLE_EXPERIMENT,
            TAG_EXPERIMENT: name,
            TAG_SCALE: scale,
            TAG_EXPERIMENT_KEY: key,
        },
    )
    return runs[0] if runs else None


def provenance(run: Any) -> str:
    """``2026-11-24 17:53 UTC, 52 min, commit 1a2b3c4``: when a tracked run started, how long it
    took (its wall time: what the ledger saves by re-using it), from which code."""
    from datetime import datetime

    from ltr_bench import tracking_keys as keys

    if run is None:
        return ""
    parts = [datetime.fromtimestamp(run.info.start_time / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")]
    if run.info.end_time:
        minutes = (run.info.end_time - run.info.start_time) / 60_000
        parts.append(f"{minutes:.0f} min" if minutes >= 1 else f"{minutes * 60:.0f} s")
    commit = run.data.tags.get(keys.TAG_GIT_COMMIT)
    if commit:
        parts.append(f"commit {commit[:10]}")
    return ", ".join(parts)


def execute(
    run: RunSpec, scale: str, seed: int, forwarded: list[str], out: Path, log: Path
) -> None:
    """``ltr-bench experiment=<...> scale=<scale> <overrides>`` in a subprocess into ``out``;
    raises RuntimeError with the log's tail on failure."""
    args = [
        f"experiment={run.experiment}",
        f"scale={scale}",
        *run.overrides,
        *forwarded,
        f"seed={seed}",
        f"hydra.run.dir={out}",
    ]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as fh:
        code = subprocess.call(
            [sys.executable, "-m", "ltr_bench.cli", *args], stdout=fh, stderr=subprocess.STDOUT
        )
    if code != 0:
        tail = " / ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise RuntimeError(f"exit {code} (log {log}): {tail}")


def prepare(
    exp: ExperimentRun,
    ledger: Ledger,
    claims: list[Claim],
    scale: str,
    seed: int,
    forwarded: list[str],
    run_missing: bool,
) -> dict[str, Invocation]:
    """One :class:`Invocation` per distinct invocation the claims need (a run in parts needs one
    per part): absent data, re-used tracked run, or a new run (``run_missing``). Returns the
    invocation each run name is judged on (for a run in parts: :func:`combine` of its parts)."""
    by_key: dict[str, Invocation] = {}
    pieces_of: dict[str, list[Invocation]] = {}
    for claim in claims:
        if claim.not_testable or claim.run is None or claim.run in pieces_of:
            continue
        invs = []
        for piece in ledger.runs[claim.run].pieces():
            spec = ledger.specs[piece.name]
            key = invocation_key(str(spec.name), scale, seed, spec, forwarded)
            invs.append(
                by_key.setdefault(
                    key, Invocation(piece, key, str(spec.get("mlflow_experiment") or ""))
                )
            )
        pieces_of[claim.run] = invs
    todo = list(by_key.values())
    for i, inv in enumerate(todo, 1):
        inv.claims = [c.id for c in claims if any(p is inv for p in pieces_of.get(c.run or "", []))]
        head = f"[{i}/{len(todo)}] {inv.run.command(scale)}"
        missing = absent_datasets(inv.run.datasets)
        if missing:
            inv.status, inv.reason = "absent", "; ".join(missing)
            print(f"{head}: not testable here ({inv.reason})", flush=True)
            continue
        spec = ledger.specs[inv.run.name]
        tracker = _sub_tracker(exp, inv.mlflow_experiment)
        found = find_tracked(tracker, str(spec.name), scale, inv.key)
        if found is not None:
            inv.status, inv.run_id, inv.provenance = "reused", found.info.run_id, provenance(found)
            inv.tables = Tables(None, tracker, inv.run_id, exp.path(f"inputs/{inv.run.name}"))
            print(
                f"{head}: re-using MLflow run {inv.run_id} (experiment "
                f"'{inv.mlflow_experiment}', {inv.provenance})",
                flush=True,
            )
            continue
        if not run_missing:
            inv.status, inv.reason = "not run", "no tracked run yet and experiment.execute=false"
            print(f"{head}: {inv.reason}", flush=True)
            continue
        out = exp.out_dir / "runs" / inv.run.name
        log = exp.out_dir / "runs" / f"{inv.run.name}.log"
        print(f"{head}: running (log {log})", flush=True)
        try:
            execute(inv.run, scale, seed, forwarded, out, log)
        except RuntimeError as exc:
            inv.status, inv.reason = "failed", str(exc)
            print(f"{head}: FAILED {exc}", flush=True)
            continue
        found = find_tracked(tracker, str(spec.name), scale, inv.key)
        inv.status, inv.run_id = "ran", found.info.run_id if found is not None else None
        inv.provenance = provenance(found)
        inv.tables = Tables(out, tracker, inv.run_id, exp.path(f"inputs/{inv.run.name}"))
    return {
        name: combine(ledger.runs[name], invs) if ledger.runs[name].parts else invs[0]
        for name, invs in pieces_of.items()
    }
