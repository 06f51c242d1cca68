"""The leaderboard (``ltr-bench experiment=leaderboard``): every model of the project on the five
MQ2008 folds at the papers' budget, as one generated page.

Its rows are the claims ledger's run ``experiment.ledger_run`` (``conf/experiment/claims.yaml``):
Table 1's five-fold variant, one ``ltr-bench experiment=table1 ...`` invocation per part, each
kept as a results bundle. Parts that are Table 1's own have the same invocation key and share its
bundles (nothing is computed twice). Per part, in order (the ledger's machinery,
:func:`~ltr_bench.experiments.ledger.prepare`): its committed bundle, else a FINISHED tracked
run with its key, else -- when ``experiment.execute`` is true and the part is one of
``experiment.parts`` (null: all) -- the part runs now (in ``<work_dir>/<scale>/<run>.part<k>-<key>``,
so an interrupted part resumes its sweeps) and its bundle is written as soon as it finishes.
A part with none of these is "not yet run" on the page, with the command that runs it.

The page (:mod:`~ltr_bench.experiments.leaderboard_page`): test metrics mean(SE), run times,
Friedman + Nemenyi, the Bayesian correlated t-test of the baseline (RankNet*) against each model,
the ledger's extension claim judged on the same rows, and the parts with their provenance.
Outputs: ``leaderboard.md``, ``leaderboard.csv``, ``bayes_<metric>.csv``, a critical-difference
diagram per significance metric (``<stem>-cd-<metric>.png``: the results page's stem, else
``leaderboard``) and, with ``++experiment.results_page=<file>``, the page with its command, commit
and machine, its diagrams beside it.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from ltr_bench.errors import UserError
from ltr_bench.experiments.checks import select
from ltr_bench.experiments.common import (
    ExperimentRun,
    compose_run_config,
    override_key,
    plain,
    scaled_spec,
    user_overrides,
)
from ltr_bench.experiments.leaderboard_page import (
    NOT_RUN,
    Entry,
    Part,
    Settings,
    bayes_table,
    complete_scores,
    metric_table,
    page_body,
    testable,
)
from ltr_bench.experiments.ledger import (
    Claim,
    Invocation,
    Ledger,
    RunSpec,
    combine,
    configured_folder,
    judge,
    markdown,
    parse_ledger,
    prepare,
    run_spec_config,
)
from ltr_bench.experiments.ledger.bundles import write_page as write_bundle_page
from ltr_bench.experiments.model_variants import model_entries
from ltr_bench.experiments.results_key import spec_classes


def _ledger_run(spec: DictConfig, scale: str) -> tuple[RunSpec, Claim, bool]:
    """The ledger's run whose parts are the rows, its claim, and whether the ledger judges at
    this scale (``judge``)."""
    ledger_spec = scaled_spec(compose_run_config(["experiment=claims", f"scale={scale}"]), scale)
    runs, claims = parse_ledger(ledger_spec)
    name, cid = str(spec.ledger_run), str(spec.claim)
    if name not in runs:
        raise UserError(
            f"experiment.ledger_run={name} is not a run of conf/experiment/claims.yaml; "
            f"choose one of [{', '.join(runs)}]"
        )
    found = [c for c in claims if c.id == cid and c.run == name]
    if not found:
        raise UserError(
            f"experiment.claim={cid} is not a claim of conf/experiment/claims.yaml on run {name}"
        )
    return runs[name], found[0], bool(ledger_spec.get("judge", True))


def _chosen(parts: Any, n: int) -> set[int]:
    """The part numbers ``experiment.parts`` names (null: all), each checked against ``n``."""
    if parts is None:
        return set(range(1, n + 1))
    chosen = {int(p) for p in plain(parts)}
    wrong = sorted(p for p in chosen if not 1 <= p <= n)
    if wrong:
        raise UserError(f"experiment.parts: {wrong} are not parts; the run has parts 1 to {n}")
    return chosen


def part_command(number: int, scale: str) -> str:
    """The command that runs one part (and keeps its bundle)."""
    quick = "" if scale == "full" else f" scale={scale}"
    return f"ltr-bench experiment=leaderboard{quick} 'experiment.parts=[{number}]' threads=1"


def _status(inv: Invocation, number: int, scale: str) -> tuple[str, str]:
    """A part's status on the page and where its tables came from (or how to get them)."""
    if inv.tables is not None:
        where = inv.bundle.summary() if inv.bundle is not None else inv.provenance
        return inv.status, where or (inv.run_id or "")
    if inv.status == "not run":
        return NOT_RUN, f"`{part_command(number, scale)}`"
    return f"{inv.status}: {inv.reason}", f"`{part_command(number, scale)}`"


