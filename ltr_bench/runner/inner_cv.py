"""A sweep trial (``inner_cv``): inner k-fold CV by query on the training part(s), one ``trial``
MLflow run under the study's ``sweep`` run; test data is never scored.

The trial reports its running objective to the sweeper's pruner after every inner fold when the
sweeper races trials (a re-evaluation too, when the sweeper races re-evaluations); a failed fit or a non-finite objective fails the trial (:class:`TrialFailed`),
not the sweep.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from omegaconf import DictConfig, open_dict

from ltr_bench import tracking_keys as keys
from ltr_bench.data.protocol import Dataset
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.protocols import OuterSplit, Protocol
from ltr_bench.runner.context import JobContext, seed_for_repeat, timer
from ltr_bench.runner.pipeline import RankerPrototype, evaluate_split, prepare
from ltr_bench.runner.results import (
    FoldResult,
    RunResult,
    TrialFailed,
    aggregate,
    summary_metrics,
)
from ltr_bench.runner.tags import dataset_inputs
from ltr_bench.tracking import MetricRow, RunTracker, run_params

# A trial's fold metrics go to the store with its summary in one call; a fold ending this long
# after the last call is logged at once (each store call costs a few ms: tiny folds add up).
FOLD_METRICS_EVERY_S = 5.0


def run_inner_cv(
    cfg: DictConfig,
    protocol: Protocol,
    dataset: Dataset,
    ranker: RankerPrototype,
    tracker: RunTracker,
    tags: dict[str, Any],
    ctx: JobContext,
    verbose: bool,
) -> RunResult:
    """A sweep trial: mean inner-CV metric on the training part(s); test is never scored."""
    sweep = cfg.get("sweep", {})
    # A re-evaluation of a top trial (the sweeper's `reevaluate`) scores the same config on the
    # inner-CV repeats after the search's own: folds and seeds it was not chosen on.
    reevaluation = bool(sweep.get("reevaluation", False))
    reporter = _trial_reporter(cfg)  # set when the sweeper races trials (hydra.sweeper.pruner)
    _quiet_trial_trainer(cfg)
    model, dataset_name = str(tags[keys.TAG_MODEL]), str(tags[keys.TAG_DATASET])
    sampler = _sampler_choice()
    sweep_id = tracker.find_or_create_sweep_run(
        str(sweep.get("study_name") or "no-study"),
        tags,
        keys.sweep_run_name(model, dataset_name, sampler),
    )
    trial = sweep.get("trial_number")
    trial_tags = {**tags, keys.TAG_ROLE: keys.ROLE_TRIAL, keys.TAG_TRIAL: trial}
    name = keys.trial_run_name(model, trial, reevaluation)
    if reevaluation:
        trial_tags[keys.TAG_REEVALUATION] = "true"
    with tracker.run(name, trial_tags, parent_id=sweep_id) as run_id:
        tracker.log_params(run_id, run_params(cfg, ctx.choices))
        loop = _InnerLoop(cfg, protocol, dataset, ranker, tracker, run_id, reevaluation, reporter)
        try:
            result = _score_trial(loop, name)
        except BaseException:  # a failed trial keeps the metrics of the folds it scored
            loop.flush()
            raise
        loop.flush(summary_metrics(result, {"vali": keys.SPLIT_CV}))  # and the unlogged folds'
        result.mlflow_run_id = run_id or None
        if loop.pruned:
            tracker.set_tags(
                run_id, {keys.TAG_PRUNED: "true", keys.TAG_FOLDS_DONE: len(loop.folds)}
            )
    scope = loop.split_names[0] if len(loop.split_names) == 1 else dataset_name
    tracker.rename(sweep_id, keys.sweep_run_name(model, scope, sampler))
    tracker.extend(sweep_id)
    return _finish(loop, result, name, verbose)


@dataclass
class _InnerLoop:
    """The inner folds of one trial, scored in order; stops early when the pruner says so."""

    cfg: DictConfig
    protocol: Protocol
    dataset: Dataset
    prototype: RankerPrototype
    tracker: RunTracker
    run_id: str
    reevaluation: bool
    reporter: Any
    folds: list[FoldResult] = field(default_factory=list)
    split_names: list[str] = field(default_factory=list)
    pruned: bool = False
    unlogged: list[MetricRow] = field(default_factory=list)  # fold metrics not yet in the store
    logged_at: float = field(default_factory=time.monotonic)

    def flush(self, summary: Mapping[str, float | None] | None = None) -> None:
        """Log the unlogged fold metrics, and ``summary`` (step 0), in one store call."""
        rows = [*self.unlogged]
        if summary is not None:
            rows.append(MetricRow(summary, 0, int(time.time() * 1000)))
        self.unlogged.clear()
        self.logged_at = time.monotonic()
        if rows:
            self.tracker.log_metric_rows(self.run_id, rows)

    def _log_fold(self, metrics: dict[str, float], step: int) -> None:
        """Keep a fold's metrics for the next store call; log them now once the last call is
        ``FOLD_METRICS_EVERY_S`` old, so that slow folds still show in the UI as they end."""
        self.unlogged.append(MetricRow(metrics, step, int(time.time() * 1000)))
        if time.monotonic() - self.logged_at >= FOLD_METRICS_EVERY_S:
            self.flush()

    def run(self) -> None:
        """Score every inner fold of every outer split (until pruned) into :attr:`folds`."""
        positions = self.protocol.positions(self.dataset)
        if self.reporter is not None:  # how many folds a race can expect (it may project)
            repeats = len(self.protocol.repeats(self.reevaluation))
            self.reporter.plan(len(positions) * repeats * self.protocol.inner_cv)
        for pos in positions:
            times: dict[str, float] = {}
            with timer(times, keys.TIME_READ):
                split = self.protocol.load(self.dataset, pos, with_test=False)
            self.split_names.append(split.name)
            self.tracker.log_inputs(self.run_id, dataset_inputs(split, ("train",)))
            read_s = times[keys.TIME_READ]  # counted with the first inner fold
            folds = self.protocol.inner_folds(split.train, self.reevaluation)
            for repeat, k, inner_train, inner_vali in folds:
                self.folds.append(self._score(split, repeat, k, inner_train, inner_vali, read_s))
                read_s = 0.0
                if self._report():
                    self.pruned = True  # racing: the pruner stopped this trial
                    return

    def _score(
        self,
        split: OuterSplit,
        repeat: int,
        k: int,
        inner_train: QuerySet,
        inner_vali: QuerySet,
        read_s: float,
    ) -> FoldResult:
        """Fit on one inner training part, evaluate on its inner validation fold, log it."""
        cfg, protocol, step = self.cfg, self.protocol, len(self.folds)
        t: dict[str, float] = {keys.TIME_READ: read_s}
        with timer(t, keys.TIME_READ):
            data = prepare(
                cfg,
                protocol,
                self.dataset.relevance_threshold,
                inner_train,
                split.vali,
                inner_vali,
                test_role="vali",
                dataset=self.dataset,
            )
        assert data.test is not None
        ranker = self.prototype.fresh(seed_for_repeat(int(cfg.seed), repeat))
        with timer(t, keys.TIME_FIT):
            ranker.fit(data.train, data.vali, logger=None)
        with timer(t, keys.TIME_EVAL):
            ev = evaluate_split(
                cfg, ranker.score(data.test), data.test, "the inner validation fold"
            )
        several = protocol.inner_repeats > 1 or self.reevaluation
        inner = f"repeat{repeat}/inner{k}" if several else f"inner{k}"
        self._log_fold(
            {keys.metric_key(keys.SPLIT_CV_FOLD, n): v for n, v in ev.means.items()}, step
        )
        return FoldResult(
            step,
            f"{split.name}/{inner}",
            {"vali": dict(ev.means)},
            t,
            data.train.n_queries,
            data.test.n_queries,
        )

    def _report(self) -> bool:
        """Report the running objective to the pruner; True when it stops the trial."""
        if self.reporter is None:
            return False
        return bool(self.reporter.report(_running_objective(self.cfg, self.folds), len(self.folds)))


def _score_trial(loop: _InnerLoop, name: str) -> RunResult:
    """Run ``loop`` and aggregate its folds; anything but a user error or an interrupt fails
    the trial (:class:`TrialFailed`), and so does a non-finite objective."""
    try:
        loop.run()
        result = aggregate("inner_cv", loop.cfg, loop.folds)
        if result.objective is None or not math.isfinite(result.objective):
            raise TrialFailed(
                f"the inner-CV objective {result.objective_name} is {result.objective}"
            )
    except TrialFailed:
        raise
    except (UserError, KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # a fit that raises fails this trial, not the sweep
        raise TrialFailed(f"{name} failed: {exc.__class__.__name__}: {exc}") from exc
    return result


def _finish(loop: _InnerLoop, result: RunResult, name: str, verbose: bool) -> RunResult:
    """Print the trial's line; a pruned trial ends by raising the pruner's exception."""
    if loop.pruned:
        assert loop.reporter is not None
        if verbose:
            print(
                f"{name}: pruned after {len(loop.folds)} folds, running {result.objective_name} = "
                f"{result.objective:.4f}",
                flush=True,
            )
        raise loop.reporter.pruned()
    if verbose:
        print(
            f"{name}: {result.objective_name} = {result.objective:.4f} "
            f"over {len(loop.folds)} folds ({result.times[keys.TIME_FIT]:.1f} s fitting)",
            flush=True,
        )
    return result


def _trial_reporter(cfg: DictConfig) -> Any:
    """The job's handle for reporting its running objective into its Optuna trial, when the
    sweeper passed one (``sweep.storage`` + ``sweep.pruner``); the storage URL is redacted in
    ``cfg`` afterwards, so no password reaches the logged params."""
    from ltr_bench.sweeper.job import TrialReporter, redact

    reporter = TrialReporter.from_config(cfg)
    url = cfg.get("sweep", {}).get("storage")
    if url:
        with open_dict(cfg):
            cfg.sweep.storage = redact(str(url))
    return reporter


def _quiet_trial_trainer(cfg: DictConfig) -> None:
    """No Lightning per-epoch bars inside sweep trials unless ``sweep.progress_bars=true``: the
    sweeper's own progress line says how far the sweep is."""
    trainer, sweep = cfg.get("trainer"), cfg.get("sweep", {})
    if (
        isinstance(trainer, DictConfig)
        and sweep.get("trial_number") is not None
        and not sweep.get("progress_bars", False)
    ):
        with open_dict(cfg):
            trainer.enable_progress_bar = False


def _running_objective(cfg: DictConfig, folds: list[FoldResult]) -> float:
    """The mean of the objective metric over the inner folds done so far."""
    metric = str(cfg.objective.metric)
    return float(np.mean([f.metrics["vali"].get(metric, math.nan) for f in folds]))


def _sampler_choice() -> str | None:
    """The sweep's sampler option (``tpe``, ``random``, ``grid``) inside a sweep job, else None."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    choice = HydraConfig.get().runtime.choices.get("hydra/sweeper/sampler")
    return str(choice) if choice else None
