"""The sweep's summary: ``optimization_results.yaml`` (best trial, counts, storage) per study,
with the re-evaluated selection when there is one, and the log lines about the best."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

log = logging.getLogger("ltr_bench.sweeper.sweeper")

RESULTS_FILE = "optimization_results.yaml"


def summarize(
    study: Any, budget: int, url: str, space: Any, variant: list[str], direction: str
) -> dict[str, Any]:
    """One study's entry of ``optimization_results.yaml``."""
    from optuna.trial import TrialState

    from ltr_bench.sweeper.objective import ATTR_SE, within_one_se
    from ltr_bench.sweeper.storage import redact
    from ltr_bench.sweeper.trials import ATTR_FAIL, COUNTED_FAIL_REASONS

    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    summary: dict[str, Any] = {
        "name": "ltr_optuna",
        "study_name": study.study_name,
        "storage": redact(url),
        "direction": direction,
        "sampler": type(study.sampler).__name__,
        "n_trials": budget,
        "n_complete": len(complete),
        "n_failed": sum(
            t.state == TrialState.FAIL and t.user_attrs.get(ATTR_FAIL) in COUNTED_FAIL_REASONS
            for t in trials
        ),
        "n_running": sum(t.state == TrialState.RUNNING for t in trials),
        "n_pruned": sum(t.state == TrialState.PRUNED for t in trials),
        "pruner": type(study.pruner).__name__,
        "best_trial": None,
        "best_value": None,
        "best_params": None,
        "best_overrides": None,
        "study_overrides": list(variant),
    }
    if complete:
        best = study.best_trial
        summary.update(
            best_trial=best.number,
            best_value=float(best.value),
            best_params=dict(best.params),
            best_overrides=_overrides(space, best.params),
        )
        se = best.user_attrs.get(ATTR_SE)
        if se is not None:
            # How many trials the objective cannot tell from the best: the choice among them is noise.
            summary.update(
                best_value_se=float(se),
                n_within_one_se=within_one_se(
                    [float(t.value) for t in complete],
                    float(best.value),
                    float(se),
                    direction == "maximize",
                ),
            )
        select_reevaluated(study, space, summary, direction)
    return summary


def _overrides(space: Any, params: dict[str, Any]) -> list[str]:
    return [p.override(params[n]) for n, p in space.params.items() if n in params]


def select_reevaluated(study: Any, space: Any, summary: dict[str, Any], direction: str) -> None:
    """With re-evaluations stored, the best trial is the re-evaluated one with the best pooled
    value; the search's own best stays in ``search_best_trial``/``search_best_value``."""
    from ltr_bench.sweeper import reevaluation as rv

    records = rv.stored(study)
    chosen = rv.select(records, direction == "maximize")
    if chosen is None:
        return
    trial = study.get_trials(deepcopy=False)[chosen.trial]  # numbers are list positions
    if "best_value_se" in summary:
        summary["search_best_value_se"] = summary.pop("best_value_se")
    summary.update(
        search_best_trial=summary["best_trial"],
        search_best_value=summary["best_value"],
        best_trial=chosen.trial,
        best_value=chosen.value,
        best_params=dict(trial.params),
        best_overrides=_overrides(space, trial.params),
        reevaluated=[r.to_dict() for r in sorted(records.values(), key=lambda r: r.trial)],
    )
    if chosen.se is not None:
        summary["best_value_se"] = chosen.se


def log_best(summary: dict[str, Any]) -> None:
    """Log a finished study's best trial and how many trials lie within one SE of it."""
    if summary["best_trial"] is None:
        return
    log.info(
        "Best trial %d: value %s%s, params %s",
        summary["best_trial"],
        summary["best_value"],
        " (pooled with its re-evaluation)" if summary.get("reevaluated") else "",
        summary["best_params"],
    )
    if "n_within_one_se" in summary:
        log.info(
            "The search's best has standard error %.4g; %d of %d completed trials lie "
            "within one SE of it (the objective cannot tell them apart).",
            summary.get("search_best_value_se", summary.get("best_value_se")),
            summary["n_within_one_se"],
            summary["n_complete"],
        )


def write_results(sweep_dir: Path, results: list[dict[str, Any]]) -> None:
    """``<sweep dir>/optimization_results.yaml``: the one study's summary, or all of them."""
    content: Any = results[0] if len(results) == 1 else {"name": "ltr_optuna", "studies": results}
    OmegaConf.save(OmegaConf.create(content), sweep_dir / RESULTS_FILE)
