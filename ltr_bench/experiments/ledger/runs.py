"""Running the ledger's invocations: absent data, a re-used tracked run, or a new
``ltr-bench experiment=<...>`` subprocess -- each distinct invocation once."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
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
    invocation_inputs,
)
from ltr_bench.experiments.ledger.bundles import find_bundle, folder, machine_facts, write_bundle
from ltr_bench.experiments.ledger.spec import Claim, Ledger, RunSpec
from ltr_bench.experiments.ledger.tables import Invocation, Tables, combine
from ltr_bench.provenance import Provenance, command_line, start


def absent_datasets(
    names: tuple[str, ...] | list[str], known: dict[str, str | None] | None = None
) -> list[str]:
    """``"<dataset> absent from <root>"`` for each named dataset whose folder is missing; the root
    is named as the user set it (:func:`data_root_named`), never by this machine's path.
    ``known``: what earlier calls found per dataset (filled in; a ledger asks dozens of times)."""
    known = {} if known is None else known
    for ds in names:
        if ds not in known:
            known[ds] = _absent(ds)
    return [str(known[ds]) for ds in names if known[ds] is not None]


def _absent(ds: str) -> str | None:
    """Why dataset config ``ds`` is absent here, None when it loads."""
    from hydra.utils import instantiate

    cfg = compose_run_config([f"dataset={ds}"])
    try:
        instantiate(cfg.dataset, _convert_="all")
    except Exception as exc:  # noqa: BLE001 - Hydra wraps the data layer's UserError
        exc = _user_error(exc)
        path = OmegaConf.select(cfg, "dataset.path")
        folder = OmegaConf.select(cfg, "dataset.folder")
        if path or not folder:
            return f"{ds}: {exc}"
        return f"{folder} absent from {data_root_named()}"
    return None


def data_root_named() -> str:
    """Where the ledger looks for the data, as a reader can follow it on any machine:
    ``$LTR_DATA`` when it is set, else the checkout's default ``../shared/data/letor``."""
    from ltr_bench.data.datasets import DATA_ENV

    if os.environ.get(DATA_ENV, "").strip():
        return f"${DATA_ENV}"
    return f"../shared/data/letor beside the checkout ({DATA_ENV} unset)"


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
    run: RunSpec,
    scale: str,
    seed: int,
    forwarded: list[str],
    out: Path,
    log: Path,
    in_process: bool = False,
) -> None:
    """``ltr-bench experiment=<...> scale=<scale> <overrides>`` in a subprocess (or, with
    ``in_process``, in this one: :mod:`~ltr_bench.experiments.ledger.in_process`) into ``out``;
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
    with open(log, "a") as fh:  # an earlier, interrupted attempt's log stays above this one's
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        fh.write(f"=== ltr-bench {' '.join(args)} (started {stamp})\n")
        fh.flush()
        if in_process:
            from ltr_bench.experiments.ledger.in_process import run_in_process

            code = run_in_process(args, out, fh)
        else:
            code = subprocess.call(
                [sys.executable, "-m", "ltr_bench.cli.main", *args],
                stdout=fh,
                stderr=subprocess.STDOUT,
            )
    if code != 0:
        tail = " / ".join(log.read_text(errors="replace").strip().splitlines()[-3:])
        raise RuntimeError(f"exit {code} (log {log}): {tail}")


def _invocations(
    ledger: Ledger, claims: list[Claim], scale: str, seed: int, forwarded: list[str]
) -> tuple[list[Invocation], dict[str, list[Invocation]]]:
    """Each distinct invocation the claims need (a run in parts: one per part), and per run
    name the invocations it is made of."""
    from ltr_bench.experiments.results_key import results_key

    by_key: dict[str, Invocation] = {}
    pieces_of: dict[str, list[Invocation]] = {}
    memo: dict[Any, Any] = {}  # each dataset fingerprinted once
    for claim in claims:
        if claim.not_testable or claim.run is None or claim.run in pieces_of:
            continue
        invs = []
        for piece in ledger.runs[claim.run].pieces():
            spec = ledger.specs[piece.name]
            inputs = invocation_inputs(str(spec.name), scale, seed, spec, forwarded, memo)
            key = results_key(inputs)
            invs.append(
                by_key.setdefault(
                    key,
                    Invocation(piece, key, str(spec.get("mlflow_experiment") or ""), inputs),
                )
            )
        pieces_of[claim.run] = invs
    todo = list(by_key.values())
    for inv in todo:
        inv.claims = [c.id for c in claims if any(p is inv for p in pieces_of.get(c.run or "", []))]
    return todo, pieces_of


@dataclass
class Context:
    """What every invocation of one ledger command shares."""

    exp: ExperimentRun
    ledger: Ledger
    scale: str
    seed: int
    forwarded: list[str]
    run_missing: bool
    bundles: Path | None  # experiment.bundles_dir (None: no bundles read or written)
    work: Path | None = None  # experiment.work_dir (None: in the ledger's own output folder)
    absent: dict[str, str | None] = field(default_factory=dict)  # dataset -> why absent here

    @property
    def in_process(self) -> bool:
        """``experiment.in_process``: run invocations in this process (a scale of small runs)."""
        return bool(self.exp.spec.get("in_process", False))

    def run_dir(self, inv: Invocation) -> Path:
        """Where ``inv`` runs: ``<work_dir>/<scale>/<run>-<key>`` (the same folder each time the
        same invocation runs, so an interrupted run resumes its finished sweeps), or
        ``runs/<run>`` in this ledger's output folder."""
        if self.work is None:
            return self.exp.out_dir / "runs" / inv.run.name
        return folder(self.work, self.scale, inv.run.name, inv.key)


