"""MLflow tracking of ltr-bench runs: runs, params, metrics, run times, artifacts.

One :class:`Tracker` per job talks to MLflow through an explicit ``MlflowClient`` and run ids
(no global "active run"), so parent and child runs can be open at the same time and a run is
always ended by the ``with tracker.run(...)`` block that opened it — FINISHED on success, FAILED
on an error, KILLED on Ctrl-C / SIGTERM (see :func:`install_signal_handlers`). A run never stays
RUNNING because its process was interrupted.

Run hierarchy (roles from :mod:`ltr_bench.tracking_keys`):

- ``protocol``: one per ``ltr-bench`` run, with a ``fold`` child per outer fold / hold-out split;
- ``sweep``: one per Optuna study (found or created by the tag ``ltr.study``), with a ``trial``
  child per sweep job (inner-CV objective, no test metrics); the refit run of a study is a
  ``protocol`` run nested under the same sweep run.

The SQLite store and the experiment are created under an inter-process file lock (in the temp
dir, keyed by the database path): two processes creating a fresh ``mlflow.db`` at once otherwise
fail with ``duplicate column name: step``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import math
import os
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.errors import UserError

log = logging.getLogger(__name__)

# Tags beyond tracking_keys (sweeps and refits).
TAG_STUDY = "ltr.study"  # Optuna study name, on sweep, trial and refit runs
TAG_TRIAL = "ltr.trial_number"  # Optuna trial number, on trial runs
TAG_REEVALUATION = "ltr.reevaluation"  # "true" on a re-evaluation of a top trial (sweeper `reevaluate`)
TAG_REFIT = "ltr.refit"  # "true" on the protocol run that refits a sweep's best config
TAG_PARENT = "mlflow.parentRunId"  # MLflow's own nesting tag (the UI shows children under it)

_STEP_KEYS = ("epoch", "round", "iteration", "step")  # the x-axis of a ranker's history
_MAX_PARAM_LEN = 6000  # MLflow's limit on a param value
_MAX_KEY_LEN = 250


class RunTerminated(BaseException):
    """Raised in the main thread on SIGTERM, so ``finally`` blocks end runs as KILLED."""


def install_signal_handlers() -> None:
    """Turn SIGTERM into :class:`RunTerminated` (SIGINT already raises KeyboardInterrupt).

    Lightning's own SIGTERM handler chains to this one, so it also fires mid-training.
    """

    def _raise(signum: int, frame: Any) -> None:
        raise RunTerminated(f"terminated by signal {signum}")

    signal.signal(signal.SIGTERM, _raise)


# ---------------------------------------------------------------------------------------- helpers
def resolve_tracking_uri(uri: str | None, base_dir: str | os.PathLike[str]) -> str | None:
    """Make a relative ``sqlite:///relative.db`` absolute against ``base_dir``; other URIs pass."""
    if not uri:
        return uri
    prefix = "sqlite:///"
    if uri.startswith(prefix):
        path = uri[len(prefix) :]
        if path and path != ":memory:" and not os.path.isabs(path):
            return prefix + str((Path(base_dir) / path).resolve())
    return uri


def sqlite_path(uri: str | None) -> Path | None:
    """The database file of a ``sqlite:///`` URI, else None."""
    if uri and uri.startswith("sqlite:///"):
        return Path(uri[len("sqlite:///") :])
    return None


def sanitize_key(key: str) -> str:
    """An MLflow-safe metric/param key: ``@`` -> ``_at_``, other odd characters -> ``_``."""
    key = key.replace("@", "_at_")
    out = "".join(c if (c.isalnum() or c in "_-./ ") else "_" for c in key)
    return out[:_MAX_KEY_LEN]


def curve_key(key: str) -> str:
    """MLflow key of a per-epoch value: ``vali/ndcg@10`` / ``vali_ndcg@10`` -> ``vali_ndcg_at_10``.

    Learning curves use ``_`` where final metrics use ``/`` (``vali/ndcg_at_10`` is the final
    validation metric of a fold), so the two never share a key.
    """
    return sanitize_key(key).replace("/", "_")


def flatten_config(cfg: DictConfig | Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """The resolved config as flat ``{"a.b.c": "value"}`` strings (lists as JSON), ``hydra`` left out."""
    if isinstance(cfg, DictConfig):
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    else:
        data = dict(cfg)
    out: dict[str, str] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping) and node:
            for k, v in node.items():
                if not path and k == "hydra":
                    continue
                walk(v, f"{path}.{k}" if path else str(k))
        else:
            text = node if isinstance(node, str) else json.dumps(node, default=str)
            out[sanitize_key(path)] = text[:_MAX_PARAM_LEN]

    walk(data, prefix)
    return out


