"""What a study shows and leaves: its live progress line, its entry of
``optimization_results.yaml``, its plots and trials table, the app's ``sweep.on_study_end`` hook."""

from __future__ import annotations

import logging
import math
import shutil
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.trial import TrialState

from ltr_bench.sweeper.config import STUDY_PLOTS
from ltr_bench.sweeper.job import ATTR_SE, RESULTS_FILE
from ltr_bench.sweeper.reevaluation import records
from ltr_bench.sweeper.state import StudyState
from ltr_bench.sweeper.storage import dashboard_command, file_stem, redact
from ltr_bench.sweeper.trials import is_counted_failure

log = logging.getLogger(__name__)


def within_one_se(values: list[float], best: float, se: float, maximize: bool) -> int:
    """How many of ``values`` lie within ``se`` of ``best`` (on the good side of best - se)."""
    if maximize:
        return sum(v >= best - se for v in values)
    return sum(v <= best + se for v in values)


def summarize(state: StudyState, trials: Any = None) -> dict[str, Any]:
    """One study's entry of ``optimization_results.yaml`` (``trials``: the study's, when read)."""
    study: Any = state.study
    space, direction = state.space, state.settings.direction
    trials = study.get_trials(deepcopy=False) if trials is None else trials
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    summary: dict[str, Any] = {
        "name": "ltr_optuna",
        "study_name": study.study_name,
        "storage": redact(state.url),
        "dashboard": dashboard_command(state.url),  # opens the sweep's studies, live
        "direction": direction,
        "sampler": type(study.sampler).__name__,
        "n_trials": state.budget,
        "n_complete": len(complete),
        "n_failed": sum(is_counted_failure(t) for t in trials),
        "n_running": sum(t.state == TrialState.RUNNING for t in trials),
        "n_pruned": sum(t.state == TrialState.PRUNED for t in trials),
        "pruner": type(study.pruner).__name__,
        "best_trial": None,
        "best_value": None,
        "best_params": None,
        "best_overrides": None,
        "study_overrides": list(state.variant),
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
        if se is not None:  # the trials the objective cannot tell from the best (noise to choose)
            values = [float(t.value) for t in complete]
            n = within_one_se(values, float(best.value), float(se), direction == "maximize")
            summary.update(best_value_se=float(se), n_within_one_se=n)
        select_reevaluated(study, state.locks, space, summary, direction)
    return summary


def _overrides(space: Any, params: dict[str, Any]) -> list[str]:
    return [p.override(params[n]) for n, p in space.params.items() if n in params]


def select_reevaluated(
    study: Any, locks: Any, space: Any, summary: dict[str, Any], direction: str
) -> None:
    """With re-evaluations stored, the best trial is the re-evaluated one with the best pooled
    value; the search's own best stays in ``search_best_trial``/``search_best_value``."""
    found = records.stored(study, locks)
    chosen = records.select(found, direction == "maximize")
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
        reevaluated=[r.to_dict() for r in sorted(found.values(), key=lambda r: r.trial)],
    )
    if chosen.se is not None:
        summary["best_value_se"] = chosen.se


