"""The leaderboard (``ltr-bench experiment=leaderboard``): every model of the project swept at the
papers' budget on the chosen data, as one page with Friedman + Nemenyi, critical-difference
diagrams and the Bayesian comparison with a baseline.

The rows come from Table 1's driver (``experiment=table1``): the parts are Table 1 invocations
planned by :mod:`~ltr_bench.experiments.leaderboard_plan` from ``experiment.models``, the command
line's ``dataset=...`` (and ``dataset.*``), ``experiment.variant`` / ``experiment.n_splits`` (the
protocol) and ``experiment.n_trials``. Per part, in order (the claims ledger's machinery,
:func:`~ltr_bench.experiments.ledger.prepare`): a bundle made with its results key, else a
FINISHED tracked run with its key, else -- when ``experiment.execute`` is true and the part is one
of ``experiment.parts`` (null: all) -- the part runs now, in ``<work_dir>/<scale>/<part>-<key>``,
and its bundle is written as soon as it finishes. The same command run again finds the finished
parts' bundles and resumes an interrupted part's sweeps in its folder (their Optuna studies live
there). A part that fails, or has nothing yet, is a row with its one sentence; the page is
written all the same, and such rows stay out of the tests.

On MQ2008 at the papers' budget the parts are the claims ledger's run ``experiment.ledger_run``
(``conf/experiment/claims.yaml``), read from and kept in the committed bundles
(``experiment.bundles_dir``); only those are ever written under ``docs/``. Other parts keep
their work and bundles under ``experiment.work_dir`` (``multirun/leaderboard``).

Outputs: ``leaderboard.md`` (the page with its command, commit, machine and wall time),
``leaderboard.csv``, ``bayes_<metric>.csv`` and a critical-difference diagram per significance
metric (``<stem>-cd-<metric>.png``: the results page's stem, else ``leaderboard``); with
``++experiment.results_page=<file>`` the page there too, its diagrams beside it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
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
    override_key,
    plain,
    user_overrides,
)
from ltr_bench.experiments.leaderboard_board import Board, plan_board
from ltr_bench.experiments.leaderboard_page import (
    NOT_RUN,
    Entry,
    Part,
    Settings,
    bayes_table,
    complete_scores,
    metric_table,
    page_body,
    split_ratio,
    testable,
)
from ltr_bench.experiments.leaderboard_plan import every_ledger_part, one_sentence
from ltr_bench.experiments.leaderboard_progress import Eta
from ltr_bench.experiments.ledger import (
    Claim,
    Invocation,
    Ledger,
    combine,
    configured_folder,
    judge,
    markdown,
    prepare,
    run_spec_config,
)
from ltr_bench.experiments.ledger.bundles import write_page as write_bundle_page
from ltr_bench.experiments.model_variants import model_entries
from ltr_bench.experiments.results_key import spec_classes

#: The leaderboard's own options that choose its parts: repeated in the command that runs one.
PLAN_KEYS = (
    "dataset",
    "experiment.models",
    "experiment.model_variants",
    "experiment.variant",
    "experiment.n_splits",
    "experiment.n_trials",
    "experiment.work_dir",
)


def part_command(number: int, scale: str, again: list[str] | None = None) -> str:
    """The command that runs one part (and keeps its bundle)."""
    quick = "" if scale == "full" else f" scale={scale}"
    chosen = "".join(f" {shlex.quote(o)}" for o in again or [])
    return (
        f"ltr-bench experiment=leaderboard{quick}{chosen} 'experiment.parts=[{number}]' threads=1"
    )


def _chosen(parts: Any, n: int) -> set[int]:
    """The part numbers ``experiment.parts`` names (null: all), each checked against ``n``."""
    if parts is None:
        return set(range(1, n + 1))
    chosen = {int(p) for p in plain(parts)}
    wrong = sorted(p for p in chosen if not 1 <= p <= n)
    if wrong:
        raise UserError(f"experiment.parts: {wrong} are not parts; the run has parts 1 to {n}")
    return chosen


def _status(inv: Invocation, command: str) -> tuple[str, str]:
    """A part's status on the page and where its tables came from (or how to get them)."""
    if inv.tables is not None:
        where = inv.bundle.summary() if inv.bundle is not None else inv.provenance
        return inv.status, where or (inv.run_id or "")
    if inv.status == "not run":
        return NOT_RUN, f"`{command}`"
    if inv.status == "failed":
        return f"failed: {one_sentence(inv.reason)}", f"`{command}`"
    return f"{inv.status}: {inv.reason}", f"`{command}`"