def git_commit(repo_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The checked-out git commit of the package's repository, or None (no git, not a clone).

    Without ``repo_dir``: the folder holding the package, only if it is a git checkout itself
    (has ``.git``), so an installed wheel inside some other repository tags no foreign commit."""
    if repo_dir is None:
        repo_dir = Path(__file__).resolve().parent.parent
        if not (repo_dir / ".git").exists():
            return None
    try:
        res = subprocess.run(
            ["git", "-C", str(repo_dir), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return res.stdout.strip() or None if res.returncode == 0 else None


def _store_lock(tracking_uri: str | None) -> Any:
    """An exclusive inter-process lock for a SQLite store (a no-op for servers).

    The lock file lives in the temp dir, keyed by the database path, so nothing is written beside
    the user's database.
    """
    db = sqlite_path(tracking_uri)
    if db is None:
        return contextlib.nullcontext()
    import hashlib

    from filelock import FileLock

    digest = hashlib.sha1(str(db.resolve()).encode()).hexdigest()[:16]
    return FileLock(str(Path(tempfile.gettempdir()) / f"ltr_bench-mlflow-{digest}.lock"))


def _quiet_mlflow() -> None:
    for name in ("mlflow", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)


def ensure_experiment(
    tracking_uri: str, name: str, artifact_location: str | None = None
) -> str:
    """Create the store (if new) and the experiment ``name`` (if missing); return its id.

    For a SQLite store this happens under an exclusive inter-process file lock, so any
    number of parallel jobs may call it; for a server, a creation race is resolved by re-reading.
    """
    import mlflow
    from mlflow.exceptions import MlflowException

    _quiet_mlflow()
    db = sqlite_path(tracking_uri)
    if db is not None:
        if not db.parent.exists():
            raise UserError(
                f"tracking.tracking_uri={tracking_uri}: folder {db.parent} does not exist; "
                "create it or point tracking.tracking_uri elsewhere"
            )
        if artifact_location is None:
            artifact_location = str(db.parent / "mlruns" / sanitize_key(name).replace("/", "_"))
    with _store_lock(tracking_uri):
        client = mlflow.MlflowClient(tracking_uri)
        try:
            exp = client.get_experiment_by_name(name)
        except MlflowException as exc:  # unreachable server, bad URI
            raise UserError(
                f"tracking.tracking_uri={tracking_uri}: cannot reach the MLflow store ({exc}); "
                "start the server or use tracking=mlflow"
            ) from None
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                client.restore_experiment(exp.experiment_id)
            return exp.experiment_id
        try:
            return client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id


# ---------------------------------------------------------------------------------------- tracker
class Tracker:
    """Runs of one experiment in one MLflow store; every method takes an explicit ``run_id``."""

    enabled = True

    def __init__(
        self,
        tracking_uri: str,
        experiment_name: str,
        *,
        artifact_location: str | None = None,
        log_model: bool = True,
        log_artifacts: bool = True,
        register_model: str | None = None,
    ) -> None:
        import mlflow

        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.log_model_enabled = log_model
        self.log_artifacts_enabled = log_artifacts
        self.register_model = str(register_model) if register_model else None
        self.experiment_id = ensure_experiment(tracking_uri, experiment_name, artifact_location)
        self.client = mlflow.MlflowClient(tracking_uri)

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_config(tracking: DictConfig | Mapping[str, Any], base_dir: str | os.PathLike[str]) -> "Tracker":
        """A Tracker for the ``tracking`` config group, or a no-op one when disabled / not rank 0."""
        if not tracking.get("enabled", True) or not is_rank_zero():
            return NullTracker()
        uri = resolve_tracking_uri(tracking.get("tracking_uri"), base_dir)
        if not uri:
            raise UserError("tracking.tracking_uri is empty; set it or use tracking=none")
        return Tracker(
            uri,
            str(tracking.get("experiment_name") or "ltr_bench"),
            artifact_location=tracking.get("artifact_location"),
            log_model=bool(tracking.get("log_model", True)),
            log_artifacts=bool(tracking.get("log_artifacts", True)),
            register_model=tracking.get("register_model"),
        )

    # ------------------------------------------------------------------ runs
    def start_run(
        self, name: str, tags: Mapping[str, Any], parent_id: str | None = None
    ) -> str:
        """Create a RUNNING run (nested under ``parent_id`` if given); return its id."""
        all_tags = {k: str(v) for k, v in tags.items() if v is not None}
        if parent_id:
            all_tags[TAG_PARENT] = parent_id
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name)
        return run.info.run_id

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)

    @contextlib.contextmanager
    def run(
        self, name: str, tags: Mapping[str, Any], parent_id: str | None = None
    ) -> Iterator[str]:
        """``with tracker.run(...) as run_id:`` — ends FINISHED, FAILED (error) or KILLED (signal)."""
        run_id = self.start_run(name, tags, parent_id)
        status = "FAILED"
        try:
            yield run_id
            status = "FINISHED"
        except (KeyboardInterrupt, RunTerminated, SystemExit):
            status = "KILLED"
            raise
        finally:
            with _signals_deferred():
                try:
                    self.end_run(run_id, status)
                except Exception as exc:  # never mask the original error
                    log.warning("could not end MLflow run %s as %s: %s", run_id, status, exc)

    def find_or_create_sweep_run(self, study_name: str, tags: Mapping[str, Any]) -> str:
        """The ``sweep`` run of an Optuna study (tag ``ltr.study``), created on first use.

        Created FINISHED (it is a container; trials and the refit nest under it) so that no
        sweep run is ever left RUNNING; the sweeper may still log plots to it.
        """
        # Filter on the role only and match the study name here: names may hold any character.
        filt = f"tags.`{keys.TAG_ROLE}` = '{keys.ROLE_SWEEP}'"
        with _store_lock(self.tracking_uri):
            for run in self.client.search_runs([self.experiment_id], filt, max_results=50_000):
                if run.data.tags.get(TAG_STUDY) == study_name:
                    return run.info.run_id
            run_id = self.start_run(
                study_name, {**tags, TAG_STUDY: study_name, keys.TAG_ROLE: keys.ROLE_SWEEP}
            )
            self.end_run(run_id, "FINISHED")
            return run_id

    # ------------------------------------------------------------------ logging
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [
            Param(sanitize_key(str(k)), str(v)[:_MAX_PARAM_LEN]) for k, v in params.items()
        ]
        if items:
            self.client.log_batch(run_id, params=items)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items() if v is not None]
        if items:
            self.client.log_batch(run_id, tags=items)

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        """Log finite values (NaN/inf, e.g. the SE of one fold, are skipped)."""
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = []
        for k, v in metrics.items():
            if v is None:
                continue
            v = float(v)
            if not math.isfinite(v):
                log.debug("metric %s = %s not logged", k, v)
                continue
            items.append(Metric(sanitize_key(k), v, now, int(step or 0)))
        if items:
            self.client.log_batch(run_id, metrics=items)

    def log_history(self, run_id: str, history: list[Mapping[str, Any]]) -> None:
        """Per-epoch records as step metrics (step = ``epoch``/``round``; keys via
        :func:`curve_key`), except keys already logged (a Lightning ranker that logged through
        :meth:`lightning_logger`)."""
        if not history:
            return
        import time

        from mlflow.entities import Metric

        logged = set(self.client.get_run(run_id).data.metrics)
        now = int(time.time() * 1000)
        items = []
        for i, rec in enumerate(history):
            step = int(next((rec[s] for s in _STEP_KEYS if s in rec), i))
            for k, v in rec.items():
                key = curve_key(k)
                if k in _STEP_KEYS or key in logged or not isinstance(v, (int, float)):
                    continue
                if math.isfinite(float(v)):
                    items.append(Metric(key, float(v), now + i, step))
        if items:
            self.client.log_batch(run_id, metrics=items)

    def log_artifact(self, run_id: str, path: str | os.PathLike[str], artifact_path: str | None = None) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def log_model(self, run_id: str, model: "PyfuncModel") -> str | None:
        """A saved model as the MLflow ``pyfunc`` model ``model`` of the run (registered under
        ``tracking.register_model`` when set); returns its model id, None if it could not be
        logged (a warning; the run keeps its results)."""
        if not self.log_model_enabled:
            return None
        try:
            return log_pyfunc_model(self.client, self.experiment_id, run_id, model, self.register_model)
        except Exception as exc:  # noqa: BLE001 - a model that cannot be logged keeps its run
            log.warning("no model logged: %s", exc)
            return None

    def lightning_logger(self, run_id: str) -> Any:
        """A Lightning ``MLFlowLogger`` writing per-epoch metrics into the run ``run_id``."""
        return _RunLogger(
            experiment_name=self.experiment_name,
            tracking_uri=self.tracking_uri,
            run_id=run_id,
        )


class NullTracker(Tracker):
    """Tracking switched off (tracking=none, or a DDP rank other than 0): every call is a no-op."""

    enabled = False

    def __init__(self) -> None:  # noqa: D107 - nothing to set up
        self.tracking_uri = None
        self.experiment_name = None
        self.experiment_id = None
        self.log_model_enabled = False
        self.log_artifacts_enabled = False
        self.register_model = None

    def start_run(self, name: str, tags: Mapping[str, Any], parent_id: str | None = None) -> str:
        return ""

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        pass

    def find_or_create_sweep_run(self, study_name: str, tags: Mapping[str, Any]) -> str:
        return ""

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        pass

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        pass

    def log_metrics(self, run_id: str, metrics: Mapping[str, float], step: int | None = None) -> None:
        pass

    def log_history(self, run_id: str, history: list[Mapping[str, Any]]) -> None:
        pass

    def log_artifact(self, run_id: str, path: Any, artifact_path: str | None = None) -> None:
        pass

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        pass

    def log_model(self, run_id: str, model: "PyfuncModel") -> str | None:
        return None

    def lightning_logger(self, run_id: str) -> Any:
        return None


MODEL_NAME = "model"  # the logged model's name: runs:/<run id>/model


@dataclasses.dataclass(frozen=True)
class PyfuncModel:
    """What :func:`log_pyfunc_model` logs: a folder that ``loader_module._load_pyfunc`` reads,
    and the signature's columns as ``(name, MLflow type, required)``."""

    data_dir: Path
    loader_module: str
    inputs: Sequence[tuple[str, str, bool]]
    outputs: Sequence[tuple[str, str, bool]]
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)


