"""Read the tracked fold runs of one MLflow experiment into a tidy DataFrame (no re-training).

Only runs tagged ``ltr.role = fold`` count (one outer fold / split each); protocol parents,
sweep and trial runs are ignored. Unfinished runs are skipped, and when the same
(model, dataset, protocol, eval, fold) was tracked several times with the same seed (tag
``ltr.seed``) the latest finished run wins. Runs of one fold with different seeds (e.g. a refit
with ``seed=0,1,2,3``) are averaged: the fold's value is the mean over its seeds, so seed noise
does not pass for a difference between folds or models. Every such decision is recorded as a
one-line note for the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ltr_bench import tracking
from ltr_bench import tracking_keys as tk
from ltr_bench.errors import UserError

KEY_COLUMNS = ["protocol", "eval", "dataset", "model", "fold"]
# Columns of a FoldRuns frame that are not metrics.
INFO_COLUMNS = [
    "run_id",
    "n_train",
    "n_test",
    "start_time",
    "end_time",
    "seed",
    "n_seeds",
    "hardware",
]
UNKNOWN_HARDWARE = "unknown hardware (runs without the ltr.hardware tag)"
TIME_COLUMNS = (tk.TIME_READ, tk.TIME_FIT, tk.TIME_EVAL)
_TAG_COLUMNS = {
    "model": tk.TAG_MODEL,
    "dataset": tk.TAG_DATASET,
    "protocol": tk.TAG_PROTOCOL,
    "eval": tk.TAG_EVAL,
    "fold": tk.TAG_FOLD,
    "seed": tk.TAG_SEED,
}


@dataclass
class FoldRuns:
    """One row per (protocol, eval, dataset, model, fold): its latest run, or its runs' mean over seeds.

    Columns: ``run_id, protocol, eval, dataset, model, fold (int), seed (the seeds averaged,
    comma-separated), n_seeds, n_train, n_test, start_time, end_time, hardware`` (the run's
    ``ltr.hardware`` summary, which run times depend on) plus one column per logged metric, named
    by its MLflow key (``test/ndcg_at_10``, ``time_fit_s``, ...).
    """

    frame: pd.DataFrame
    experiment_id: str
    experiment_name: str
    notes: list[str] = field(default_factory=list)

    def metric_keys(self) -> list[str]:
        """The metric columns present (MLflow keys)."""
        fixed = set(KEY_COLUMNS) | set(INFO_COLUMNS)
        return [c for c in self.frame.columns if c not in fixed]


def check_store(tracking_uri: str) -> None:
    """Refuse a ``sqlite:///`` URI whose file does not exist (MLflow would silently create it)."""
    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.is_file():
            raise UserError(
                f"--tracking-uri {tracking_uri}: no MLflow store at {path}; "
                "run the benchmark first or pass the store's URI."
            )


def find_experiment(tracking_uri: str, name: str) -> str:
    """Id of the experiment called ``name``; UserError listing the known names if absent."""
    check_store(tracking_uri)
    exp_id, known = tracking.find_experiment(tracking_uri, name)
    if exp_id is None:
        raise UserError(
            f"--experiment {name!r}: no such MLflow experiment in {tracking_uri} "
            f"(known: {', '.join(known) or 'none'})."
        )
    return exp_id


def _role_filter(role: str) -> str:
    return f"tags.`{tk.TAG_ROLE}` = '{role}'"


def collect_fold_runs(
    tracking_uri: str,
    experiment: str,
    protocol: str | None = None,
    eval_name: str | None = None,
) -> FoldRuns:
    """Read the finished fold runs of ``experiment`` (optionally one protocol / eval) via
    ``mlflow.search_runs``; raise UserError when there are none."""
    exp_id = find_experiment(tracking_uri, experiment)
    raw = tracking.runs_frame(tracking_uri, exp_id, _role_filter(tk.ROLE_FOLD))
    notes: list[str] = []
    what = f"experiment {experiment!r}"
    if raw.empty:
        raise UserError(
            f"--experiment {experiment!r} has no fold runs (tag {tk.TAG_ROLE}=fold) yet."
        )
    frame = _tidy(raw)
    for column, value, option in (
        ("protocol", protocol, "--protocol"),
        ("eval", eval_name, "--eval"),
    ):
        if value is not None:
            known = sorted(frame[column].dropna().unique())
            frame = frame[frame[column] == value]
            if frame.empty:
                raise UserError(
                    f"{option} {value!r}: {what} has no fold runs with it (known: {', '.join(known)})."
                )
    unfinished = frame["status"] != "FINISHED"
    if unfinished.any():
        counts = frame.loc[unfinished, "status"].value_counts()
        notes.append(
            "Ignored unfinished fold runs: "
            + ", ".join(f"{n} {s}" for s, n in counts.items())
            + "."
        )
        frame = frame[~unfinished]
    if frame.empty:
        raise UserError(f"--experiment {experiment!r} has no finished fold runs yet.")
    bad = frame["fold"].isna() | frame[["model", "dataset"]].isna().any(axis=1)
    if bad.any():
        notes.append(
            f"Ignored {int(bad.sum())} fold run(s) without {tk.TAG_MODEL}/{tk.TAG_DATASET}/"
            f"{tk.TAG_FOLD} tags: {', '.join(frame.loc[bad, 'run_id'])}."
        )
        frame = frame[~bad]
    frame = frame.sort_values(["end_time", "start_time"], ascending=False, kind="stable")
    dup = frame.duplicated(KEY_COLUMNS + ["seed"], keep="first")
    if dup.any():
        keys = frame.loc[dup, KEY_COLUMNS].drop_duplicates()
        listed = "; ".join(
            f"{r.model} on {r.dataset} ({r.protocol}/{r.eval}) fold {r.fold}"
            for r in keys.itertuples()
        )
        notes.append(
            f"{int(dup.sum())} older duplicate fold run(s) superseded by the latest finished one: {listed}."
        )
        frame = frame[~dup]
    frame = mean_over_seeds(frame.drop(columns=["status"]), notes)
    frame = frame.sort_values(KEY_COLUMNS, kind="stable")
    return FoldRuns(frame.reset_index(drop=True), exp_id, experiment, notes)


