"""Optuna's optimisation-history and parameter-importance plots as PNG files (matplotlib)."""

from __future__ import annotations

import logging
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import TrialState

log = logging.getLogger(__name__)

HISTORY_PNG = "optimization_history.png"
IMPORTANCES_PNG = "param_importances.png"


def write_study_plots(study: optuna.Study, out_dir: str | Path) -> list[Path]:
    """Write ``optimization_history.png`` and ``param_importances.png`` of ``study`` to ``out_dir``.

    The history needs one COMPLETE trial and the importances two COMPLETE trials with at least one
    varying parameter; a plot that cannot be drawn is skipped (logged), never raised. Returns the
    paths written, for logging as artifacts.
    """
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")  # headless by default; keep a backend a notebook already chose
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    written: list[Path] = []
    plots: list[tuple[str, Callable[[Any], Any], int]] = [
        (HISTORY_PNG, ovm.plot_optimization_history, 1)
    ]
    varying = {
        n for t in complete for n in t.params if len({repr(u.params.get(n)) for u in complete}) > 1
    }
    if varying:
        plots.append((IMPORTANCES_PNG, ovm.plot_param_importances, 2))
    for filename, plot, needed in plots:
        if len(complete) < needed:
            log.info("Skipping %s: %d complete trial(s), need %d.", filename, len(complete), needed)
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = plot(study)
            fig: Any = ax.figure if hasattr(ax, "figure") else plt.gcf()
            fig.tight_layout()
            fig.savefig(out / filename, dpi=100)
            plt.close(fig)
            written.append(out / filename)
        except Exception as e:  # plotting must never break a sweep or its tracking
            log.warning("Could not draw %s: %s", filename, e)
            plt.close("all")
    return written


TRIALS_CSV = "trials.csv"


def write_study_artifacts(study: optuna.Study, out_dir: str | Path) -> list[Path]:
    """The study's plots (see :func:`write_study_plots`) and ``trials.csv``, one row per trial
    (number, state, value, params, run times), into ``out_dir``; returns the paths written."""
    out = Path(out_dir)
    written = write_study_plots(study, out)
    try:
        frame = study.trials_dataframe()
    except Exception as e:  # an empty or odd study must not break the sweep
        log.warning("Could not tabulate the trials of study %s: %s", study.study_name, e)
        return written
    if len(frame):
        frame.to_csv(out / TRIALS_CSV, index=False)
        written.append(out / TRIALS_CSV)
    return written
