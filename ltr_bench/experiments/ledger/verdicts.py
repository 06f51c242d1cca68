"""Judging a claim on its run's tables: the verdict kinds and how they are counted."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ltr_bench.experiments.checks import CheckError, Outcome
from ltr_bench.experiments.ledger.runs import absent_datasets
from ltr_bench.experiments.ledger.spec import Claim, check_function
from ltr_bench.experiments.ledger.tables import Invocation

HOLDS, FAILS = "holds", "does not hold"
NOT_TESTABLE, NOT_JUDGED, TOO_SMALL = "not testable here", "not judged", "too small to judge"
NOT_RUN = "not yet run"  # nothing tracked or bundled and experiment.execute=false
KINDS = (HOLDS, FAILS, NOT_TESTABLE, NOT_RUN, TOO_SMALL, NOT_JUDGED)


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
        "bundle": _bundles(inv),
        "run_status": inv.status if inv else "",
        "detail": "",
        "note": claim.note,
        "evidence": "",
    }
    missing = absent_datasets(claim.datasets) if claim.datasets else []
    if claim.not_testable:
        row["verdict"] = f"{NOT_TESTABLE}: {claim.not_testable}"
        return row
    if missing or (inv and inv.status == "absent"):
        row["verdict"] = f"{NOT_TESTABLE}: {'; '.join(missing) or (inv.reason if inv else '')}"
        return row
    if inv is not None and inv.tables is None and inv.status == "not run":
        row["verdict"] = f"{NOT_RUN}: {inv.reason}"
        return row
    if inv is None or inv.tables is None:
        row["verdict"] = f"{NOT_JUDGED}: {inv.reason if inv else 'no run'}"
        return row
    outcome = _outcome(claim, claim.check or {}, inv.tables)
    row["ours"], row["detail"] = outcome.ours, outcome.detail
    if claim.evidence:
        measured = _outcome(claim, claim.evidence["check"], inv.tables)
        row["evidence"] = f"{claim.evidence['label']}: {measured.ours}"
    if outcome.holds is None:
        row["verdict"] = f"{TOO_SMALL if not judging else NOT_JUDGED}: {outcome.detail}"
    elif not judging:
        row["verdict"] = (
            f"{TOO_SMALL} (scale={scale}; would {'hold' if outcome.holds else 'not hold'})"
        )
    else:
        row["verdict"] = HOLDS if outcome.holds else FAILS
    return row


def _outcome(claim: Claim, check: dict[str, Any], tables: Any) -> Outcome:
    """What ``check`` (the claim's own, or its evidence's) finds in ``tables``."""
    args = {k: v for k, v in check.items() if k != "_target_"}
    try:
        return check_function(claim, check)(tables, **args)
    except CheckError as exc:
        return Outcome(None, "–", str(exc))
    except Exception as exc:  # noqa: BLE001 - one bad rule must not lose a days-long ledger
        return Outcome(None, "–", f"the check failed: {type(exc).__name__}: {exc}")


def _bundles(inv: Invocation | None) -> str:
    """The results bundles the invocation was judged on (one per part), comma-separated."""
    if inv is None:
        return ""
    return ", ".join(p.bundle.shown() for p in (inv.parts or [inv]) if p.bundle is not None)


def verdict_kind(verdict: str) -> str:
    for kind in KINDS:
        if verdict == kind or verdict.startswith(kind + ":") or verdict.startswith(kind + " ("):
            return kind
    return NOT_JUDGED


def counts(rows: pd.DataFrame) -> dict[str, int]:
    kinds = rows["verdict"].map(verdict_kind) if len(rows) else pd.Series(dtype=str)
    return {k: int((kinds == k).sum()) for k in KINDS}


# The verb of a verdict kind after a count other than one ("3 hold", not "3 holds").
PLURAL = {HOLDS: "hold", FAILS: "do not hold"}


def counts_line(rows: pd.DataFrame) -> str:
    """One line of counts per verdict kind, e.g. ``63 claims: 14 hold, 1 does not hold``."""
    words = {k: k if n == 1 else PLURAL.get(k, k) for k, n in counts(rows).items()}
    return f"{len(rows)} claims: " + ", ".join(
        f"{n} {words[k]}" for k, n in counts(rows).items() if n
    )