def prepare(
    exp: ExperimentRun,
    ledger: Ledger,
    claims: list[Claim],
    scale: str,
    seed: int,
    forwarded: list[str],
    run_missing: bool,
    bundles: Path | None = None,
    work: Path | None = None,
) -> dict[str, Invocation]:
    """One :class:`Invocation` per distinct invocation the claims need (a run in parts needs one
    per part): a committed results bundle, absent data, a re-used tracked run, or a new run
    (``run_missing``). Every bundle is verified before anything runs. Returns the invocation each
    run name is judged on (for a run in parts: :func:`combine` of its parts)."""
    todo, pieces_of = _invocations(ledger, claims, scale, seed, forwarded)
    if bundles is not None:
        for inv in todo:
            found = find_bundle(bundles, scale, inv.run.name, inv.inputs)
            inv.bundle, inv.stale = found.bundle, list(found.stale)
    ctx = Context(exp, ledger, scale, seed, forwarded, run_missing, bundles, work)
    for i, inv in enumerate(todo, 1):
        _obtain(ctx, inv, f"[{i}/{len(todo)}] {inv.run.command(scale)}")
    return {
        name: combine(ledger.runs[name], invs) if ledger.runs[name].parts else invs[0]
        for name, invs in pieces_of.items()
    }


def _obtain(ctx: Context, inv: Invocation, head: str) -> None:
    """Give ``inv`` its tables: from its bundle, a tracked run or a new run (else a reason)."""
    if inv.bundle is not None:
        _from_bundle(inv, head)
        return
    missing = absent_datasets(inv.run.datasets, ctx.absent) or [
        f"dataset {ds} absent here" for ds, digests in inv.inputs["data"].items() if digests is None
    ]
    if missing:
        inv.status, inv.reason = "absent", "; ".join(missing)
        print(f"{head}: not testable here ({inv.reason})", flush=True)
        return
    spec = ctx.ledger.specs[inv.run.name]
    tracker = _sub_tracker(ctx.exp, inv.mlflow_experiment)
    found = find_tracked(tracker, str(spec.name), ctx.scale, inv.key)
    inputs = ctx.exp.path(f"inputs/{inv.run.name}")
    if found is not None:
        inv.status, inv.run_id, inv.provenance = "reused", found.info.run_id, provenance(found)
        inv.tables = Tables(None, tracker, inv.run_id, inputs)
        print(
            f"{head}: re-using MLflow run {inv.run_id} (experiment "
            f"'{inv.mlflow_experiment}', {inv.provenance})",
            flush=True,
        )
        _bundle(ctx, inv, spec, _tracked_measurement(found))
        return
    if not ctx.run_missing:
        inv.status = "not run"
        inv.reason = "no tracked run or bundle yet and experiment.execute=false"
        if inv.stale:
            inv.reason += f" ({'; '.join(inv.stale)})"
        print(f"{head}: {inv.reason}", flush=True)
        return
    out = ctx.run_dir(inv)
    log = out.with_name(f"{out.name}.log")
    print(f"{head}: running (log {log})", flush=True)
    begun = start(_command(inv.run, ctx.scale, ctx.seed, ctx.forwarded))
    try:
        execute(inv.run, ctx.scale, ctx.seed, ctx.forwarded, out, log, ctx.in_process)
    except RuntimeError as exc:
        inv.status, inv.reason = "failed", str(exc)
        print(f"{head}: FAILED {exc}", flush=True)
        return
    measured = begun.finish()
    found = find_tracked(tracker, str(spec.name), ctx.scale, inv.key)
    inv.status, inv.run_id = "ran", found.info.run_id if found is not None else None
    inv.provenance = provenance(found)
    inv.tables = Tables(out, tracker, inv.run_id, inputs)
    _bundle(ctx, inv, spec, _ran_measurement(measured))