_EXAMPLE_DTYPES = {"long": "int64", "integer": "int32", "float": "float32", "double": "float64"}


def log_pyfunc_model(
    client: Any, experiment_id: str, run_id: str, model: PyfuncModel, register_as: str | None = None
) -> str:
    """Log ``model`` as the MLflow model ``model`` of run ``run_id``; return its model id.

    A ``pyfunc`` flavour with a ``loader_module`` (no pickled Python object) and a signature, so
    it appears under the run's and the experiment's "Logged models" and loads with
    ``mlflow.pyfunc.load_model("runs:/<run id>/model")``; with ``register_as`` it also becomes the
    next version of that registered model (``models:/<name>/latest``).
    """
    import mlflow
    import numpy as np
    import pandas as pd
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.exceptions import MlflowException
    from mlflow.models import Model, ModelSignature
    from mlflow.types import ColSpec, Schema

    _quiet_mlflow()
    signature = ModelSignature(
        inputs=Schema([ColSpec(t, n, required=r) for n, t, r in model.inputs]),
        outputs=Schema([ColSpec(t, n, required=r) for n, t, r in model.outputs]),
    )
    example = pd.DataFrame({n: np.zeros(2, dtype=_EXAMPLE_DTYPES.get(t, "float64"))
                            for n, t, _ in model.inputs})
    logged = client.create_logged_model(experiment_id, name=MODEL_NAME, source_run_id=run_id,
                                        params={k: str(v) for k, v in model.params.items()})
    try:
        with tempfile.TemporaryDirectory(prefix="ltr_bench_model_") as tmp:
            local = Path(tmp) / MODEL_NAME
            mlflow.pyfunc.save_model(
                str(local), loader_module=model.loader_module, data_path=str(model.data_dir),
                signature=signature, input_example=example, pip_requirements=_model_requirements(),
                mlflow_model=Model(artifact_path=logged.artifact_location, run_id=run_id,
                                   model_id=logged.model_id, model_uuid=logged.model_id),
            )
            client.log_model_artifacts(logged.model_id, str(local))
        client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, step=0)])
    except BaseException:
        client.finalize_logged_model(logged.model_id, LoggedModelStatus.FAILED)
        raise
    client.finalize_logged_model(logged.model_id, LoggedModelStatus.READY)
    if register_as:
        try:
            client.create_registered_model(register_as)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        # source: the artifact location, not models:/<id> (MLflow resolves that one through the
        # global tracking URI, which this client-only gateway never sets)
        client.create_model_version(register_as, source=logged.artifact_location, run_id=run_id,
                                    model_id=logged.model_id)
    return logged.model_id


