"""Where a Table 1 run's time went: per variant, dataset and model, the sweep's search and
re-evaluation seconds (read from each sweep's log, ``sweeps/<variant>/<dataset>/<model>/sweep.log``
in the experiment's output folder) and the refit's training seconds (its ``results.json``).

    .venv/bin/python benchmarks/table1_timing.py outputs/<date>/<time>            # every study
    .venv/bin/python benchmarks/table1_timing.py outputs/<date>/<time> --study dataset.fold=1

``--study S`` keeps the studies whose name ends with ``S`` and the refits whose config has that
override (``dataset.fold=1``: one outer fold), so that a run of one fold can be compared with the
same fold of a five-fold run. Refit seconds are the refit runs' own ``time_total_s``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def study_phase_times(log: str) -> dict[str, dict[str, float]]:
    """Seconds a sweep log's studies spent searching and re-evaluating, per study name.

    Read from the sweeper's timestamped lines: a study searches from ``Study '<name>' in <storage>``
    to its first ``Re-evaluating trial(s)`` line (or ``Best trial``) and re-evaluates from there to
    ``Best trial``."""
    import datetime as dt
    import re

    stamp = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[HYDRA\] (.*)$")
    studies: dict[str, dict[str, float]] = {}
    study, phase, since = None, None, 0.0
    for line in log.splitlines():
        m = stamp.match(line)
        if not m:
            continue
        t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        text = m.group(2)
        opened = re.match(r"Study '([^']*)' in ", text)
        starts = (
            "search"
            if opened
            else "reevaluation"
            if text.startswith("Re-evaluating trial(s)") and phase == "search"
            else None
        )
        if phase and (starts or text.startswith("Best trial")):
            studies[study][phase] += t - since
            phase = None
        if opened:
            study = opened.group(1)
            studies.setdefault(study, {"search": 0.0, "reevaluation": 0.0})
        if starts:
            phase, since = starts, t
    return studies


def _config_matches(config: dict, study: str) -> bool:
    """Whether a refit's config has the override ``study`` ends with (``dataset.fold=1``)."""
    key, _, value = study.rpartition("-")[2].partition("=")
    node: object = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return str(node) == value


def timings(out: Path, study: str | None = None) -> list[dict]:
    """One row per (variant, dataset, model) sweep under ``out/sweeps``."""
    rows = []
    for log in sorted(out.glob("sweeps/*/*/*/sweep.log")):
        variant, dataset, model = log.parent.relative_to(out / "sweeps").parts
        phases = {
            k: v
            for k, v in study_phase_times(log.read_text(errors="replace")).items()
            if study is None or k.endswith(study)
        }
        refit = 0.0
        for res in log.parent.glob("refit/**/results.json"):
            data = json.loads(res.read_text())
            if study is None or _config_matches(data.get("config") or {}, study):
                refit += data["times"].get("time_total_s", 0.0)
        rows.append(
            {
                "variant": variant,
                "dataset": dataset,
                "model": model,
                "studies": len(phases),
                "search_s": sum(p["search"] for p in phases.values()),
                "reevaluation_s": sum(p["reevaluation"] for p in phases.values()),
                "refit_s": refit,
            }
        )
    return rows


def worker_budget(store: Path, wall_s: float, workers: int) -> dict[str, float]:
    """Where the workers' time of a Table 1 run went, from its MLflow store (``store``): the
    fitting (the timed read, fit and evaluation of every sweep job and refit fold, each run's
    ``time_*_s`` metrics) against the worker-seconds the run had (``workers`` x ``wall_s``).
    ``fitting / workers`` is the run's floor: its wall time if nothing but the fits took time and
    the workers never waited for one another."""
    import sqlite3

    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    role = "join tags t on t.run_uuid = {}.run_uuid where t.key = 'ltr.role' and t.value = ?"
    budget: dict[str, float] = {}
    for name in ("trial", "fold"):
        n, in_runs = con.execute(
            "select count(*), coalesce(sum(r.end_time - r.start_time), 0) from runs r "
            + role.format("r")
            + " and r.end_time is not null",
            (name,),
        ).fetchone()
        (timed,) = con.execute(
            "select coalesce(sum(m.value), 0) from metrics m "
            + role.format("m")
            + " and m.key in ('time_read_s', 'time_fit_s', 'time_eval_s')",
            (name,),
        ).fetchone()
        budget[f"{name}_runs"] = n
        budget[f"{name}_in_runs_s"] = in_runs / 1000
        budget[f"{name}_fitting_s"] = float(timed)
    con.close()
    fitting = budget["trial_fitting_s"] + budget["fold_fitting_s"]
    in_runs = budget["trial_in_runs_s"] + budget["fold_in_runs_s"]
    return {
        **budget,
        "fitting_s": fitting,
        "floor_s": fitting / workers,
        "rest_of_runs_s": in_runs - fitting,
        "outside_runs_s": workers * wall_s - in_runs,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out", type=Path, help="the table1 experiment's output folder")
    ap.add_argument("--study", default=None, help="only studies whose name ends with this")
    args = ap.parse_args()
    rows = timings(args.out, args.study)
    if not rows:
        raise SystemExit(f"no sweeps/*/*/*/sweep.log under {args.out}")
    print(
        f"{'variant':<16}{'dataset':<12}{'model':<15}{'studies':>8}{'search':>9}{'re-eval':>9}{'refit':>8}{'total':>9}"
    )
    for r in rows:
        total = r["search_s"] + r["reevaluation_s"] + r["refit_s"]
        print(
            f"{r['variant']:<16}{r['dataset']:<12}{r['model']:<15}{r['studies']:>8}{r['search_s']:>8.0f}s"
            f"{r['reevaluation_s']:>8.0f}s{r['refit_s']:>7.0f}s{total:>8.0f}s"
        )
    total = sum(r["search_s"] + r["reevaluation_s"] + r["refit_s"] for r in rows)
    print(
        f"{'all':<51}{sum(r['search_s'] for r in rows):>8.0f}s{sum(r['reevaluation_s'] for r in rows):>8.0f}s"
        f"{sum(r['refit_s'] for r in rows):>7.0f}s{total:>8.0f}s"
    )


if __name__ == "__main__":
    main()