@dataclasses.dataclass
class Collected:
    """What the parts gave: their invocations (None: the part's spec did not compose), the page's
    entries and parts."""

    invocations: list[Invocation | None] = dataclasses.field(default_factory=list)
    entries: list[Entry] = dataclasses.field(default_factory=list)
    parts: list[Part] = dataclasses.field(default_factory=list)


def _collect(exp: ExperimentRun, board: Board, forwarded: list[str], again: list[str]) -> Collected:
    """Every part's tables, run where missing (and chosen), with a progress line per part."""
    from ltr_bench.runner import job_context

    spec, scale, seed = exp.spec, board.scale, int(exp.cfg.seed)
    chosen = _chosen(spec.get("parts"), len(board.parts))
    work = configured_folder(spec.get("work_dir"), job_context().cwd)
    names = {str(k): str(v) for k, v in (plain(spec.get("names")) or {}).items()}
    units = board.protocol.units
    eta = Eta(total=sum(len(p.labels) for p in board.parts) * units)
    out = Collected()
    composed: dict[tuple[str, ...], Any] = {}  # each experiment composed once for every part
    for part in board.parts:
        k, labels = part.number, part.labels
        command = part_command(k, scale, [] if part.ledger else again)
        if spec.execute:
            line = eta.line(k, len(board.parts), ", ".join(labels), units)
            print(f"leaderboard {line}", flush=True)
        if part.ledger:
            bundles, where = board.ledger_bundles, board.ledger_work
        else:
            bundles, where = (work / "bundles" if work else None), work
        try:
            piece_spec = run_spec_config(part.run, scale, seed, forwarded, composed)
        except UserError as exc:  # e.g. a model label that is no model config
            out.invocations.append(None)
            status = f"failed: {one_sentence(str(exc))}"
            out.parts.append(Part(k, labels, status, f"`{command}`"))
            out.entries += [
                Entry(lb, names.get(lb, lb), k, f"{status} (part {k})") for lb in labels
            ]
            continue
        claim = board.claim if part.ledger and board.claim is not None else _no_claim()
        mine = dataclasses.replace(claim, run=part.run.name)
        ledger = Ledger({part.run.name: part.run}, [mine], {part.run.name: piece_spec})
        go = bool(spec.execute) and k in chosen
        inv = prepare(exp, ledger, [mine], scale, seed, forwarded, go, bundles, where)
        inv_k = inv[part.run.name]
        out.invocations.append(inv_k)
        status, source = _status(inv_k, command)
        out.parts.append(Part(k, tuple(model_entries(piece_spec)), status, source))
        missing = "" if inv_k.tables is not None else f"{status} (part {k}: {source})"
        out.entries += [Entry(lb, names.get(lb, lb), k, missing) for lb in labels]
        if inv_k.tables is not None:
            wall = float(inv_k.bundle.record["wall_s"]) if inv_k.bundle is not None else None
            eta.finished(len(labels) * units, wall)
    return out


def _no_claim() -> Claim:
    """The claim a part outside the ledger carries: none to judge (the ledger's machinery asks
    for one per invocation)."""
    return Claim("leaderboard", "", "", "", None, None)


