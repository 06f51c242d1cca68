"""The sweeper's hooks into MLflow (``sweep.on_study_end``, ``sweep.on_interrupted``).

The sweeper is generic and calls them by their dotted path from ``conf/config.yaml``: a finished
Optuna study is attached to its ``sweep`` run (params, convergence metrics, best parameters,
artifacts), and the left-over RUNNING runs of interrupted trials are ended KILLED.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.tracking.links import filter_eq
from ltr_bench.tracking.params import run_params
from ltr_bench.tracking.tracker import Tracker

log = logging.getLogger(__package__)


def log_study_to_mlflow(
    config: DictConfig, study_name: str, summary: Mapping[str, Any], files: list[Path]
) -> None:
    """The ``sweep.on_study_end`` hook: attach a finished Optuna study to its MLflow ``sweep`` run.

    - params: the sweep's fixed choices (as a run's, :func:`run_params`, minus the searched
      keys), the search space (``search.<key>`` = its expression), ``sampler`` (+ its options),
      ``n_trials``, ``direction`` and ``storage`` (with any password masked by the sweeper);
    - metrics: the best value (with its SE and the number of trials within one SE of it, when
      the trials report an SE), trial counts, and the histories ``best_objective_so_far`` and
      ``trial_objective`` with step = trial number (the UI draws the convergence);
    - tags: the best parameters (``ltr.best.<key>``; tags, unlike params, may change when a
      resumed study finds a better trial); artifacts: the study's plots and ``trials.csv``;
    - its end time moves to now, so the run spans the sweep; the link to it is printed.
    """
    tracking = config.get("tracking")
    if tracking is None:
        return
    base_dir = OmegaConf.select(config, "hydra.runtime.cwd", default=None) or os.getcwd()
    tracker = Tracker.from_config(tracking, base_dir)
    if not isinstance(tracker, Tracker):  # tracking is off
        return
    tags = {
        keys.TAG_MODEL: OmegaConf.select(config, "model.name", default=None),
        keys.TAG_DATASET: OmegaConf.select(config, "dataset.name", default=None),
        keys.TAG_PROTOCOL: OmegaConf.select(config, "protocol.name", default=None),
    }
    run_id = tracker.find_or_create_sweep_run(study_name, tags)
    tracker.log_params(run_id, sweep_params(config, summary))
    for path in files:
        tracker.log_artifact(run_id, path, "study")
    tracker.log_metrics(
        run_id,
        {
            keys.BEST_OBJECTIVE: summary.get("best_value"),
            keys.BEST_OBJECTIVE + keys.SE_SUFFIX: summary.get("best_value_se"),
            keys.N_TRIALS_WITHIN_ONE_SE: summary.get("n_within_one_se"),
            keys.N_TRIALS_COMPLETE: summary.get("n_complete"),
            # with re-evaluated top trials: best_objective is the chosen trial's pooled value
            keys.SEARCH_BEST_OBJECTIVE: summary.get("search_best_value"),
            keys.N_TRIALS_REEVALUATED: len(summary["reevaluated"])
            if summary.get("reevaluated")
            else None,
            keys.N_TRIALS_FAILED: summary.get("n_failed"),
            keys.N_TRIALS_PRUNED: summary.get("n_pruned"),
        },
    )
    trials = next((p for p in files if Path(p).name == "trials.csv"), None)
    if trials is not None:
        _log_convergence(tracker, run_id, Path(trials), str(summary.get("direction", "maximize")))
    best = {f"{keys.TAG_BEST_PREFIX}{k}": v for k, v in (summary.get("best_params") or {}).items()}
    if summary.get("best_trial") is not None:
        best[keys.TAG_BEST_TRIAL] = summary["best_trial"]
    tracker.set_tags(run_id, best)
    tracker.extend(run_id)
    print(
        tracker.experiment_link(
            filter_eq(keys.TAG_STUDY, study_name),
            f"sweep '{study_name}' (sweep run, trials, refits)",
            run_id,
        ),
        flush=True,
    )
    if summary.get("dashboard"):  # the study, live or finished, in optuna-dashboard
        print(
            f"Optuna dashboard: {summary['dashboard']}   (then open http://127.0.0.1:8080)",
            flush=True,
        )


def sweep_params(config: DictConfig, summary: Mapping[str, Any]) -> dict[str, str]:
    """A sweep run's params: fixed choices, search space, sampler, budget, direction, storage."""
    space = search_space_of(config)
    fixed = {
        k: v
        for k, v in run_params(config, _hydra_choices(config)).items()
        if k not in space and not any(k.startswith(s + ".") for s in space)
    }
    out = {**fixed, **{f"search.{k}": v for k, v in space.items()}}
    sampler = _hydra_choices(config).get("hydra/sweeper/sampler") or summary.get("sampler")
    if sampler:
        out["sampler"] = str(sampler)
    options = OmegaConf.select(config, "hydra.sweeper.sampler", default=None)
    if isinstance(options, DictConfig):
        for k, v in cast(dict[str, Any], OmegaConf.to_container(options, resolve=True)).items():
            if not str(k).startswith("_"):
                out[f"sampler.{k}"] = json.dumps(v) if not isinstance(v, str) else v
    for key in ("n_trials", "direction", "storage"):
        if summary.get(key) is not None:
            out[key] = str(summary[key])
    return out