def _from_bundle(inv: Invocation, head: str) -> None:
    bundle = inv.bundle
    inv.status, inv.provenance = "bundle", bundle.summary()
    inv.tables = Tables(bundle.path)
    unchecked = [ds for ds, digests in inv.inputs["data"].items() if digests is None]
    note = f" (data files not checked: {', '.join(unchecked)} absent here)" if unchecked else ""
    print(f"{head}: re-using results {inv.provenance}{note}", flush=True)


def _command(run: RunSpec, scale: str, seed: int, forwarded: list[str]) -> str:
    return " ".join([run.command(scale), *forwarded, f"seed={seed}"])


def _ran_measurement(p: Provenance) -> dict[str, Any]:
    return {
        "source": "this ledger (ltr-bench experiment=claims)",
        "git_commit": p.commit,
        "started": p.started.strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": round(p.wall_s, 1),
        "load_average": {"start": p.load_before, "end": p.load_after},
    }


def _tracked_measurement(run: Any) -> dict[str, Any]:
    from ltr_bench import tracking_keys as keys

    end = run.info.end_time or run.info.start_time
    return {
        "source": f"tracked MLflow run {run.info.run_id}, exported by this ledger",
        "git_commit": run.data.tags.get(keys.TAG_GIT_COMMIT) or "unknown",
        "started": datetime.fromtimestamp(run.info.start_time / 1000, UTC).strftime(
            "%Y-%m-%d %H:%M UTC"
        ),
        "wall_s": round((end - run.info.start_time) / 1000, 1),
        "machine_note": "the machine that exported the tracked run (usually the one that ran it)",
    }


def _bundle(ctx: Context, inv: Invocation, spec: DictConfig, measured: dict[str, Any]) -> None:
    """Write the results bundle of a finished invocation (when bundles are kept)."""
    if ctx.bundles is None or inv.tables is None:
        return
    machine = machine_facts()
    if "machine_note" in measured:
        machine["note"] = measured.pop("machine_note")
    if "load_average" in measured:
        machine["load_average"] = measured.pop("load_average")
    record = {
        "name": inv.run.name,
        "experiment": inv.run.experiment,
        "scale": ctx.scale,
        "seed": ctx.seed,
        "key": inv.key,
        "inputs": inv.inputs,
        "command": _command(inv.run, ctx.scale, ctx.seed, ctx.forwarded),
        "overrides": list(inv.run.overrides),
        "forwarded": list(ctx.forwarded),
        "ledger_command": command_line("ltr-bench"),
        "spec": OmegaConf.to_container(spec, resolve=True),
        "mlflow_run": inv.run_id,
        "mlflow_experiment": inv.mlflow_experiment,
        "machine": machine,
        "claims": list(inv.claims),
        **measured,
    }
    files = inv.tables.csv_files() if isinstance(inv.tables, Tables) else {}
    inv.bundle, inv.bundle_written = write_bundle(ctx.bundles, record, files), True
    print(f"    results bundle written: {inv.bundle.shown()}", flush=True)
