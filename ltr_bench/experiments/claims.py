"""The claims ledger (``ltr-bench experiment=claims``): the papers' quantitative statements, each
checked against the outputs of the experiment that tests it.

``conf/experiment/claims.yaml`` lists ``runs`` (named experiment invocations: ``experiment`` +
``overrides`` + the ``datasets`` they need; optionally ``parts``, one invocation per part, judged
on the row-wise union of the parts' tables) and ``claims`` (id, source, statement, the paper's
value, the run that tests it and a ``check``: a ``_target_`` function of
:mod:`ltr_bench.experiments.checks` with its arguments; or ``not_testable: <reason>``).

The driver validates the whole ledger first (every run's spec composes, every check's arguments
fit its function), then runs each needed invocation once, however many claims read it:

- a dataset missing from the data root makes its claims "not testable here";
- a FINISHED experiment run in the MLflow store with the same invocation key (tag
  ``ltr.experiment_key``, see :func:`~ltr_bench.experiments.common.invocation_key`: experiment,
  scale, seed, resolved spec, results-deciding overrides) is re-used: its CSV artifacts are read
  back, nothing is trained;
- otherwise ``ltr-bench experiment=<name> scale=<scale> <overrides>`` runs in a subprocess (output
  in ``runs/<run>/``, log ``runs/<run>.log``; a part in ``runs/<run>.part<k>/``), with the command line's other overrides (threads,
  tracking, seed) passed on; ``experiment.execute=false`` only re-reads.

Outputs: ``claims.md`` (statement | paper's value | ours | verdict, and the runs used),
``claims.csv`` (the same plus the check and run ids), ``summary.csv`` (verdict counts), all also
artifacts of the ledger's MLflow run. At a scale whose spec says ``judge: false`` (``quick``) a
verdict reads "too small to judge" with what it would have been.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from ltr_bench.errors import UserError
from ltr_bench.experiments.checks import CheckError, Outcome
from ltr_bench.experiments.common import (
    ROLE_EXPERIMENT,
    TAG_EXPERIMENT,
    TAG_EXPERIMENT_KEY,
    TAG_SCALE,
    Experiment,
    apply_command_line,
    compose_run_config,
    invocation_key,
    override_key,
    plain,
    scaled_spec,
    user_overrides,
)

HOLDS, FAILS = "holds", "does not hold"
NOT_TESTABLE, NOT_JUDGED, TOO_SMALL = "not testable here", "not judged", "too small to judge"
CLAIM_KEYS = {
    "id",
    "source",
    "statement",
    "paper",
    "run",
    "check",
    "datasets",
    "not_testable",
    "note",
}
RUN_KEYS = {"experiment", "overrides", "datasets", "parts"}
_MLFLOW_BAR = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


@dataclass(frozen=True)
class RunSpec:
    """One experiment invocation of the ledger (``runs.<name>``)."""

    name: str
    experiment: str
    overrides: tuple[str, ...] = ()
    datasets: tuple[str, ...] = ()
    # Each part: overrides added to ``overrides`` for one invocation of its own (e.g. a subset of
    # the models); the run's tables are the row-wise union of its parts' tables.
    parts: tuple[tuple[str, ...], ...] = ()

    def pieces(self) -> list[RunSpec]:
        """The invocations this run is made of: itself, or one per part (``<name>.part<k>``)."""
        if not self.parts:
            return [self]
        return [
            RunSpec(
                f"{self.name}.part{k}", self.experiment, (*self.overrides, *part), self.datasets
            )
            for k, part in enumerate(self.parts, 1)
        ]

    def command(self, scale: str) -> str:
        if self.parts:
            return "; ".join(p.command(scale) for p in self.pieces())
        return " ".join(
            [
                "ltr-bench",
                f"experiment={self.experiment}",
                f"scale={scale}",
                *(_quote(o) for o in self.overrides),
            ]
        )


@dataclass(frozen=True)
class Claim:
    """One statement of a paper and how it is checked."""

    id: str
    source: str
    statement: str
    paper: str
    run: str | None
    check: dict[str, Any] | None
    datasets: tuple[str, ...] = ()
    not_testable: str | None = None
    note: str = ""

    @property
    def check_text(self) -> str:
        """``above(column=..., ...)``: the verdict rule as one line."""
        if not self.check:
            return ""
        name = str(self.check["_target_"]).rsplit(".", 1)[-1]
        args = ", ".join(f"{k}={v}" for k, v in self.check.items() if k != "_target_")
        return f"{name}({args})"


@dataclass
class Invocation:
    """A run of the ledger at one scale: its key, where its tables come from, what happened."""

    run: RunSpec
    key: str = ""
    mlflow_experiment: str = ""
    status: str = "pending"  # absent | reused | ran | failed | not run
    reason: str = ""
    run_id: str | None = None
    provenance: str = ""  # when the run started and its git commit
    tables: Mapping[str, pd.DataFrame] | None = None
    claims: list[str] = field(default_factory=list)
    parts: list[Invocation] = field(default_factory=list)  # a run in parts: one per part


@dataclass
class Ledger:
    runs: dict[str, RunSpec]
    claims: list[Claim]
    specs: dict[str, DictConfig]  # run name -> the experiment's spec at the ledger's scale


# ------------------------------------------------------------------------------ validation
def _quote(override: str) -> str:
    return f"'{override}'" if any(c in override for c in "[]{}() ,*") else override


def parse_ledger(spec: DictConfig | Mapping[str, Any]) -> tuple[dict[str, RunSpec], list[Claim]]:
    """``runs`` and ``claims`` of the ledger spec, checked for shape (not yet for content)."""
    data = plain(spec)
    runs: dict[str, RunSpec] = {}
    for name, r in (data.get("runs") or {}).items():
        if not isinstance(r, Mapping) or not r.get("experiment"):
            raise UserError(f"experiment.runs.{name} needs an `experiment: <name>` entry")
        unknown = set(r) - RUN_KEYS
        if unknown:
            raise UserError(
                f"experiment.runs.{name}: unknown key(s) {sorted(unknown)}; use {sorted(RUN_KEYS)}"
            )
        parts = r.get("parts") or ()
        if not isinstance(parts, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and p and all(isinstance(o, str) for o in p) for p in parts
        ):
            raise UserError(
                f"experiment.runs.{name}.parts: expected a list of override lists, one "
                'per invocation, e.g. [["experiment.models=[a,b]"], '
                '["experiment.models=[c]"]]'
            )
        if len({tuple(p) for p in parts}) < len(parts):  # the union would count a part twice
            raise UserError(
                f"experiment.runs.{name}.parts: a part is listed twice; give each "
                "part its own overrides"
            )
        runs[str(name)] = RunSpec(
            str(name),
            str(r["experiment"]),
            tuple(str(o) for o in r.get("overrides") or ()),
            tuple(str(d) for d in r.get("datasets") or ()),
            tuple(tuple(p) for p in parts),
        )
    claims: list[Claim] = []
    seen: set[str] = set()
    for i, c in enumerate(data.get("claims") or []):
        where = f"experiment.claims[{i}]"
        if not isinstance(c, Mapping) or not c.get("id"):
            raise UserError(f"{where} needs an `id`")
        cid = str(c["id"])
        where = f"{where} ({cid})"
        if cid in seen:
            raise UserError(f"{where}: the id {cid} is used twice; give each claim its own id")
        seen.add(cid)
        unknown = set(c) - CLAIM_KEYS
        if unknown:
            raise UserError(f"{where}: unknown key(s) {sorted(unknown)}; use {sorted(CLAIM_KEYS)}")
        for key in ("source", "statement", "paper"):
            if c.get(key) in (None, ""):
                raise UserError(f"{where} needs `{key}`")
        if not c.get("not_testable"):
            if not c.get("run") or not c.get("check"):
                raise UserError(f"{where} needs `run` and `check`, or `not_testable: <reason>`")
            if str(c["run"]) not in runs:
                raise UserError(
                    f"{where}: run {c['run']} is not in experiment.runs; choose one of "
                    f"[{', '.join(runs)}]"
                )
            if not isinstance(c["check"], Mapping) or not c["check"].get("_target_"):
                raise UserError(
                    f"{where}: `check` needs a `_target_` (a function of "
                    "ltr_bench.experiments.checks) and its arguments"
                )
        claims.append(
            Claim(
                cid,
                str(c["source"]),
                str(c["statement"]),
                str(c["paper"]),
                str(c["run"]) if c.get("run") else None,
                dict(c["check"]) if c.get("check") else None,
                tuple(str(d) for d in c.get("datasets") or ()),
                str(c["not_testable"]) if c.get("not_testable") else None,
                str(c.get("note") or ""),
            )
        )
    return runs, claims


def check_function(claim: Claim) -> Callable[..., Outcome]:
    """The claim's check function, its arguments bound against its signature (fails early)."""
    from hydra.utils import get_method

    assert claim.check is not None
    target = str(claim.check["_target_"])
    try:
        fn = get_method(target)
    except Exception:  # noqa: BLE001 - Hydra wraps import errors in its own types
        raise UserError(
            f"claim {claim.id}: check._target_={target} is not a function; use one "
            "of ltr_bench.experiments.checks (threshold, within_se, above, ...)"
        ) from None
    args = {k: v for k, v in claim.check.items() if k != "_target_"}
    try:
        inspect.signature(fn).bind({}, **args)
    except TypeError as exc:
        raise UserError(f"claim {claim.id}: check {target.rsplit('.', 1)[-1]}: {exc}") from None
    return fn


