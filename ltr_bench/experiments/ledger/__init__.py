"""The claims ledger (``ltr-bench experiment=claims``): the papers' quantitative statements, each
checked against the outputs of the experiment that tests it.

``conf/experiment/claims.yaml`` lists ``runs`` (named experiment invocations: ``experiment`` +
``overrides`` + the ``datasets`` they need; optionally ``parts``, one invocation per part, judged
on the row-wise union of the parts' tables) and ``claims`` (id, source, statement, the paper's
value, the run that tests it and a ``check``: a ``_target_`` function of
:mod:`ltr_bench.experiments.checks` with its arguments; or ``not_testable: <reason>``).

The driver validates the whole ledger first (every run's spec composes, every check's arguments
fit its function), then runs each needed invocation once, however many claims read it:

- a results bundle with the invocation's key under ``experiment.bundles_dir`` (committed under
  ``docs/results/bundles/``, see :mod:`~ltr_bench.experiments.ledger.bundles`) is read first:
  its verified CSV tables, nothing trained, no data needed;
- a dataset missing from the data root makes its claims "not testable here";
- a FINISHED experiment run in the MLflow store with the same invocation key (tag
  ``ltr.experiment_key``, see :func:`~ltr_bench.experiments.common.invocation_key`: experiment,
  scale, seed, resolved spec, results-deciding overrides) is re-used: its CSV artifacts are read
  back, nothing is trained;
- otherwise ``ltr-bench experiment=<name> scale=<scale> <overrides>`` runs in a subprocess, with
  the command line's other overrides (threads, tracking, seed) passed on. It works in
  ``<experiment.work_dir>/<scale>/<run>-<key>/`` (log beside it, ``<run>-<key>.log``; a part is
  the run ``<run>.part<k>``): the same folder whenever the same invocation runs, so a ledger
  interrupted mid-run (Ctrl-C, a machine that went away) resumes that run's sweeps where they
  stopped when started again (the sweeps' Optuna studies live there). With ``work_dir: null``
  it works in ``runs/<run>/`` of the ledger's own output folder, from scratch each time. With
  ``experiment.in_process`` (the ``quick`` scale) the invocation runs inside the ledger's process
  instead (:mod:`~ltr_bench.experiments.ledger.in_process`): same outputs and key, no new
  process and imports per run.
  ``experiment.execute=false`` only re-reads (claims with nothing to read: "not yet run").

Each invocation that ran, or was re-used from the MLflow store without a bundle, writes its
bundle (when ``experiment.bundles_dir`` is set): its tables, ``provenance.json`` and, once the
claims are judged, a ``claims.md`` of the claims that read it.

Outputs: ``claims.md`` (statement | paper's value | ours | verdict, and the runs used),
``claims.csv`` (the same plus the check and run ids), ``summary.csv`` (verdict counts), all also
artifacts of the ledger's MLflow run. At a scale whose spec says ``judge: false`` (``quick``) a
verdict reads "too small to judge" with what it would have been.
"""

from __future__ import annotations

from datetime import UTC

import pandas as pd

from ltr_bench.experiments.common import ExperimentRun, override_key, plain, user_overrides
from ltr_bench.experiments.ledger.bundles import PAGE as BUNDLE_PAGE
from ltr_bench.experiments.ledger.bundles import Bundle, configured_folder, read_bundle
from ltr_bench.experiments.ledger.bundles import write_page as write_bundle_page
from ltr_bench.experiments.ledger.pages import markdown
from ltr_bench.experiments.ledger.runs import (
    absent_datasets,
    execute,
    find_tracked,
    prepare,
    provenance,
)
from ltr_bench.experiments.ledger.spec import (
    CLAIM_KEYS,
    RUN_KEYS,
    Claim,
    Ledger,
    RunSpec,
    check_function,
    parse_ledger,
    run_spec_config,
    select_claims,
    validate_ledger,
)
from ltr_bench.experiments.ledger.tables import Invocation, Tables, UnionTables, combine
from ltr_bench.experiments.ledger.verdicts import (
    FAILS,
    HOLDS,
    NOT_JUDGED,
    NOT_RUN,
    NOT_TESTABLE,
    TOO_SMALL,
    counts,
    counts_line,
    judge,
    verdict_kind,
)
from ltr_bench.experiments.results_key import spec_classes


@spec_classes(
    deciding=["runs"],
    # the parts' anchors reach the key through `runs`; the claims are judged from the tables
    presentation=["claims", "only", "judge", "table1_parts", "holdout_parts", "leaderboard_parts"],
)
def run(exp: ExperimentRun) -> pd.DataFrame:
    """The driver of ``experiment=claims``."""
    from datetime import datetime

    from ltr_bench.provenance import command_line, start, write_page
    from ltr_bench.runner import job_context

    begun = start(command_line("ltr-bench"))  # the commit and the load as the ledger starts
    spec = exp.spec
    scale = str(exp.cfg.get("scale", "full"))
    seed = int(exp.cfg.seed)
    forwarded = [o for o in user_overrides(["seed"]) if not override_key(o).startswith("hydra")]
    ledger = validate_ledger(spec, scale, seed, forwarded)
    claims = select_claims(ledger.claims, [str(o) for o in plain(spec.get("only") or [])])
    judging = bool(spec.get("judge", True))
    bundles = configured_folder(spec.get("bundles_dir"), job_context().cwd)
    work = configured_folder(spec.get("work_dir"), job_context().cwd)
    invocations = prepare(
        exp, ledger, claims, scale, seed, forwarded, bool(spec.get("execute", True)), bundles, work
    )
    rows = pd.DataFrame([judge(c, invocations.get(c.run or ""), judging, scale) for c in claims])
    distinct = list({id(p): p for i in invocations.values() for p in (i.parts or [i])}.values())
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    header = (
        f"Generated {stamp} by `ltr-bench experiment=claims scale={scale}` "
        f"(seed {seed}). Verdict rules: `claims.csv` (column `check`) and "
        "`conf/experiment/claims.yaml`; sigma = combined standard error of two means."
    )
    for inv in distinct:  # each bundle written now (or lacking it) gets its claims' verdicts
        if inv.bundle is not None and (
            inv.bundle_written or not (inv.bundle.path / BUNDLE_PAGE).is_file()
        ):
            mine = rows[rows["id"].isin(inv.claims)]
            write_bundle_page(inv.bundle, markdown(mine, [inv], scale, header))
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


__all__ = [
    "CLAIM_KEYS",
    "FAILS",
    "HOLDS",
    "NOT_JUDGED",
    "NOT_RUN",
    "NOT_TESTABLE",
    "RUN_KEYS",
    "TOO_SMALL",
    "Bundle",
    "Claim",
    "Invocation",
    "Ledger",
    "RunSpec",
    "Tables",
    "UnionTables",
    "absent_datasets",
    "configured_folder",
    "check_function",
    "combine",
    "counts",
    "counts_line",
    "execute",
    "find_tracked",
    "judge",
    "markdown",
    "parse_ledger",
    "prepare",
    "provenance",
    "read_bundle",
    "run",
    "run_spec_config",
    "select_claims",
    "validate_ledger",
    "verdict_kind",
]