def mean_over_seeds(frame: pd.DataFrame, notes: list[str]) -> pd.DataFrame:
    """One row per (protocol, eval, dataset, model, fold): metrics and run times averaged over
    the rows' seeds (column ``seed``: the seeds, comma-separated; ``n_seeds``). The run id,
    query counts and end time are the latest run's; the start time the earliest. Adds a note
    per (model, dataset, setting) that was averaged."""
    frame = frame.sort_values(["end_time", "start_time"], ascending=False, kind="stable")
    metrics = [c for c in frame.columns if c not in set(KEY_COLUMNS) | set(INFO_COLUMNS)]
    agg: dict[str, object] = {c: "mean" for c in metrics}
    agg.update(
        run_id="first",
        n_train="first",
        n_test="first",
        start_time="min",
        end_time="max",
        seed=lambda s: ",".join(sorted(map(str, s), key=_seed_order)),
    )
    if "hardware" in frame:
        agg["hardware"] = lambda s: " + ".join(sorted(set(map(str, s))))
    out = frame.groupby(KEY_COLUMNS, dropna=False, sort=False).agg(agg).reset_index()
    out["n_seeds"] = out["seed"].str.count(",") + 1
    _refuse_mixed_hardware_times(out, notes)
    several = out[out["n_seeds"] > 1]
    for (protocol, eval_name, dataset, model), cells in several.groupby(
        ["protocol", "eval", "dataset", "model"], sort=True
    ):
        seeds = sorted({s for cell in cells["seed"] for s in cell.split(",")}, key=_seed_order)
        lo, hi = int(cells["n_seeds"].min()), int(cells["n_seeds"].max())
        per_fold = f"{lo}" if lo == hi else f"{lo}-{hi}"
        notes.append(
            f"{model} on {dataset} ({protocol}/{eval_name}): {len(cells)} fold(s) are each the mean "
            f"over {per_fold} runs with seeds {', '.join(seeds)}."
        )
    return out[[c for c in frame.columns if c in out.columns] + ["n_seeds"]]


def _refuse_mixed_hardware_times(out: pd.DataFrame, notes: list[str]) -> None:
    """Blank the run times of folds whose seeds ran on different hardware (a mean of those
    times describes no machine), with a note; their metrics are still averaged."""
    if "hardware" not in out:
        return
    mixed = out["hardware"].str.contains(" + ", regex=False)
    times = [c for c in TIME_COLUMNS if c in out]
    if not mixed.any() or not times:
        return
    out.loc[mixed, times] = float("nan")
    cells = out[mixed]
    listed = "; ".join(
        f"{r.model} on {r.dataset} fold {r.fold} ({r.hardware})" for r in cells.itertuples()
    )
    notes.append(
        f"Run times of {int(mixed.sum())} fold(s) left out: their seeds ran on different "
        f"hardware, and times from different hardware are never averaged: {listed}."
    )


def _seed_order(seed: str) -> tuple[int, float, str]:
    try:
        return (0, float(seed), seed)
    except ValueError:
        return (1, 0.0, seed)


def _tidy(raw: pd.DataFrame) -> pd.DataFrame:
    """search_runs columns (``tags.x``, ``params.x``, ``metrics.x``) -> the FoldRuns layout."""
    out = pd.DataFrame({"run_id": raw["run_id"], "status": raw["status"]})
    for column, tag in _TAG_COLUMNS.items():
        col = raw.get(f"tags.{tag}")
        out[column] = col if col is not None else pd.Series(pd.NA, index=raw.index, dtype=object)
    out["protocol"] = out["protocol"].fillna("?")
    out["eval"] = out["eval"].fillna("?")
    out["seed"] = out["seed"].fillna("?")  # runs tracked without a seed tag count as one seed
    hardware = raw.get(f"tags.{tk.TAG_HARDWARE}")
    out["hardware"] = hardware if hardware is not None else pd.Series(pd.NA, index=raw.index)
    out["hardware"] = out["hardware"].fillna(UNKNOWN_HARDWARE).astype(str)
    out["fold"] = pd.to_numeric(out["fold"], errors="coerce").astype("Int64")
    for column, tag, param in (
        ("n_train", tk.TAG_N_TRAIN_QUERIES, tk.PARAM_N_TRAIN_QUERIES),
        ("n_test", tk.TAG_N_TEST_QUERIES, tk.PARAM_N_TEST_QUERIES),
    ):
        # tags since the params became the run's choices only; params in older stores
        values = pd.Series(float("nan"), index=raw.index)
        for col in (raw.get(f"tags.{tag}"), raw.get(f"params.{param}")):
            if col is not None:
                values = values.fillna(pd.to_numeric(col, errors="coerce"))
        out[column] = values
    out["start_time"] = raw["start_time"]
    out["end_time"] = raw["end_time"]
    metric_cols = [c for c in raw.columns if c.startswith("metrics.")]
    for c in metric_cols:
        out[c.removeprefix("metrics.")] = pd.to_numeric(raw[c], errors="coerce")
    return out