def _model_requirements() -> list[str]:
    """The logged model's pip requirements: ltr_bench and the libraries that score (pinned to
    the versions that trained it), so MLflow need not infer them by loading the model."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in ("ltr_bench", "torch", "lightgbm", "numpy", "pandas", "mlflow"):
        try:
            out.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            continue
    return out


def is_rank_zero() -> bool:
    """False inside a DDP worker process other than rank 0 (only rank 0 tracks and writes).

    The variables Lightning reads a rank from: its own launcher and torchrun set ``RANK`` /
    ``LOCAL_RANK`` / ``NODE_RANK``, SLURM sets ``SLURM_PROCID`` for each task of ``srun``.
    """
    for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"):
        if os.environ.get(var, "0") not in ("", "0"):
            return False
    return True


def log_study_to_mlflow(
    config: DictConfig, study_name: str, summary: Mapping[str, Any], files: list[Path]
) -> None:
    """The ``sweep.on_study_end`` hook: attach a finished Optuna study to its MLflow ``sweep`` run.

    Logs the study's plots and ``trials.csv`` as artifacts, its best value (with its SE and the
    number of trials within one SE of it, when the trials report an SE) and trial counts as
    metrics and its best parameters as tags (``ltr.best.<key>``; tags, unlike params, may change
    when a resumed study finds a better trial). The sweep run is the one the trials nest under.
    """
    tracking = config.get("tracking")
    if tracking is None:
        return
    base_dir = OmegaConf.select(config, "hydra.runtime.cwd", default=None) or os.getcwd()
    tracker = Tracker.from_config(tracking, base_dir)
    if not tracker.enabled:
        return
    tags = {
        keys.TAG_MODEL: OmegaConf.select(config, "model.name", default=None),
        keys.TAG_DATASET: OmegaConf.select(config, "dataset.name", default=None),
        keys.TAG_PROTOCOL: OmegaConf.select(config, "protocol.name", default=None),
    }
    run_id = tracker.find_or_create_sweep_run(study_name, tags)
    for path in files:
        tracker.log_artifact(run_id, path, "study")
    tracker.log_metrics(run_id, {
        "best_objective": summary.get("best_value"),
        "best_objective_se": summary.get("best_value_se"),
        "n_trials_within_one_se": summary.get("n_within_one_se"),
        "n_trials_complete": summary.get("n_complete"),
        # with re-evaluated top trials: best_objective is the chosen trial's pooled value
        "search_best_objective": summary.get("search_best_value"),
        "n_trials_reevaluated": len(summary["reevaluated"]) if summary.get("reevaluated") else None,
        "n_trials_failed": summary.get("n_failed"),
    })
    best = {f"ltr.best.{k}": v for k, v in (summary.get("best_params") or {}).items()}
    if summary.get("best_trial") is not None:
        best["ltr.best_trial"] = summary["best_trial"]
    tracker.set_tags(run_id, best)


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while a run is being ended, so a second Ctrl-C cannot leave it RUNNING."""
    received: list[int] = []
    try:
        old = {s: signal.signal(s, lambda n, f: received.append(n)) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not in the main thread: signals cannot arrive here anyway
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        if received:
            signal.raise_signal(received[0])


def _make_run_logger_class() -> type:
    from lightning.pytorch.loggers import MLFlowLogger

    class RunLogger(MLFlowLogger):
        """MLFlowLogger bound to an existing run that the Tracker (not Lightning) ends.

        Per-epoch metric names go through :func:`curve_key` (``vali/ndcg@10`` ->
        ``vali_ndcg_at_10``, the same names as a ranker's ``history``), with the epoch as step;
        hyperparameters are logged with an ``hparams.`` prefix so they never clash with the
        flattened config params.
        """

        def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
            if "epoch" in metrics:  # Lightning adds the epoch to epoch-level logs: use it as step
                step = int(metrics["epoch"])
            super().log_metrics({curve_key(k): v for k, v in metrics.items() if k != "epoch"}, step)

        def log_hyperparams(self, params: Any) -> None:
            try:
                from lightning.fabric.utilities.logger import _convert_params, _flatten_dict

                flat = _flatten_dict(_convert_params(params))
                self.experiment.log_batch(
                    self.run_id,
                    params=[
                        __import__("mlflow").entities.Param(
                            sanitize_key(f"hparams.{k}"), str(v)[:_MAX_PARAM_LEN]
                        )
                        for k, v in flat.items()
                    ],
                )
            except Exception as exc:  # hparams are a convenience; never fail a run over them
                log.debug("hparams not logged: %s", exc)

        def finalize(self, status: str = "success") -> None:
            """Leave the run open: the Tracker ends it after test metrics and artifacts."""

    return RunLogger


class _LazyRunLogger:
    cls: type | None = None

    def __call__(self, **kwargs: Any) -> Any:
        if _LazyRunLogger.cls is None:
            _LazyRunLogger.cls = _make_run_logger_class()
        return _LazyRunLogger.cls(**kwargs)


_RunLogger = _LazyRunLogger()