def run_spec_config(run: RunSpec, scale: str, seed: int, forwarded: list[str]) -> DictConfig:
    """The spec ``ltr-bench experiment=<run> scale=<scale> <overrides>`` would run (same pipeline
    as :func:`~ltr_bench.experiments.common.run_experiment`, so the invocation keys agree)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    overrides = [
        f"experiment={run.experiment}",
        f"scale={scale}",
        *run.overrides,
        *forwarded,
        f"seed={seed}",
    ]
    try:
        cfg = compose_run_config(overrides)
        return apply_command_line(scaled_spec(cfg, scale), list(run.overrides))
    except (HydraException, OmegaConfBaseException, UserError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"experiment.runs.{run.name} ({run.command(scale)}) does not compose: {first}"
        ) from None


def validate_ledger(
    spec: DictConfig | Mapping[str, Any],
    scale: str,
    seed: int = 0,
    forwarded: list[str] | None = None,
) -> Ledger:
    """Parse the ledger and check everything that can be checked without running: each run's
    experiment spec composes at ``scale``, each check's arguments fit its function, each named
    dataset is a dataset config. Raises :class:`UserError` naming the claim or run."""
    forwarded = list(forwarded or [])
    runs, claims = parse_ledger(spec)
    for claim in claims:
        if claim.check:
            check_function(claim)
    used = {c.run for c in claims if c.run}
    specs = {
        piece.name: run_spec_config(piece, scale, seed, forwarded)
        for name in runs
        if name in used
        for piece in runs[name].pieces()
    }
    datasets = {d for r in runs.values() for d in r.datasets} | {
        d for c in claims for d in c.datasets
    }
    for ds in sorted(datasets):
        try:
            compose_run_config([f"dataset={ds}"])
        except Exception:  # noqa: BLE001 - Hydra's "could not find dataset/<ds>"
            raise UserError(
                f"dataset {ds} (named by a claim or run of the ledger) is not a "
                "dataset config; see `ltr-bench --help` for the options"
            ) from None
    return Ledger(runs, claims, specs)


def select_claims(claims: list[Claim], only: list[str] | None) -> list[Claim]:
    """The claims named in ``only`` (claim ids or run names); all when ``only`` is empty."""
    if not only:
        return claims
    known = {c.id for c in claims} | {c.run for c in claims if c.run}
    unknown = [o for o in only if o not in known]
    if unknown:
        raise UserError(
            f"experiment.only: {unknown} are neither claim ids nor run names of the ledger"
        )
    return [c for c in claims if c.id in only or c.run in only]


# ------------------------------------------------------------------------------ data sources
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
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, UserError):
            return seen
        seen = seen.__cause__ or seen.__context__
    raise exc


class Tables(Mapping):
    """An experiment's CSV files by name, read on first use from a folder, else downloaded from
    the run's MLflow artifacts."""

    def __init__(
        self,
        folder: Path | None,
        tracker: Any = None,
        run_id: str | None = None,
        download_to: Path | None = None,
    ) -> None:
        self.folder, self.tracker, self.run_id, self.download_to = (
            folder,
            tracker,
            run_id,
            download_to,
        )
        self._cache: dict[str, pd.DataFrame] = {}

    def _path(self, name: str) -> Path | None:
        if self.folder is not None and (self.folder / name).is_file():
            return self.folder / name
        if self.tracker is None or not self.run_id or self.download_to is None:
            return None
        self.download_to.mkdir(parents=True, exist_ok=True)
        quiet = os.environ.get(_MLFLOW_BAR)
        os.environ[_MLFLOW_BAR] = "false"  # no progress bar per small CSV
        try:
            return Path(
                self.tracker.client.download_artifacts(self.run_id, name, str(self.download_to))
            )
        except Exception:  # noqa: BLE001 - MLflow raises various types for a missing artifact
            return None
        finally:
            if quiet is None:
                os.environ.pop(_MLFLOW_BAR, None)
            else:
                os.environ[_MLFLOW_BAR] = quiet

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            path = self._path(name)
            if path is None or not path.is_file():
                raise KeyError(name)
            self._cache[name] = pd.read_csv(path)
        return self._cache[name]

    def __iter__(self):  # type: ignore[override]
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)