def log_best(summary: dict[str, Any]) -> None:
    """Log a finished study's best trial and how many trials lie within one SE of it."""
    if summary["best_trial"] is None:
        return
    pooled = " (pooled with its re-evaluation)" if summary.get("reevaluated") else ""
    log.info(
        f"Best trial {summary['best_trial']}: value {summary['best_value']}{pooled}, "
        f"params {summary['best_params']}"
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


def finish_study(state: StudyState, summary: dict[str, Any], sweep_dir: Path) -> Callable[[], None]:
    """Start writing the study's artifacts and handing them to ``sweep.on_study_end``; returns the
    wait for their end. With jobs in flight they are written in a warm worker, where a job has
    already loaded the plotting and tracking libraries the sweeper process would otherwise import,
    while the sweep goes on (the next study's jobs start on the other workers and queue behind);
    a failure there is logged and the study is finished here, in the wait."""
    out = sweep_dir / "studies" / file_stem(state.study.study_name)
    summary["artifacts_dir"] = str(out)
    hook = OmegaConf.select(state.config, "sweep.on_study_end", default=None)
    hook = str(hook) if hook else None

    plots = list(state.settings.plots)

    def here() -> None:
        finish(state.config, state.study, summary, out, hook, plots)

    if not state.jobs.in_flight:
        here()
        return lambda: None
    args = (state.config, state.url, state.study.study_name, summary, out, hook, plots)
    try:
        ending: Any = state.jobs.start_in_worker(finish_stored_study, *args)
    except Exception as e:  # noqa: BLE001 - the pool cannot take it: the wait finishes here
        ending = e

    def wait() -> None:
        try:
            if isinstance(ending, BaseException):
                raise ending
            ending.result()
            return
        except Exception as e:  # noqa: BLE001 - any failure there (worker died, storage): finish here
            name = state.study.study_name
            log.warning("Finishing study '%s' in a worker failed (%s); finishing it here.", name, e)
        here()

    return wait


def finish_stored_study(
    config: DictConfig,
    url: str,
    name: str,
    summary: dict[str, Any],
    out: Path,
    hook: str | None,
    plots: Sequence[str],
) -> None:
    """:func:`finish` of the study ``name`` in the storage at ``url`` (in a worker)."""
    try:
        study = optuna.load_study(study_name=name, storage=url)
        finish(config, study, summary, out, hook, plots)
    finally:  # what the hook printed, before the sweep ends the worker
        sys.stdout.flush()
        sys.stderr.flush()


def finish(
    config: DictConfig,
    study: Any,
    summary: dict[str, Any],
    out: Path,
    hook: str | None,
    plots: Sequence[str],
) -> None:
    """The study's ``plots`` and trials table in ``out``, then the app's ``hook`` with them."""
    from hydra.utils import get_method

    files = write_study_artifacts(study, out, plots)
    if not hook:
        return
    try:
        get_method(hook)(config, study.study_name, summary, files)
    except Exception as e:  # noqa: BLE001 - the app's reporting must not fail a finished study
        log.warning("sweep.on_study_end=%s failed for study '%s': %s", hook, study.study_name, e)


def write_study_plots(
    study: optuna.Study, out_dir: str | Path, plots: Sequence[str] = tuple(STUDY_PLOTS)
) -> list[Path]:
    """Write the study's ``plots`` (names of :data:`STUDY_PLOTS`; those that can be drawn) to
    ``out_dir``, as ``<name>.png``."""
    if not plots:
        return []
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:
        matplotlib.use("Agg")  # headless by default; keep a backend a notebook already chose
    import matplotlib.pyplot as plt
    from optuna.visualization import matplotlib as ovm

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    written: list[Path] = []
    varying = {
        n for t in complete for n in t.params if len({repr(u.params.get(n)) for u in complete}) > 1
    }
    for name in (name for name in STUDY_PLOTS if name in plots):
        plot, filename = STUDY_PLOTS[name], f"{name}.png"
        if plot.needs_varying_params and not varying:
            continue
        if len(complete) < plot.min_complete:
            log.info(
                "Skipping %s: %d complete trial(s), need %d.",
                filename,
                len(complete),
                plot.min_complete,
            )
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ax = getattr(ovm, plot.function)(study)
            fig: Any = ax.figure if hasattr(ax, "figure") else plt.gcf()
            fig.tight_layout()
            fig.savefig(out / filename, dpi=100)
            plt.close(fig)
            written.append(out / filename)
        except Exception as e:  # noqa: BLE001 - a plot (Optuna, matplotlib) must never break a sweep
            log.warning("Could not draw %s: %s", filename, e)
            plt.close("all")
    return written


def write_study_artifacts(
    study: optuna.Study, out_dir: str | Path, plots: Sequence[str] = tuple(STUDY_PLOTS)
) -> list[Path]:
    """The study's ``plots`` and ``trials.csv`` in ``out_dir``; the paths written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = write_study_plots(study, out, plots)
    try:
        frame = study.trials_dataframe()
    except Exception as e:  # noqa: BLE001 - an odd study (pandas, Optuna) must not break the sweep
        log.warning("Could not tabulate the trials of study %s: %s", study.study_name, e)
        return written
    if len(frame):
        frame.to_csv(out / "trials.csv", index=False)
        written.append(out / "trials.csv")
    return written


def format_duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s``, ``42s``; ``?`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "?"
    s = int(round(max(seconds, 0.0)))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


class StudyProgress:
    """The progress line of one study: a tqdm line on a terminal, else log lines."""

    def __init__(
        self,
        study_name: str,
        budget: int,
        direction: str = "maximize",
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
    ) -> None:
        self.name = study_name
        self.budget = int(budget)
        self.maximize = direction == "maximize"
        self.enabled = enabled
        self.t0 = time.monotonic()
        self._done0: int | None = None  # trials already finished when this process started
        self._bar: Any = None
        stream = stream if stream is not None else sys.stderr
        try:
            terminal = bool(stream.isatty())
        except (AttributeError, ValueError):
            terminal = False
        if enabled and terminal:
            from tqdm.auto import tqdm

            cols = shutil.get_terminal_size((160, 20)).columns or 160  # 0 in some pseudo-terminals
            desc = study_name if len(study_name) <= 40 else "..." + study_name[-37:]
            # "<study>, 3/30 trials, ..."
            self._bar = tqdm(
                total=self.budget, desc=desc, file=stream, ncols=cols, bar_format="{desc}{postfix}"
            )

    def update(self, study: Any, trials: Any = None) -> str:
        """Re-read the study's counts (or count ``trials``, when read) and show them; returns
        the line."""
        trials = study.get_trials(deepcopy=False) if trials is None else trials
        complete = [t for t in trials if t.state == TrialState.COMPLETE and t.value is not None]
        pruned = sum(t.state == TrialState.PRUNED for t in trials)
        failed = sum(is_counted_failure(t) for t in trials)
        done = len(complete) + pruned + failed
        elapsed = time.monotonic() - self.t0
        if self._done0 is None:
            self._done0 = done
        new = done - self._done0
        eta = elapsed / new * max(self.budget - done, 0) if new > 0 else None
        best = "-"
        if complete:
            top = (max if self.maximize else min)(complete, key=lambda t: t.value)
            se = top.user_attrs.get(ATTR_SE)
            se_text = "" if se is None else f"SE {se:.4f}, "
            best = f"{float(top.value):.4f} ({se_text}trial {top.number})"
        text = (
            f"{done}/{self.budget} trials, {pruned} pruned, {failed} failed, best {best}, "
            f"elapsed {format_duration(elapsed)}, "
            f"ETA {format_duration(0.0 if done >= self.budget else eta)}"
        )
        if not self.enabled:
            return text
        if self._bar is not None:
            self._bar.n = min(done, self.budget)
            self._bar.set_postfix_str(text, refresh=True)
        else:
            log.info("Study '%s': %s", self.name, text)
        return text

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