@spec_classes(
    deciding=["ledger_run", "models", "model_variants", "variant", "n_splits", "n_trials"],
    execution=["parts"],
    presentation=[
        "claim",
        "metrics",
        "stat_metrics",
        "baseline",
        "rope",
        "test_train_ratio",
        "alpha",
        "intro",
        "heading",
        "names",
    ],
)
def run(exp: ExperimentRun) -> pd.DataFrame:
    """The driver of ``experiment=leaderboard``."""
    from ltr_bench.provenance import command_line, start, write_page

    begun = start(command_line("ltr-bench"))
    spec, scale = exp.spec, str(exp.cfg.get("scale", "full"))
    user = [o for o in user_overrides(["seed"]) if not override_key(o).startswith("hydra")]
    board = plan_board(exp, user)
    forwarded = [o for o in user if override_key(o).split(".")[0] != "dataset"]
    again = [o for o in user if override_key(o).split(".")[0] == "dataset"] + [
        o for o in _experiment_overrides() if override_key(o) in PLAN_KEYS
    ]
    got = _collect(exp, board, forwarded, again)
    found = [i for i in got.invocations if i is not None]
    verdict = None
    if board.claim is not None and every_ledger_part(board.parts, board.ledger):
        assert board.ledger is not None
        ledger_invs = [i for p, i in zip(board.parts, got.invocations) if p.ledger and i]
        verdict = judge(
            dataclasses.replace(board.claim, run=board.ledger.name),
            combine(board.ledger, ledger_invs),
            board.judging,
            scale,
        )
        _bundle_pages(ledger_invs, verdict, scale)
    shown = [e.label for e in got.entries]
    rows = _rows(found, board.where, shown)
    settings = _settings(spec, rows, board, verdict is not None)
    page = str(spec.results_page) if spec.get("results_page") else None
    figures = cd_figures(exp, rows, {e.label: e.name for e in got.entries}, settings, page)
    intro = str(spec.get("intro") or "").format(**board.words)
    body = page_body(rows, got.entries, got.parts, settings, verdict, intro, figures)
    title = f"{str(spec.heading).format(**board.words)} ({scale})"
    measured = begun.finish()
    exp.log_file(write_page(exp.path("leaderboard.md"), title, body, measured))
    table = metric_table(rows, got.entries, settings)
    exp.write_csv(table, "leaderboard.csv")
    for metric in settings.stat_metrics:
        exp.write_csv(bayes_table(rows, settings, metric), f"bayes_{metric}.csv")
    if page:  # ++experiment.results_page=docs/results/leaderboard-mq2008.md
        write_page(page, title, body, measured)
    if verdict is not None:
        print(f"{board.claim.id if board.claim else ''}: {verdict['verdict']}", flush=True)
    print(f"leaderboard: {exp.path('leaderboard.md')}", flush=True)
    return table.drop(columns=["status"])


def _experiment_overrides() -> list[str]:
    """The command line's ``experiment.*`` overrides."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    return [
        o for o in HydraConfig.get().overrides.task if override_key(o).startswith("experiment.")
    ]


def _settings(spec: DictConfig, rows: pd.DataFrame, board: Board, judged: bool) -> Settings:
    """What the page shows; the Nadeau-Bengio ratio: ``experiment.test_train_ratio`` when set,
    else the rows' own split sizes, else (the ledger's rows) its claim's, else the protocol's."""
    ratio, note = spec.get("test_train_ratio"), " (experiment.test_train_ratio)"
    if ratio is None:
        ratio, note = split_ratio(rows), ", the mean over the splits' own query counts"
    if ratio is None and judged and board.claim is not None and board.claim.check:
        ratio, note = board.claim.check.get("test_train_ratio"), ""
    if ratio is None:
        ratio, note = board.nominal_ratio, f", {board.nominal_note}"
    return Settings(
        metrics=tuple(str(m) for m in plain(spec.metrics)),
        stat_metrics=tuple(str(m) for m in plain(spec.stat_metrics)),
        baseline=str(spec.baseline),
        rope=float(spec.rope),
        test_train_ratio=float(ratio),
        alpha=float(spec.alpha),
        ratio_note=note,
    )


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


def _rows(invocations: list[Invocation], where: Any, labels: list[str]) -> pd.DataFrame:
    """The per-fold rows (``refits.csv``) of every part that has tables, selected by ``where``
    and to the page's models (a ledger part may hold models that were not chosen)."""
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
    rows = select(pd.concat(frames, ignore_index=True), where)
    return rows[rows["model"].astype(str).isin(labels)].reset_index(drop=True)


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
