"""``claims.md``: the verdict counts, the table of claims and the runs used."""

from __future__ import annotations

from typing import Any

import pandas as pd

from ltr_bench.experiments.ledger.tables import Invocation
from ltr_bench.experiments.ledger.verdicts import FAILS, counts_line, verdict_kind

#: The note of a claim that does not hold and has no note yet.
UNEXPLAINED = (
    "does not hold, and no reason is recorded yet: give the claim a `note` in "
    "conf/experiment/claims.yaml with its likeliest reason (convention, budget, data or a real "
    "disagreement) and the evidence"
)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _with_evidence(note: str, evidence: Any) -> str:
    """A note followed by what its claim's evidence check measured (when it has one)."""
    if not isinstance(evidence, str) or not evidence:
        return note
    return f"{note} Measured ({evidence})."


def _source(inv: Invocation) -> str:
    """Where an invocation's tables came from: its bundle, else its MLflow run."""
    if inv.status == "bundle":
        return inv.provenance
    if inv.run_id:
        written = f"; bundle written: {inv.bundle.shown()}" if inv.bundle_written else ""
        return f"{inv.run_id} ({inv.mlflow_experiment}; {inv.provenance}){written}"
    return "–"


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
    notes = [
        (r.id, _with_evidence(r.note, getattr(r, "evidence", "")))
        for r in rows.itertuples(index=False)
        if getattr(r, "note", "")
    ]
    notes += [  # every claim that does not hold gets its likeliest reason in its note
        (r.id, UNEXPLAINED)
        for r in rows.itertuples(index=False)
        if verdict_kind(str(r.verdict)) == FAILS and not getattr(r, "note", "")
    ]
    if notes:  # what a reader should know to read a verdict (e.g. a convention behind a gap)
        lines += ["", "## Notes", "", *(f"- `{cid}`: {_cell(note)}" for cid, note in notes)]
    if invocations:
        lines += [
            "",
            "## Runs",
            "",
            "| run | command | status | MLflow run or results bundle | claims |",
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
                        _source(inv),
                        ", ".join(inv.claims),
                    )
                )
                + " |"
            )
    return "\n".join(lines) + "\n"