@spec_classes(
    deciding=["ledger_run"],
    execution=["parts"],
    presentation=[
        "claim",
        "where",
        "metrics",
        "stat_metrics",
        "baseline",
        "rope",
        "test_train_ratio",
        "alpha",
        "intro",
        "names",
    ],
)
def run(exp: ExperimentRun) -> pd.DataFrame:
    """The driver of ``experiment=leaderboard``."""
    from ltr_bench.provenance import command_line, start, write_page
    from ltr_bench.runner import job_context

    begun = start(command_line("ltr-bench"))
    spec, scale, seed = exp.spec, str(exp.cfg.get("scale", "full")), int(exp.cfg.seed)
    forwarded = [o for o in user_overrides(["seed"]) if not override_key(o).startswith("hydra")]
    run_spec, claim, judging = _ledger_run(spec, scale)
    pieces = run_spec.pieces()
    chosen = _chosen(spec.get("parts"), len(pieces))
    bundles = configured_folder(spec.get("bundles_dir"), job_context().cwd)
    work = configured_folder(spec.get("work_dir"), job_context().cwd)
    names = {str(k): str(v) for k, v in (plain(spec.get("names")) or {}).items()}
    invocations: list[Invocation] = []
    entries: list[Entry] = []
    parts: list[Part] = []
    for k, piece in enumerate(pieces, 1):
        piece_spec = run_spec_config(piece, scale, seed, forwarded)
        mine = dataclasses.replace(claim, run=piece.name)
        ledger = Ledger({piece.name: piece}, [mine], {piece.name: piece_spec})
        go = bool(spec.execute) and k in chosen
        inv = prepare(exp, ledger, [mine], scale, seed, forwarded, go, bundles, work)[piece.name]
        invocations.append(inv)
        status, source = _status(inv, k, scale)
        labels = tuple(model_entries(piece_spec))
        parts.append(Part(k, labels, status, source))
        missing = "" if inv.tables is not None else f"{status} (part {k}: {source})"
        entries += [Entry(lb, names.get(lb, lb), k, missing) for lb in labels]
    verdict = judge(
        dataclasses.replace(claim, run=run_spec.name),
        combine(run_spec, invocations),
        judging,
        scale,
    )
    _bundle_pages(invocations, verdict, scale)
    rows = _rows(invocations, plain(spec.get("where")) or None)
    settings = Settings(
        metrics=tuple(str(m) for m in plain(spec.metrics)),
        stat_metrics=tuple(str(m) for m in plain(spec.stat_metrics)),
        baseline=str(spec.baseline),
        rope=float(spec.rope),
        test_train_ratio=float(spec.test_train_ratio),
        alpha=float(spec.alpha),
    )
    intro = str(spec.get("intro") or "").format(scale=scale)
    page = str(spec.results_page) if spec.get("results_page") else None
    figures = cd_figures(exp, rows, {e.label: e.name for e in entries}, settings, page)
    body = page_body(rows, entries, parts, settings, verdict, intro, figures)
    exp.write_text(body, "leaderboard.md")
    table = metric_table(rows, entries, settings)
    exp.write_csv(table, "leaderboard.csv")
    for metric in settings.stat_metrics:
        exp.write_csv(bayes_table(rows, settings, metric), f"bayes_{metric}.csv")
    if page:  # ++experiment.results_page=docs/results/leaderboard-mq2008.md
        write_page(page, f"{spec.title} ({scale})", body, begun.finish())
    print(f"{claim.id}: {verdict['verdict']}", flush=True)
    return table.drop(columns=["status"])


def cd_figures(
    exp: ExperimentRun,
    rows: pd.DataFrame,
    names: dict[str, str],
    settings: Settings,
    page: str | None,
) -> dict[str, str]:
    """A critical-difference diagram per significance metric, in the run's folder and (with a
    results page) beside the page, over the models that have every fold; metric -> file name."""
    from ltr_bench.report.plots import cd_diagram
    from ltr_bench.stats import friedman_nemenyi

    stem = Path(page).stem if page else "leaderboard"
    figures: dict[str, str] = {}
    for metric in settings.stat_metrics:
        complete, _ = complete_scores(rows, metric)
        if not testable(complete):
            continue
        result = friedman_nemenyi(complete.rename(index=names), alpha=settings.alpha)
        title = f"Test {metric.upper()}"
        name = f"{stem}-cd-{re.sub(r'[^a-z0-9]+', '', metric.lower())}.png"
        path = exp.save_figure(cd_diagram(result, title), name)
        if page:
            Path(page).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, Path(page).parent / name)
        figures[metric] = name
    return figures


def _rows(invocations: list[Invocation], where: Any) -> pd.DataFrame:
    """The per-fold rows (``refits.csv``) of every part that has tables, selected by ``where``."""
    frames = []
    for inv in invocations:
        if inv.tables is None:
            continue
        try:
            frames.append(inv.tables["refits.csv"])
        except KeyError:
            continue
    if not frames:
        return pd.DataFrame(columns=["model", "fold"])
    return select(pd.concat(frames, ignore_index=True), where)


def _bundle_pages(invocations: list[Invocation], verdict: dict[str, Any], scale: str) -> None:
    """A bundle written now (or lacking its page) gets its claim's verdict, as the ledger does."""
    from ltr_bench.experiments.ledger.bundles import PAGE

    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = f"Generated {stamp} by `ltr-bench experiment=leaderboard scale={scale}`."
    for inv in invocations:
        if inv.bundle is not None and (
            inv.bundle_written or not (inv.bundle.path / PAGE).is_file()
        ):
            write_bundle_page(inv.bundle, markdown(pd.DataFrame([verdict]), [inv], scale, header))