class UnionTables(Mapping):
    """The tables of a run in parts: each CSV is the row-wise union of the parts' CSVs (each part
    ran the same experiment on other models, datasets ...). A file some part lacks is missing."""

    def __init__(self, parts: list[Mapping[str, pd.DataFrame]]) -> None:
        self.parts = parts
        self._cache: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            self._cache[name] = pd.concat([part[name] for part in self.parts], ignore_index=True)
        return self._cache[name]

    def __iter__(self):  # type: ignore[override]
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)


def combine(run: RunSpec, parts: list[Invocation]) -> Invocation:
    """The invocation of a run in parts: judged on the union of its parts' tables once every part
    has them; otherwise its status and reason name the first part that is missing."""
    inv = Invocation(run, ",".join(p.key for p in parts), parts[0].mlflow_experiment, parts=parts)
    inv.run_id = ", ".join(p.run_id for p in parts if p.run_id) or None
    inv.provenance = "; ".join(p.provenance for p in parts if p.provenance)
    for k, part in enumerate(parts, 1):
        if part.tables is None:
            inv.status = part.status
            inv.reason = f"part {k}/{len(parts)} ({part.run.name}) {part.status}" + (
                f": {part.reason}" if part.reason else ""
            )
            if part.status == "absent":
                inv.reason = part.reason
            return inv
    inv.status = "reused" if all(p.status == "reused" for p in parts) else "ran"
    inv.tables = UnionTables([p.tables for p in parts if p.tables is not None])
    return inv


