"""The ledger's spec: ``runs`` and ``claims`` of ``conf/experiment/claims.yaml``, parsed and
validated before anything runs (every run's experiment spec composes, every check fits its
function, every named dataset is a dataset config)."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from ltr_bench.errors import UserError
from ltr_bench.experiments.checks import Outcome
from ltr_bench.experiments.common import (
    compose_run_config,
    plain,
    scaled_spec,
)

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
    "evidence",
}
RUN_KEYS = {"experiment", "overrides", "datasets", "parts"}


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
    # A second check on the same tables, shown with the note (``label``: what it measures), so a
    # note's numbers are computed, not copied: e.g. the same configs under another convention.
    evidence: dict[str, Any] | None = None

    @property
    def check_text(self) -> str:
        """``above(column=..., ...)``: the verdict rule as one line."""
        if not self.check:
            return ""
        name = str(self.check["_target_"]).rsplit(".", 1)[-1]
        args = ", ".join(f"{k}={v}" for k, v in self.check.items() if k != "_target_")
        return f"{name}({args})"


@dataclass
class Ledger:
    runs: dict[str, RunSpec]
    claims: list[Claim]
    specs: dict[str, DictConfig]  # run name -> the experiment's spec at the ledger's scale


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
            for key, check in (("check", c["check"]), ("evidence.check", _evidence_check(c))):
                if check is not None and (
                    not isinstance(check, Mapping) or not check.get("_target_")
                ):
                    raise UserError(
                        f"{where}: `{key}` needs a `_target_` (a function of "
                        "ltr_bench.experiments.checks) and its arguments"
                    )
            if c.get("evidence") is not None and not str(c["evidence"].get("label") or ""):
                raise UserError(f"{where}: `evidence` needs a `label` (what its check measures)")
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
                dict(c["evidence"]) if c.get("evidence") else None,
            )
        )
    return runs, claims


def _evidence_check(claim: Mapping[str, Any]) -> Any:
    """The ``check`` of a claim's ``evidence`` (None without evidence)."""
    evidence = claim.get("evidence")
    if evidence is None:
        return None
    if not isinstance(evidence, Mapping):
        raise UserError(f"claim {claim['id']}: `evidence` needs `label` and `check`")
    return evidence.get("check")


def check_function(claim: Claim, check: Mapping[str, Any] | None = None) -> Callable[..., Outcome]:
    """The function of the claim's check (or of ``check``, e.g. its evidence's), its arguments
    bound against its signature (fails early)."""
    from hydra.utils import get_method

    check = claim.check if check is None else check
    assert check is not None
    target = str(check["_target_"])
    try:
        fn = get_method(target)
    except Exception:  # noqa: BLE001 - Hydra wraps import errors in its own types
        raise UserError(
            f"claim {claim.id}: check._target_={target} is not a function; use one "
            "of ltr_bench.experiments.checks (threshold, within_se, above, ...)"
        ) from None
    args = {k: v for k, v in check.items() if k != "_target_"}
    try:
        inspect.signature(fn).bind({}, **args)
    except TypeError as exc:
        raise UserError(f"claim {claim.id}: check {target.rsplit('.', 1)[-1]}: {exc}") from None
    return fn


def run_spec_config(
    run: RunSpec,
    scale: str,
    seed: int,
    forwarded: list[str],
    composed: dict[tuple[str, ...], DictConfig] | None = None,
) -> DictConfig:
    """The spec ``ltr-bench experiment=<run> scale=<scale> <overrides>`` would run (same pipeline
    as :func:`~ltr_bench.experiments.common.run_experiment`, so the invocation keys agree).

    ``composed``: configs composed before, by the overrides that are not the run's own
    ``experiment.*`` ones (filled in). Runs of one experiment differ only in those, which are
    applied to a copy as Hydra applies value overrides, so a ledger of dozens of runs composes
    each experiment once."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    own = [o for o in run.overrides if _experiment_value(o)]
    base = (
        f"experiment={run.experiment}",
        f"scale={scale}",
        *(o for o in run.overrides if o not in own),
        *forwarded,
        f"seed={seed}",
    )
    try:
        if composed is None:
            cfg = compose_run_config([*base, *own])
        else:
            if base not in composed:
                composed[base] = compose_run_config(list(base))
            cfg = copy.deepcopy(composed[base])
            apply_value_overrides(cfg, own)
        return scaled_spec(cfg, scale, list(run.overrides))
    except (HydraException, OmegaConfBaseException, UserError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(
            f"experiment.runs.{run.name} ({run.command(scale)}) does not compose: {first}"
        ) from None


def _experiment_value(override: str) -> bool:
    """An ``experiment.<key>=<value>`` override (``+``/``++`` allowed, not a deletion)."""
    return override.lstrip("+").startswith("experiment.") and not override.startswith("~")


def apply_value_overrides(cfg: DictConfig, overrides: list[str]) -> None:
    """Apply value overrides to a composed config as Hydra applies them after composing (its
    parser, then ``OmegaConf.update`` with merging; ``+``/``++`` may add a key)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf

    for o in OverridesParser.create().parse_overrides(overrides):
        adding = o.is_add() or o.is_force_add()
        OmegaConf.update(cfg, o.key_or_group, o.value(), merge=True, force_add=adding)


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
        if claim.evidence:
            check_function(claim, claim.evidence["check"])
    used = {c.run for c in claims if c.run}
    composed: dict[tuple[str, ...], DictConfig] = {}
    specs = {
        piece.name: run_spec_config(piece, scale, seed, forwarded, composed)
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
