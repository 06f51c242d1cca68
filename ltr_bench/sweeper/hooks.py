"""The app's hooks the sweeper calls by dotted path: ``sweep.on_interrupted`` and
``sweep.on_study_end``. Neither may break a sweep: a failing hook is logged as a warning."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

log = logging.getLogger("ltr_bench.sweeper.sweeper")


def report_interrupted(config: DictConfig, study: Any, locks: Any) -> None:
    """Hand the study's interrupted trials and re-evaluations to the app's
    ``sweep.on_interrupted`` hook (dotted path; ltr-bench marks their MLflow runs KILLED).

    Called with every interrupted trial number and, per re-evaluated trial, when its latest
    interrupted lock was failed (epoch seconds), so the hook may be repeated safely; a failing
    hook is logged as a warning.
    """
    from hydra.utils import get_method
    from optuna.trial import TrialState

    from ltr_bench.sweeper import reevaluation_locks
    from ltr_bench.sweeper.trials import ATTR_FAIL, FAIL_INTERRUPTED

    hook = OmegaConf.select(config, "sweep.on_interrupted", default=None)
    if not hook:
        return
    trials = sorted(
        t.number
        for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
        if t.user_attrs.get(ATTR_FAIL) == FAIL_INTERRUPTED
    )
    reevaluations = reevaluation_locks.interrupted(locks) if locks is not None else {}
    if not trials and not reevaluations:
        return
    try:
        get_method(str(hook))(config, study.study_name, trials, reevaluations)
    except Exception as e:  # noqa: BLE001 - bookkeeping elsewhere must not stop the sweep
        log.warning("sweep.on_interrupted=%s failed for study '%s': %s", hook, study.study_name, e)


def finish_study(config: DictConfig, study: Any, summary: dict[str, Any], sweep_dir: Path) -> None:
    """Write the study's plots and trials table under ``<sweep dir>/studies/<study>/`` and hand
    them to the app's ``sweep.on_study_end`` hook (dotted path, e.g. MLflow logging), if any.
    Neither may break a finished sweep: failures are logged as warnings."""
    from hydra.utils import get_method

    from ltr_bench.sweeper.plots import write_study_artifacts
    from ltr_bench.sweeper.storage import file_stem

    out = sweep_dir / "studies" / file_stem(study.study_name)
    files = write_study_artifacts(study, out)
    summary["artifacts_dir"] = str(out)
    hook = OmegaConf.select(config, "sweep.on_study_end", default=None)
    if not hook:
        return
    try:
        get_method(str(hook))(config, study.study_name, summary, files)
    except Exception as e:  # noqa: BLE001 - reporting must not fail a finished study
        log.warning("sweep.on_study_end=%s failed for study '%s': %s", hook, study.study_name, e)