# ------------------------------------------------------------------------------ running
def _sub_tracker(exp: Experiment, mlflow_experiment: str) -> Any:
    from ltr_bench.runner import job_context
    from ltr_bench.tracking import NullTracker, Tracker

    if not exp.tracker.enabled:
        return NullTracker()
    tracking = OmegaConf.merge(exp.cfg.tracking, {"experiment_name": mlflow_experiment})
    return Tracker.from_config(tracking, job_context().cwd)


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
    exp: Experiment,
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


# ------------------------------------------------------------------------------ verdicts
def judge(claim: Claim, inv: Invocation | None, judging: bool, scale: str) -> dict[str, Any]:
    """One row of the ledger table for ``claim``."""
    row = {
        "id": claim.id,
        "source": claim.source,
        "statement": claim.statement,
        "paper": claim.paper,
        "ours": "–",
        "verdict": "",
        "check": claim.check_text,
        "command": inv.run.command(scale) if inv else "",
        "mlflow_run": (inv.run_id or "") if inv else "",
        "run_status": inv.status if inv else "",
        "detail": "",
        "note": claim.note,
    }
    missing = absent_datasets(claim.datasets) if claim.datasets else []
    if claim.not_testable:
        row["verdict"] = f"{NOT_TESTABLE}: {claim.not_testable}"
        return row
    if missing or (inv and inv.status == "absent"):
        row["verdict"] = f"{NOT_TESTABLE}: {'; '.join(missing) or inv.reason}"
        return row
    if inv is None or inv.tables is None:
        row["verdict"] = f"{NOT_JUDGED}: {inv.reason if inv else 'no run'}"
        return row
    args = {k: v for k, v in (claim.check or {}).items() if k != "_target_"}
    try:
        outcome = check_function(claim)(inv.tables, **args)
    except CheckError as exc:
        outcome = Outcome(None, "–", str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad rule must not lose a days-long ledger
        outcome = Outcome(None, "–", f"the check failed: {type(exc).__name__}: {exc}")
    row["ours"], row["detail"] = outcome.ours, outcome.detail
    if outcome.holds is None:
        row["verdict"] = f"{TOO_SMALL if not judging else NOT_JUDGED}: {outcome.detail}"
    elif not judging:
        row["verdict"] = (
            f"{TOO_SMALL} (scale={scale}; would {'hold' if outcome.holds else 'not hold'})"
        )
    else:
        row["verdict"] = HOLDS if outcome.holds else FAILS
    return row


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(rows: pd.DataFrame, invocations: list[Invocation], scale: str, header: str) -> str:
    """``claims.md``: counts, the table (statement | paper's value | ours | verdict) and the runs."""
    lines = [
        f"# Claims ledger (scale={scale})",
        "",
        header,
        "",
        counts_line(rows),
        "",
        "| id | source | statement | paper's value | ours | verdict |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows.itertuples(index=False):
        lines.append(
            "| "
            + " | ".join(
                _cell(v) for v in (r.id, r.source, r.statement, r.paper, r.ours, r.verdict)
            )
            + " |"
        )
    notes = [(r.id, r.note) for r in rows.itertuples(index=False) if getattr(r, "note", "")]
    if notes:  # what a reader should know to read a verdict (e.g. a convention behind a gap)
        lines += ["", "## Notes", "", *(f"- `{cid}`: {_cell(note)}" for cid, note in notes)]
    if invocations:
        lines += [
            "",
            "## Runs",
            "",
            "| run | command | status | MLflow run | claims |",
            "| --- | --- | --- | --- | --- |",
        ]
        for inv in invocations:
            status = inv.status + (f": {inv.reason}" if inv.reason else "")
            lines.append(
                "| "
                + " | ".join(
                    _cell(v)
                    for v in (
                        inv.run.name,
                        f"`{inv.run.command(scale)}`",
                        status,
                        f"{inv.run_id} ({inv.mlflow_experiment}; {inv.provenance})"
                        if inv.run_id
                        else "–",
                        ", ".join(inv.claims),
                    )
                )
                + " |"
            )
    return "\n".join(lines) + "\n"


def verdict_kind(verdict: str) -> str:
    for kind in (HOLDS, FAILS, NOT_TESTABLE, TOO_SMALL, NOT_JUDGED):
        if verdict == kind or verdict.startswith(kind + ":") or verdict.startswith(kind + " ("):
            return kind
    return NOT_JUDGED


def counts(rows: pd.DataFrame) -> dict[str, int]:
    kinds = rows["verdict"].map(verdict_kind) if len(rows) else pd.Series(dtype=str)
    return {k: int((kinds == k).sum()) for k in (HOLDS, FAILS, NOT_TESTABLE, TOO_SMALL, NOT_JUDGED)}


def counts_line(rows: pd.DataFrame) -> str:
    return f"{len(rows)} claims: " + ", ".join(f"{n} {k}" for k, n in counts(rows).items() if n)


# ------------------------------------------------------------------------------ the driver
def run(exp: Experiment) -> pd.DataFrame:
    """The driver of ``experiment=claims``."""
    from datetime import datetime

    from ltr_bench.provenance import command_line, start, write_page

    begun = start(command_line("ltr-bench"))  # the commit and the load as the ledger starts
    spec = exp.spec
    scale = str(exp.cfg.get("scale", "full"))
    seed = int(exp.cfg.seed)
    forwarded = [o for o in user_overrides(["seed"]) if not override_key(o).startswith("hydra")]
    ledger = validate_ledger(spec, scale, seed, forwarded)
    claims = select_claims(ledger.claims, [str(o) for o in plain(spec.get("only") or [])])
    judging = bool(spec.get("judge", True))
    invocations = prepare(
        exp, ledger, claims, scale, seed, forwarded, bool(spec.get("execute", True))
    )
    rows = pd.DataFrame([judge(c, invocations.get(c.run or ""), judging, scale) for c in claims])
    distinct = list({id(p): p for i in invocations.values() for p in (i.parts or [i])}.values())
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = (
        f"Generated {stamp} by `ltr-bench experiment=claims scale={scale}` "
        f"(seed {seed}). Verdict rules: `claims.csv` (column `check`) and "
        "`conf/experiment/claims.yaml`; sigma = combined standard error of two means."
    )
    exp.write_csv(rows, "claims.csv")
    exp.write_text(markdown(rows, distinct, scale, header), "claims.md")
    if spec.get("results_page"):  # ++experiment.results_page=docs/results/claims.md
        body = markdown(rows, distinct, scale, header)
        title = f"The papers' claims, checked ({scale})"
        write_page(str(spec.results_page), title, body, begun.finish())
    exp.log_metrics({f"n_{k.replace(' ', '_')}": n for k, n in counts(rows).items()})
    print(counts_line(rows), flush=True)
    return rows[["id", "ours", "verdict"]].assign(
        ours=rows["ours"].str.slice(0, 60), verdict=rows["verdict"].str.slice(0, 70)
    )