def search_space_of(config: DictConfig) -> dict[str, str]:
    """``{key: expression}`` of a sweep: ``hydra.sweeper.params`` and the command line's sweep
    overrides (``optimizer.lr=tag(log, interval(1e-4, 1e-2))``), the command line winning."""
    space: dict[str, str] = {}
    params = OmegaConf.select(config, "hydra.sweeper.params", default=None)
    if isinstance(params, DictConfig):
        space.update({str(k): str(v) for k, v in params.items()})
    task = OmegaConf.select(config, "hydra.overrides.task", default=None) or []
    try:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        for o in OverridesParser.create().parse_overrides([str(t) for t in task]):
            if o.is_sweep_override():
                space[o.key_or_group.lstrip("+~")] = str(o.input_line).split("=", 1)[1]
    except Exception as exc:  # noqa: BLE001 - the space is a description; never fail on it
        log.debug("search space not parsed: %s", exc)
    return space


def _hydra_choices(config: DictConfig) -> dict[str, str]:
    choices = OmegaConf.select(config, "hydra.runtime.choices", default=None)
    if not isinstance(choices, DictConfig):
        return {}
    return {str(k): str(v) for k, v in choices.items() if v is not None}


def _log_convergence(tracker: Tracker, run_id: str, trials_csv: Path, direction: str) -> None:
    """``trial_objective`` and ``best_objective_so_far`` per completed trial (step = trial
    number, timestamp = its completion), logging only trials not logged before (a resumed study)."""
    import pandas as pd
    from mlflow.entities import Metric

    frame = pd.read_csv(trials_csv)
    if not {"number", "value", "state"} <= set(frame.columns):
        return
    frame = frame[frame["state"] == "COMPLETE"].sort_values("number")
    done = {m.step for m in tracker.client.get_metric_history(run_id, keys.BEST_SO_FAR)}
    best = math.nan
    items = []
    for row in frame.itertuples(index=False):
        value = float(row.value)
        if not math.isfinite(value):
            continue
        better = value > best if direction == "maximize" else value < best
        best = value if (math.isnan(best) or better) else best
        step = int(row.number)
        if step in done:
            continue
        stamp = pd.to_datetime(getattr(row, "datetime_complete", None), errors="coerce")
        ms = int(stamp.timestamp() * 1000) if not pd.isna(stamp) else 0
        items += [
            Metric(keys.TRIAL_OBJECTIVE, value, ms, step),
            Metric(keys.BEST_SO_FAR, best, ms, step),
        ]
    for i in range(0, len(items), 900):
        tracker.client.log_batch(run_id, metrics=items[i : i + 900])


def mark_interrupted_runs(
    config: DictConfig, study_name: str, trials: list[int], reevaluations: Mapping[int, float]
) -> list[str]:
    """The ``sweep.on_interrupted`` hook: mark KILLED the ``trial`` runs of a study whose sweeper
    is gone -- RUNNING ones, and FINISHED ones whose result the sweeper never took (a job that
    ended just as its sweeper was killed, before the sweeper told Optuna); return their run ids.

    ``trials``: the Optuna trials the sweeper marked interrupted (a trial number is never run
    again and never told, so any RUNNING or FINISHED run of it is left over). ``reevaluations``:
    per re-evaluated trial, when its latest interrupted claim was failed (epoch seconds); a
    re-evaluation run of that trial started before then is left over, one started later belongs
    to the claim that re-runs it. A FAILED run (the job itself failed) stays FAILED.
    """
    tracking = config.get("tracking")
    if tracking is None:
        return []
    base_dir = OmegaConf.select(config, "hydra.runtime.cwd", default=None) or os.getcwd()
    tracker = Tracker.from_config(tracking, base_dir)
    if not isinstance(tracker, Tracker):  # tracking is off
        return []
    numbers = {int(n) for n in trials}
    runs = [
        run
        for status in ("RUNNING", "FINISHED")
        for run in tracker.client.search_runs(
            [tracker.experiment_id],
            f"attributes.status = '{status}' and tags.`{keys.TAG_ROLE}` = '{keys.ROLE_TRIAL}'",
            max_results=50_000,
        )
    ]
    killed = []
    for run in runs:
        tags = run.data.tags
        if (
            tags.get(keys.TAG_STUDY) != study_name
            or not str(tags.get(keys.TAG_TRIAL, "")).isdigit()
        ):
            continue
        number = int(tags[keys.TAG_TRIAL])
        if tags.get(keys.TAG_REEVALUATION) == "true":
            failed_at = reevaluations.get(number)
            if failed_at is None or run.info.start_time / 1000.0 > failed_at:
                continue
        elif number not in numbers:
            continue
        tracker.end_run(run.info.run_id, "KILLED")
        killed.append(run.info.run_id)
    if killed:
        log.warning(
            "Marked %d MLflow run(s) of interrupted trials of study '%s' KILLED.",
            len(killed),
            study_name,
        )
    return killed
