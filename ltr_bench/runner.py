"""One run of a composed config: data -> protocol -> preprocessing -> ranker -> metrics -> MLflow.

:func:`run` is what ``ltr-bench`` executes per job. It checks the config before reading any data
(model/loss/optimizer/activation compatibility, top-level values), then either

- runs the protocol (``final``): per outer split, preprocess (fitted on train), fit, score vali
  and test, evaluate, log a ``fold`` MLflow run under a ``protocol`` parent; prints a results
  table and writes ``results.json`` into the Hydra output folder; or
- scores a sweep trial (``inner_cv``): inner k-fold CV by query on the training part, one
  ``trial`` MLflow run under the study's ``sweep`` run, never scoring test data.

It returns a :class:`RunResult`; ``RunResult.objective`` (the config's ``objective.metric`` on
``objective.split``, or the inner-CV mean) is what a sweeper optimises.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from ltr_bench import tracking_keys as keys
from ltr_bench.data.protocol import Dataset
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.protocols import OuterSplit, Protocol
from ltr_bench.seeding import derive_seed
from ltr_bench.tracking import (
    MODEL_NAME,
    Tracker,
    data_tags,
    filter_eq,
    git_commit,
    invocation_id,
    is_rank_zero,
    machine_tags,
    run_params,
)

COMPAT_GROUPS = ("loss", "optimizer", "activation")
SPLITS = ("vali", "test")
MODEL_META_KEYS = ("name", "accepts")  # config metadata, not constructor arguments


class TrialFailed(RuntimeError):
    """A sweep trial that produced no usable objective (fit raised, NaN scores or metric).

    The sweeper records the trial as failed and goes on; the trial's MLflow run is FAILED.
    """


# ------------------------------------------------------------------------------ results
@dataclass
class FoldResult:
    """Metrics and run times of one outer split (``final``) or one inner fold (``inner_cv``)."""

    fold: int
    name: str
    metrics: dict[str, dict[str, float]]  # split -> metric name -> mean over queries
    times: dict[str, float]  # time_read_s, time_fit_s, time_eval_s
    n_train_queries: int
    n_test_queries: int | None
    mlflow_run_id: str | None = None
    model_uri: str | None = None  # runs:/<fold run id>/model when a model was logged


@dataclass
class RunResult:
    """What one job produced; ``objective`` goes back to the sweeper."""

    mode: str  # "final" | "inner_cv"
    objective: float | None
    objective_name: str
    folds: list[FoldResult]
    objective_se: float | None = None  # SE of the objective over (inner) folds; NaN/None: one fold
    mean: dict[str, dict[str, float]] = field(default_factory=dict)
    se: dict[str, dict[str, float]] = field(default_factory=dict)
    times: dict[str, float] = field(default_factory=dict)  # sums over folds
    mlflow_run_id: str | None = None
    results_path: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ------------------------------------------------------------------------------ checks
def check_compatibility(cfg: DictConfig) -> None:
    """Reject group options (and a search space) the model cannot use, before anything is read.

    Each model config lists ``model.accepts.<group>``: the option names of loss, optimizer and
    activation it works with; a search config (``search=<name>``) names its model in
    ``search_space.model``. Raises a one-sentence :class:`UserError` naming the fix.
    """
    model = cfg.get("model")
    if model is None:
        raise UserError("no model is configured; choose one with model=<name>")
    accepts = model.get("accepts") or {}
    model_name = model.get("name", "?")
    space = cfg.get("search_space")
    if space is not None and space.get("model") not in (None, model_name):
        raise UserError(
            f"search={space.get('model')} is the search space of model={space.get('model')}, not of "
            f"model={model_name}; choose search={model_name} (or search={model_name}_grid)"
        )
    for group in COMPAT_GROUPS:
        if group not in cfg or group not in accepts:
            continue
        chosen = cfg[group].get("name") if isinstance(cfg[group], DictConfig) else cfg[group]
        allowed = [str(a) for a in accepts[group]]
        if str(chosen) not in allowed:
            raise UserError(
                f"model={model_name} does not use {group}={chosen}; choose one of "
                f"[{', '.join(allowed)}] or drop the override"
            )


def check_top_level(cfg: DictConfig) -> None:
    """Validate the top-level keys this module owns (seed, threads, objective)."""
    from ltr_bench.metrics import parse_metric

    seed = cfg.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    threads = cfg.get("threads")
    if threads is not None and (
        not isinstance(threads, int) or isinstance(threads, bool) or threads < 1
    ):
        raise UserError(f"threads must be null (all cores) or an integer >= 1, got {threads!r}")
    obj = cfg.get("objective") or {}
    split = obj.get("split", "vali")
    if split not in SPLITS:
        raise UserError(f"objective.split must be one of {', '.join(SPLITS)}, got {split!r}")
    try:
        parse_metric(str(obj.get("metric", "ndcg@10")))
    except (UserError, ValueError) as exc:
        raise UserError(f"objective.metric: {exc}") from None


def check_numeric_arguments(cfg: DictConfig, group: str = "optimizer") -> None:
    """Reject a text value (``optimizer.lr=abc``) where the group's ``_target_`` takes a number.

    Only a text value triggers the check (and the import of the target), so it costs nothing for
    numbers; the sentence names the key instead of the constructor's TypeError.
    """
    node = cfg.get(group)
    if not isinstance(node, DictConfig) or not node.get("_target_"):
        return
    texts = {k: v for k, v in node.items() if k not in ("_target_", "name") and isinstance(v, str)}
    if not texts:
        return
    import inspect

    from hydra.utils import get_class

    try:
        defaults = inspect.signature(get_class(str(node._target_))).parameters
    except (ImportError, ValueError, TypeError, AttributeError):
        return  # a bad _target_ is reported where it is instantiated
    for key, value in texts.items():
        default = defaults[key].default if key in defaults else None
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            raise UserError(
                f"{group}.{key}={value!r} is not a number; give a number such as {group}.{key}={default}"
            )


def check_optimizer_arguments(cfg: DictConfig) -> None:
    """Reject optimizer values torch refuses (``optimizer.lr=-1``) before anything is tracked."""
    node = cfg.get("optimizer")
    if isinstance(node, DictConfig) and node.get("_target_"):
        from ltr_bench.models.networks import check_optimizer

        check_optimizer(OmegaConf.to_container(node, resolve=True))


def check_distributed(cfg: DictConfig) -> None:
    """Reject ``trainer=ddp`` inside a multirun when Lightning would start the ranks itself.

    Lightning's ddp launcher starts ranks 1..n-1 by re-running the command line; in a multirun
    (``-m``) that would re-run the whole sweep in every child. Where the ranks are started outside
    (SLURM tasks, torchrun) each process is one rank of one job, which is fine.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    trainer = cfg.get("trainer")
    if not isinstance(trainer, DictConfig) or not HydraConfig.initialized():
        return
    strategy = str(trainer.get("strategy", "auto"))
    relaunches = strategy.startswith("ddp") and not any(
        s in strategy for s in ("spawn", "fork", "notebook")
    )
    several = str(trainer.get("devices", 1)) != "1" or int(trainer.get("num_nodes", 1) or 1) > 1
    external = any(v in os.environ for v in ("LOCAL_RANK", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID"))
    if relaunches and several and not external and HydraConfig.get().mode == RunMode.MULTIRUN:
        raise UserError(
            f"trainer.strategy={strategy} cannot run inside a multirun (-m): Lightning starts the "
            "other ranks by re-running the command line, which would re-run the sweep; run DDP as "
            "a single run (or refit_best=...) and give sweep trials one device each"
        )


# ------------------------------------------------------------------------------ set-up helpers
@dataclass
class JobContext:
    """Where the job runs: Hydra output dir, original working dir, chosen config options."""

    output_dir: Path | None
    cwd: Path
    choices: dict[str, str]


def job_context(output_dir: str | os.PathLike[str] | None = None) -> JobContext:
    """The Hydra job's context, or the current directory outside Hydra (tests, notebooks)."""
    from hydra.core.hydra_config import HydraConfig

    if HydraConfig.initialized():
        hc = HydraConfig.get()
        out = Path(output_dir or hc.runtime.output_dir)
        choices = {k: str(v) for k, v in hc.runtime.choices.items() if not k.startswith("hydra")}
        return JobContext(out, Path(hc.runtime.cwd), choices)
    return JobContext(Path(output_dir) if output_dir else None, Path.cwd(), {})


def parallel_jobs() -> int:
    """How many jobs of this multirun run at once (the launcher's ``n_jobs``; 1 otherwise)."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return 1
    n = OmegaConf.select(HydraConfig.get(), "launcher.n_jobs", default=None)
    if not isinstance(n, int) or n == 0:
        return 1
    cores = os.cpu_count() or 1
    return cores if n < 0 else min(n, cores)  # joblib: -1 = one job per core


def configure_threads(cfg: DictConfig) -> int:
    """Set torch's thread count from ``threads`` and write the number back, so ``${threads}`` in
    model configs (LightGBM ``n_jobs``) resolves to the same count. ``threads=null`` means all
    cores, shared among the jobs a parallel launcher runs at once."""
    import torch

    n = cfg.get("threads") or max(1, (os.cpu_count() or 1) // parallel_jobs())
    torch.set_num_threads(int(n))
    with open_dict(cfg):
        cfg.threads = int(n)
    return int(n)


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (LightGBM gets ``seed`` through its model config)."""
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def seed_for_repeat(seed: int, repeat: int) -> int:
    """The model seed of inner-CV repeat ``repeat``: ``seed`` itself for the first, then seeds
    derived from ``(seed, repeat)``, so repeats also average over training randomness."""
    if repeat == 0:
        return seed
    return derive_seed(seed, repeat, bits=31)


def build_ranker(cfg: DictConfig, seed: int | None = None) -> Any:
    """A fresh ranker from ``cfg.model`` via its ``_target_`` (metadata keys removed);
    ``seed`` replaces the model's own seed when given (inner-CV repeats)."""
    from hydra.utils import instantiate

    spec = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(spec, dict)
    for k in MODEL_META_KEYS:
        spec.pop(k, None)
    if seed is not None and "seed" in spec:
        spec["seed"] = seed
    if "_target_" not in spec:
        raise UserError("model._target_ is missing; every model config names its ranker class")
    return instantiate(spec, _convert_="all")


def build_preprocessing(cfg: DictConfig) -> Any:
    from hydra.utils import instantiate

    return instantiate(cfg.eval.preprocessing, _convert_="all")


def metric_names(cfg: DictConfig) -> list[str]:
    names = [str(n) for n in cfg.eval.metrics.names]
    obj = str(cfg.objective.metric)
    return names if obj in names else names + [obj]


@dataclass
class Prepared:
    train: QuerySet
    vali: QuerySet | None
    test: QuerySet | None
    preprocessing: Any


def prepare(
    cfg: DictConfig,
    protocol: Protocol,
    threshold: int,
    train: QuerySet,
    vali: QuerySet | None,
    test: QuerySet | None,
    test_role: str = "test",
    dataset: Any = None,
) -> Prepared:
    """Fit preprocessing on ``train``; apply to every part (``test`` in role ``test_role``).

    For a file-backed ``dataset`` (one with a parse cache, ``dataset.cache_dir``) the result is
    shared through :mod:`ltr_bench.data.transform_cache`: every trial, refit and worker that
    preprocesses the same split with the same options reads it back instead of refitting."""
    from ltr_bench.data.transforms import binarize_labels

    def compute() -> tuple[list[QuerySet | None], Any]:
        pre = build_preprocessing(cfg)
        pre.fit(train)
        tr = pre.apply(train, "train")
        if protocol.train_labels == "binary":
            tr = binarize_labels(tr, threshold)
        va = pre.apply(vali, "vali") if vali is not None and vali.n_queries else None
        te = pre.apply(test, test_role) if test is not None else None
        return [tr, va, te], pre

    if dataset is None or not hasattr(dataset, "cache_dir"):
        (tr, va, te), pre = compute()
        return Prepared(tr, va, te, pre)
    from ltr_bench.data.transform_cache import cached_preprocessing

    options = OmegaConf.to_container(cfg.eval.preprocessing, resolve=True)
    assert isinstance(options, dict)
    options.pop("threads", None)  # how fast, not what: the same numbers with any thread count
    key = {
        "preprocessing": options,
        "train_labels": protocol.train_labels,
        "threshold": threshold,
        "test_role": test_role,
    }
    parts = [("train", train), ("vali", vali), ("test", test)]
    (tr, va, te), pre, _ = cached_preprocessing(key, parts, compute, dataset.cache_dir)
    return Prepared(tr, va, te, pre)


@dataclass
class Fitted:
    """A ranker fitted by :func:`fit_and_score`, the preprocessed data and its test scores."""

    ranker: Any
    train: QuerySet  # preprocessed
    test: QuerySet  # preprocessed
    scores: np.ndarray  # [N] float64 scores of ``test``
    time_fit_s: float


def fit_and_score(
    cfg: DictConfig,
    train: QuerySet,
    test: QuerySet,
    vali: QuerySet | None = None,
    cache: dict[str, Any] | None = None,
) -> Fitted:
    """Preprocess (fitted on ``train``), build ``cfg``'s ranker, fit it, score ``test``: one
    fit -> score step for drivers outside the protocol loop (experiments).

    ``cache`` (a dict the caller keeps per data split) shares the preprocessed data between models
    with the same ``eval.preprocessing`` config.
    """
    key = OmegaConf.to_yaml(cfg.eval.preprocessing, resolve=True)
    parts = None if cache is None else cache.get(key)
    if parts is None:
        pre = build_preprocessing(cfg)
        pre.fit(train)
        parts = (
            pre.apply(train, "train"),
            pre.apply(vali, "vali") if vali is not None else None,
            pre.apply(test, "test"),
        )
        if cache is not None:
            cache[key] = parts
    tr, va, te = parts
    ranker = build_ranker(cfg)
    t0 = time.perf_counter()
    ranker.fit(tr, va)
    fit_s = time.perf_counter() - t0
    return Fitted(ranker, tr, te, np.asarray(ranker.score(te), dtype=np.float64), fit_s)


def evaluate_split(cfg: DictConfig, scores: np.ndarray, data: QuerySet, where: str) -> Any:
    """``metrics.evaluate`` with the eval config's options; NaN scores are a failed fit."""
    from ltr_bench.metrics import evaluate

    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    if scores.shape[0] != data.n_docs:
        raise RuntimeError(
            f"the ranker returned {scores.shape[0]} scores for {data.n_docs} documents"
        )
    if not np.all(np.isfinite(scores)):
        raise TrialFailed(
            f"the ranker produced non-finite scores on {where} (training diverged?); "
            "try a lower learning rate"
        )
    m = cfg.eval.metrics
    return evaluate(
        scores,
        data,
        names=metric_names(cfg),
        relevance_threshold=m.get("relevance_threshold", 1),
        no_relevant=m.get("no_relevant", "drop"),
    )


@contextmanager
def _timer(times: dict[str, float], key: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        times[key] = times.get(key, 0.0) + time.perf_counter() - t0


def _fingerprint(*digests: str | None) -> str:
    """One hash of a split's parts' fingerprints (train, vali, test; ``-`` for a missing part)."""
    h = hashlib.sha256()
    for d in digests:
        h.update((d if d is not None else "-").encode())
    return h.hexdigest()[:16]


def _name(cfg: DictConfig, group: str, ctx: JobContext) -> str:
    node = cfg.get(group)
    if isinstance(node, DictConfig) and node.get("name") is not None:
        return str(node.get("name"))
    return ctx.choices.get(group, "unknown")


def package_version() -> str:
    """The installed ltr_bench version (from the package metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ltr_bench")
    except PackageNotFoundError:
        return "unknown"


def common_tags(cfg: DictConfig, ctx: JobContext) -> dict[str, Any]:
    return {
        keys.TAG_MODEL: _name(cfg, "model", ctx),
        keys.TAG_DATASET: _name(cfg, "dataset", ctx),
        keys.TAG_PROTOCOL: _name(cfg, "protocol", ctx),
        keys.TAG_EVAL: _name(cfg, "eval", ctx),
        keys.TAG_SEED: cfg.seed,
        keys.TAG_VERSION: package_version(),
        keys.TAG_GIT_COMMIT: git_commit(),
        keys.TAG_STUDY: cfg.get("sweep", {}).get("study_name"),
        **machine_tags(cfg),
    }


# ------------------------------------------------------------------------------ the run
def run(
    cfg: DictConfig, output_dir: str | os.PathLike[str] | None = None, *, verbose: bool = True
) -> RunResult:
    """Run the composed config ``cfg`` once (see the module docstring)."""
    from hydra.utils import instantiate

    t_start = time.perf_counter()
    verbose = verbose and is_rank_zero()  # DDP: the other ranks print nothing (and write nothing)
    check_compatibility(cfg)
    check_top_level(cfg)
    check_numeric_arguments(cfg)
    check_optimizer_arguments(cfg)
    check_distributed(cfg)
    protocol: Protocol = instantiate(cfg.protocol)
    is_trial = cfg.get("sweep", {}).get("trial_number") is not None
    mode = protocol.mode(is_trial)
    if mode == "inner_cv" and cfg.objective.split == "test":
        raise UserError(
            "objective.split=test would choose hyperparameters on test data; "
            "sweeps select on vali (objective.split=vali)"
        )
    ctx = job_context(output_dir)
    configure_threads(cfg)
    dataset = instantiate(cfg.dataset, _convert_="all")
    build_ranker(
        cfg
    )  # the ranker validates its config (e.g. its loss's kind) before any run is logged
    seed_everything(int(cfg.seed))
    tracker = Tracker.from_config(cfg.tracking, ctx.cwd)
    tags = common_tags(cfg, ctx)
    if mode == "inner_cv":
        result = _run_inner_cv(cfg, protocol, dataset, tracker, tags, ctx, verbose)
    else:
        result = _run_final(cfg, protocol, dataset, tracker, tags, ctx, verbose)
    result.times["time_total_s"] = time.perf_counter() - t_start
    if ctx.output_dir is not None and is_rank_zero():
        path = ctx.output_dir / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        result.results_path = str(path)
        path.write_text(
            json.dumps(_results_json(cfg, result, tracker), indent=2, default=_json_default)
        )
        if verbose:
            print(f"results: {path}", flush=True)
    return result


def _run_final(
    cfg: DictConfig,
    protocol: Protocol,
    dataset: Dataset,
    tracker: Tracker,
    tags: dict[str, Any],
    ctx: JobContext,
    verbose: bool,
) -> RunResult:
    """The protocol's outer loop: a ``protocol`` run with one ``fold`` run per outer split."""
    positions = protocol.positions(dataset)
    study = cfg.get("sweep", {}).get("study_name")
    parent_of_protocol = tracker.find_or_create_sweep_run(str(study), tags) if study else None
    run_tags = {**tags, keys.TAG_ROLE: keys.ROLE_PROTOCOL, **data_tags(dataset.describe())}
    refit = bool(cfg.get("refit_best"))
    if refit:
        run_tags[keys.TAG_REFIT] = "true"
    model, seed = str(tags[keys.TAG_MODEL]), int(cfg.seed)
    dataset_name, protocol_name = str(tags[keys.TAG_DATASET]), str(tags[keys.TAG_PROTOCOL])

    def name_for(scope: str) -> str:
        return (
            keys.refit_run_name(model, scope, seed)
            if refit
            else keys.protocol_run_name(model, scope, protocol_name)
        )

    params = run_params(cfg, ctx.choices)
    folds: list[FoldResult] = []
    with tracker.run(name_for(dataset_name), run_tags, parent_id=parent_of_protocol) as run_id:
        tracker.log_params(run_id, params)
        tracker.log_text(run_id, OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
        fingerprints = []
        inputs: list[dict[str, Any]] = []
        for i, pos in enumerate(positions):
            if verbose and len(positions) > 1:
                print(
                    f"[{i + 1}/{len(positions)}] {protocol.name}: reading and training ...",
                    flush=True,
                )
            fold_tags = {**tags, keys.TAG_ROLE: keys.ROLE_FOLD}
            fr, fp, fold_inputs = _run_fold(
                cfg,
                protocol,
                dataset,
                pos,
                tracker,
                fold_tags,
                run_id,
                params,
                seed if refit else None,
            )
            folds.append(fr)
            fingerprints.append(fp)
            inputs += fold_inputs
            if len(positions) == 1:  # one split: the run is named after it (mq2008/Fold1)
                tracker.rename(run_id, name_for(fr.name))
            if verbose and len(positions) > 1:
                print(
                    f"[{i + 1}/{len(positions)}] {fr.name}: {_short(fr.metrics, cfg)}"
                    f"  (fit {fr.times[keys.TIME_FIT]:.1f} s)",
                    flush=True,
                )
        tracker.log_inputs(run_id, inputs)
        result = _aggregate("final", cfg, folds)
        result.mlflow_run_id = run_id or None
        tracker.set_tags(
            run_id,
            {keys.TAG_FINGERPRINT: hashlib.sha256("".join(fingerprints).encode()).hexdigest()[:16]},
        )
        summary = {keys.metric_key(s, n): v for s, d in result.mean.items() for n, v in d.items()}
        summary.update(
            {
                keys.metric_key(s, n) + keys.SE_SUFFIX: v
                for s, d in result.se.items()
                for n, v in d.items()
            }
        )
        summary.update(result.times)
        summary[keys.OBJECTIVE] = result.objective
        tracker.log_metrics(run_id, summary)
        if verbose:
            print(format_results(cfg, result), flush=True)
            if tracker.enabled:
                print(
                    f"MLflow run {run_id} in {tracker.tracking_uri} (experiment "
                    f"'{tracker.experiment_name}')",
                    flush=True,
                )
                for fr in folds:
                    if fr.model_uri:  # what ltr-bench-predict and mlflow.pyfunc.load_model take
                        print(f"model of {fr.name}: {fr.model_uri}", flush=True)
                print(
                    tracker.experiment_link(
                        filter_eq(keys.TAG_INVOCATION, invocation_id()),
                        "runs of this command",
                        run_id,
                    ),
                    flush=True,
                )
        if tracker.enabled:
            tracker.log_text(
                run_id,
                json.dumps(_results_json(cfg, result, tracker), indent=2, default=_json_default),
                "results.json",
            )
    return result


def _run_fold(
    cfg: DictConfig,
    protocol: Protocol,
    dataset: Dataset,
    position: int,
    tracker: Tracker,
    tags: dict[str, Any],
    parent_id: str,
    params: Mapping[str, str],
    refit_seed: int | None = None,
) -> tuple[FoldResult, str, list[dict[str, Any]]]:
    """One outer split as a ``fold`` run; returns its result, fingerprint and dataset inputs."""
    times: dict[str, float] = {}
    with _timer(times, keys.TIME_READ):
        split: OuterSplit = protocol.load(dataset, position)
        inputs = dataset_inputs(split)
        digests = {i["context"]: i["digest"] for i in inputs}
        fingerprint = _fingerprint(*(digests.get(p) for p in ("train", "vali", "test")))
        data = prepare(
            cfg,
            protocol,
            dataset.relevance_threshold,
            split.train,
            split.vali,
            split.test,
            dataset=dataset,
        )
    assert data.test is not None
    fold_tags = {
        **tags,
        keys.TAG_FOLD: split.fold,
        keys.TAG_FINGERPRINT: fingerprint,
        keys.TAG_FOLD_NAME: split.name,
        keys.TAG_N_TRAIN_QUERIES: data.train.n_queries,
        keys.TAG_N_TEST_QUERIES: data.test.n_queries,
        keys.TAG_N_VALI_QUERIES: data.vali.n_queries if data.vali is not None else 0,
        keys.TAG_DATA_PREFIX + "n_train_docs": data.train.n_docs,
        keys.TAG_DATA_PREFIX + "n_test_docs": data.test.n_docs,
        keys.TAG_PREPROCESSING: json.dumps(data.preprocessing.describe(), default=str),
    }
    model = str(tags[keys.TAG_MODEL])
    with tracker.run(
        keys.fold_run_name(model, split.name, refit_seed), fold_tags, parent_id=parent_id
    ) as run_id:
        tracker.log_params(run_id, params)
        tracker.log_inputs(run_id, inputs)
        ranker = build_ranker(cfg)
        with _timer(times, keys.TIME_FIT):
            ranker.fit(data.train, data.vali, logger=tracker.lightning_logger(run_id))
        evals = {}
        with _timer(times, keys.TIME_EVAL):
            for s, d in ((keys.SPLIT_VALI, data.vali), (keys.SPLIT_TEST, data.test)):
                if d is not None:
                    evals[s] = evaluate_split(cfg, ranker.score(d), d, s)
        metrics = {s: dict(e.means) for s, e in evals.items()}
        tracker.log_metrics(
            run_id, {keys.metric_key(s, n): v for s, d in metrics.items() for n, v in d.items()}
        )
        tracker.log_metrics(run_id, times)
        history = list(getattr(ranker, "history", []) or [])
        tracker.log_history(run_id, history)
        model_uri = None
        if tracker.enabled and tracker.log_artifacts_enabled:
            _log_fold_artifacts(tracker, run_id, evals, history)
            info = {
                "run_id": run_id,
                "fold": split.name,
                "model": tags.get(keys.TAG_MODEL),
                "dataset": tags.get(keys.TAG_DATASET),
                "eval": tags.get(keys.TAG_EVAL),
                "seed": tags.get(keys.TAG_SEED),
                "ltr_bench_version": tags.get(keys.TAG_VERSION),
            }
            if log_model(
                tracker,
                run_id,
                scoring_pipeline(cfg, data, ranker, dataset.relevance_threshold, info),
            ):
                model_uri = f"runs:/{run_id}/{MODEL_NAME}"
    fr = FoldResult(
        split.fold,
        split.name,
        metrics,
        times,
        data.train.n_queries,
        data.test.n_queries,
        run_id or None,
        model_uri,
    )
    return fr, fingerprint, inputs


def dataset_inputs(
    split: OuterSplit, parts: tuple[str, ...] = ("train", "vali", "test")
) -> list[dict[str, Any]]:
    """MLflow dataset inputs of one split: name ``mq2008/Fold1``, digest = the part's
    fingerprint, context train / vali / test, source = its file (LETOR) or generator."""
    out = []
    for part in parts:
        qs: QuerySet | None = getattr(split, part)
        if qs is None:
            continue
        source = {
            k: v
            for k, v in (qs.source or {}).items()
            if k in ("path", "sha256", "generator", "kind")
        }
        out.append(
            {
                "name": split.name,
                "digest": qs.fingerprint(),
                "context": part,
                "source_type": "local" if "path" in source else "code",
                "source": {"uri": source["path"]} if "path" in source else source,
                "profile": {"n_queries": qs.n_queries, "n_docs": qs.n_docs},
            }
        )
    return out


def scoring_pipeline(
    cfg: DictConfig, data: Prepared, ranker: Any, relevance_threshold: int, info: Mapping[str, Any]
) -> Any:
    """What a fold run saves as its model: the fitted preprocessing and ranker, the model config
    that rebuilds the ranker, and the evaluation's metric options (no data)."""
    from ltr_bench.saved_model import ScoringPipeline

    spec = OmegaConf.to_container(cfg.model, resolve=True)
    assert isinstance(spec, dict)
    for k in MODEL_META_KEYS:
        spec.pop(k, None)
    m = cfg.eval.metrics
    metrics = {
        "names": metric_names(cfg),
        "relevance_threshold": m.get("relevance_threshold", 1),
        "no_relevant": m.get("no_relevant", "drop"),
    }
    return ScoringPipeline(
        data.preprocessing,
        ranker,
        data.train.n_features,
        int(relevance_threshold),
        spec,
        metrics,
        {k: v for k, v in info.items() if v is not None},
    )


def log_model(tracker: Tracker, run_id: str, pipeline: Any) -> bool:
    """Save ``pipeline`` and log it as the run's MLflow model (a ranker without
    ``save_params`` logs a warning instead); True when a model was logged."""
    import logging

    from ltr_bench.saved_model import LOADER_MODULE, PYFUNC_OUTPUTS, pyfunc_inputs, save_pipeline
    from ltr_bench.tracking import PyfuncModel

    if not tracker.log_model_enabled:
        return False
    with tempfile.TemporaryDirectory(prefix="ltr_bench_model_") as tmp:
        try:
            folder = save_pipeline(pipeline, Path(tmp) / "pipeline")
        except NotImplementedError as exc:
            logging.getLogger(__name__).warning("no model logged: %s", exc)
            return False
        model_id = tracker.log_model(
            run_id,
            PyfuncModel(
                folder,
                LOADER_MODULE,
                pyfunc_inputs(pipeline.n_features),
                PYFUNC_OUTPUTS,
                pipeline.info,
            ),
        )
    return model_id is not None


def _run_inner_cv(
    cfg: DictConfig,
    protocol: Protocol,
    dataset: Dataset,
    tracker: Tracker,
    tags: dict[str, Any],
    ctx: JobContext,
    verbose: bool,
) -> RunResult:
    """A sweep trial: mean inner-CV metric on the training part(s); test is never scored."""
    sweep = cfg.get("sweep", {})
    study = sweep.get("study_name")
    trial = sweep.get("trial_number")
    # A re-evaluation of a top trial (the sweeper's `reevaluate`) scores the same config on the
    # inner-CV repeats after the search's own: folds and seeds it was not chosen on.
    reevaluation = bool(sweep.get("reevaluation", False))
    reporter = _trial_reporter(cfg)  # set when the sweeper races trials (hydra.sweeper.pruner)
    _quiet_trial_trainer(cfg)
    model, dataset_name = str(tags[keys.TAG_MODEL]), str(tags[keys.TAG_DATASET])
    sampler = _sampler_choice()
    sweep_id = tracker.find_or_create_sweep_run(
        str(study or "no-study"), tags, keys.sweep_run_name(model, dataset_name, sampler)
    )
    trial_tags = {**tags, keys.TAG_ROLE: keys.ROLE_TRIAL, keys.TAG_TRIAL: trial}
    name = keys.trial_run_name(model, trial, reevaluation)
    if reevaluation:
        trial_tags[keys.TAG_REEVALUATION] = "true"
    folds: list[FoldResult] = []
    split_names: list[str] = []
    with tracker.run(name, trial_tags, parent_id=sweep_id) as run_id:
        tracker.log_params(run_id, run_params(cfg, ctx.choices))
        pruned = False
        try:
            step = 0
            for pos in protocol.positions(dataset):
                if pruned:
                    break
                times: dict[str, float] = {}
                with _timer(times, keys.TIME_READ):
                    split = protocol.load(dataset, pos, with_test=False)
                split_names.append(split.name)
                tracker.log_inputs(run_id, dataset_inputs(split, ("train",)))
                for repeat, k, inner_train, inner_vali in protocol.inner_folds(
                    split.train, reevaluation
                ):
                    t: dict[str, float] = {keys.TIME_READ: times.pop(keys.TIME_READ, 0.0)}
                    with _timer(t, keys.TIME_READ):
                        data = prepare(
                            cfg,
                            protocol,
                            dataset.relevance_threshold,
                            inner_train,
                            split.vali,
                            inner_vali,
                            test_role="vali",
                            dataset=dataset,
                        )
                    assert data.test is not None
                    ranker = build_ranker(cfg, seed=seed_for_repeat(int(cfg.seed), repeat))
                    with _timer(t, keys.TIME_FIT):
                        ranker.fit(data.train, data.vali, logger=None)
                    with _timer(t, keys.TIME_EVAL):
                        ev = evaluate_split(
                            cfg, ranker.score(data.test), data.test, "the inner validation fold"
                        )
                    several = protocol.inner_repeats > 1 or reevaluation
                    inner = f"repeat{repeat}/inner{k}" if several else f"inner{k}"
                    fr = FoldResult(
                        step,
                        f"{split.name}/{inner}",
                        {"vali": dict(ev.means)},
                        t,
                        data.train.n_queries,
                        data.test.n_queries,
                    )
                    folds.append(fr)
                    tracker.log_metrics(
                        run_id,
                        {keys.metric_key(keys.SPLIT_CV_FOLD, n): v for n, v in ev.means.items()},
                        step=step,
                    )
                    step += 1
                    if reporter is not None and reporter.report(
                        _running_objective(cfg, folds), step
                    ):
                        pruned = True  # racing: the pruner stopped this trial after `step` folds
                        break
            result = _aggregate("inner_cv", cfg, folds)
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
        summary = {keys.metric_key(keys.SPLIT_CV, n): v for n, v in result.mean["vali"].items()}
        summary.update(
            {
                keys.metric_key(keys.SPLIT_CV, n) + keys.SE_SUFFIX: v
                for n, v in result.se["vali"].items()
            }
        )
        summary.update(result.times)
        summary[keys.OBJECTIVE] = result.objective
        tracker.log_metrics(run_id, summary)
        result.mlflow_run_id = run_id or None
        if pruned:
            tracker.set_tags(run_id, {keys.TAG_PRUNED: "true", keys.TAG_FOLDS_DONE: len(folds)})
    if tracker.enabled and sweep_id:
        scope = split_names[0] if len(split_names) == 1 else dataset_name
        tracker.rename(sweep_id, keys.sweep_run_name(model, scope, sampler))
        tracker.extend(sweep_id)
    if pruned:
        assert reporter is not None
        if verbose:
            print(
                f"{name}: pruned after {len(folds)} folds, running {result.objective_name} = "
                f"{result.objective:.4f}",
                flush=True,
            )
        raise reporter.pruned()
    if verbose:
        print(
            f"{name}: {result.objective_name} = {result.objective:.4f} "
            f"over {len(folds)} folds ({result.times[keys.TIME_FIT]:.1f} s fitting)",
            flush=True,
        )
    return result


def _trial_reporter(cfg: DictConfig) -> Any:
    """The job's handle for reporting its running objective into its Optuna trial, when the
    sweeper passed one (``sweep.storage`` + ``sweep.pruner``); the storage URL is redacted in
    ``cfg`` afterwards, so no password reaches the logged params."""
    from ltr_bench.sweeper.pruning import TrialReporter
    from ltr_bench.sweeper.storage import redact

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


# ------------------------------------------------------------------------------ aggregation
def _aggregate(mode: str, cfg: DictConfig, folds: list[FoldResult]) -> RunResult:
    from ltr_bench.stats import mean_se

    mean: dict[str, dict[str, float]] = {}
    se: dict[str, dict[str, float]] = {}
    splits = sorted(
        {s for f in folds for s in f.metrics},
        key=lambda s: ("vali", "test").index(s) if s in ("vali", "test") else 9,
    )
    for s in splits:
        names = [n for n in folds[0].metrics.get(s, {})]
        mean[s], se[s] = {}, {}
        for n in names:
            m, e, _ = mean_se([f.metrics.get(s, {}).get(n, math.nan) for f in folds])
            mean[s][n], se[s][n] = m, e
    times = {
        k: float(sum(f.times.get(k, 0.0) for f in folds))
        for k in (keys.TIME_READ, keys.TIME_FIT, keys.TIME_EVAL)
    }
    obj_metric = str(cfg.objective.metric)
    obj_split = "vali" if mode == "inner_cv" else str(cfg.objective.split)
    objective = mean.get(obj_split, {}).get(obj_metric)
    obj_name = f"{'inner-CV ' if mode == 'inner_cv' else ''}{obj_split} {obj_metric}"
    objective_se = se.get(obj_split, {}).get(obj_metric)
    return RunResult(mode, objective, obj_name, folds, objective_se, mean, se, times)


def format_results(cfg: DictConfig, result: RunResult) -> str:
    """The results table: per fold (if several) and mean (SE) of every metric, plus run times."""
    from ltr_bench.stats import format_mean_se

    names = metric_names(cfg)
    width = max(8, max(len(n) for n in names) + 1)
    several = len(result.folds) > 1
    cell = 11 if several else width
    lines = [f"{'':<22}" + "".join(f"{n:>{cell}}" for n in names)]
    if several:
        for f in result.folds:
            for s, d in f.metrics.items():
                lines.append(
                    f"{f.name[-14:] + ' ' + s:<22}"
                    + "".join(f"{d.get(n, math.nan):>{cell}.4f}" for n in names)
                )
        for s in result.mean:
            lines.append(
                f"{'mean(SE) ' + s:<22}"
                + "".join(
                    f"{format_mean_se(result.mean[s][n], result.se[s][n]):>{cell}}" for n in names
                )
            )
    else:
        for s, d in result.folds[0].metrics.items():
            lines.append(f"{s:<22}" + "".join(f"{d.get(n, math.nan):>{cell}.4f}" for n in names))
    t = result.times
    per = f" (sum over {len(result.folds)} folds)" if several else ""
    lines.append(
        f"run times{per}: read {t[keys.TIME_READ]:.2f} s, fit {t[keys.TIME_FIT]:.2f} s, "
        f"eval {t[keys.TIME_EVAL]:.2f} s"
    )
    if result.objective is not None:
        lines.append(f"objective ({result.objective_name}): {result.objective:.4f}")
    return "\n".join(lines)


def _short(metrics: Mapping[str, Mapping[str, float]], cfg: DictConfig) -> str:
    obj = str(cfg.objective.metric)
    parts = []
    for s in ("vali", "test"):
        if s in metrics:
            parts.append(f"{s} {obj}={metrics[s].get(obj, math.nan):.4f}")
    return ", ".join(parts)


def _results_json(cfg: DictConfig, result: RunResult, tracker: Tracker) -> dict[str, Any]:
    out = result.to_json()
    out["mlflow"] = {
        "tracking_uri": tracker.tracking_uri,
        "experiment_name": tracker.experiment_name,
        "run_id": result.mlflow_run_id,
    }
    out["config"] = OmegaConf.to_container(cfg, resolve=True)
    return out


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    return str(obj)


def _sampler_choice() -> str | None:
    """The sweep's sampler option (``tpe``, ``random``, ``grid``) inside a sweep job, else None."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    choice = HydraConfig.get().runtime.choices.get("hydra/sweeper/sampler")
    return str(choice) if choice else None


# ------------------------------------------------------------------------------ artifacts
def _log_fold_artifacts(
    tracker: Tracker, run_id: str, evals: Mapping[str, Any], history: list[dict]
) -> None:
    """Per-query metrics CSV and the learning-curve PNG of one fold run."""
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        frames = []
        for s, e in evals.items():
            f = e.to_frame().reset_index()
            f.insert(0, "split", s)
            frames.append(f)
        csv = Path(tmp) / "per_query_metrics.csv"
        pd.concat(frames, ignore_index=True).to_csv(csv, index=False)
        tracker.log_artifact(run_id, csv)
        png = Path(tmp) / "learning_curve.png"
        if plot_learning_curve(history, png):
            tracker.log_artifact(run_id, png)


def plot_learning_curve(history: list[Mapping[str, Any]], path: Path) -> bool:
    """Per-epoch training loss (left axis) and validation metrics (right axis) as a PNG.

    Other per-epoch values (learning rate, ...) are left out. Returns False if there is nothing
    to plot.
    """
    step_keys = ("epoch", "round", "iteration", "step")
    epochs = [next((r[k] for k in step_keys if k in r), i) for i, r in enumerate(history)]
    keys_ = list(
        dict.fromkeys(
            k
            for r in history
            for k, v in r.items()
            if isinstance(v, (int, float)) and k not in step_keys
        )
    )
    losses = [k for k in keys_ if "loss" in k]
    valis = [k for k in keys_ if k.startswith(("vali", "val_")) and "loss" not in k]
    if not losses and not valis:
        return False
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    series = {k: [float(r.get(k, math.nan)) for r in history] for k in losses + valis}
    fig, ax = plt.subplots(figsize=(6, 3.5))
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    handles = []
    for k in losses:
        handles += ax.plot(epochs, series[k], marker="o", ms=3, color=next(colors), label=k)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss" if losses else "")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if valis:
        ax2 = ax.twinx() if losses else ax
        for k in valis:
            handles += ax2.plot(
                epochs, series[k], marker="s", ms=3, ls="--", color=next(colors), label=k
            )
        ax2.set_ylabel("validation metric")
    ax.legend(handles, [h.get_label() for h in handles], loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
