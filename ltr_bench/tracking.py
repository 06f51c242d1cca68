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

What a run shows in the UI is decided here: its params are its config's choices
(:func:`run_params`), machine facts are tags (:func:`machine_tags`), MLflow's standard fields come
from MLflow's run-context registry (:func:`context_tags`) with the command line as description,
and every printed link opens the machine-learning view with a filter (:func:`format_links`).
Readers (the report) go through :func:`open_client` / :func:`runs_frame`, never through the
process-wide tracking URI.

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
import re
import signal
import subprocess
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.errors import UserError

log = logging.getLogger(__name__)

# Names re-exported for callers that import them from here (the names live in tracking_keys).
TAG_STUDY = keys.TAG_STUDY
TAG_TRIAL = keys.TAG_TRIAL
TAG_REEVALUATION = keys.TAG_REEVALUATION
TAG_REFIT = keys.TAG_REFIT
TAG_PARENT = keys.MLFLOW_PARENT

_STEP_KEYS = ("epoch", "round", "iteration", "step")  # the x-axis of a ranker's history
_MAX_PARAM_LEN = 6000  # MLflow's limit on a param value
_MAX_TAG_LEN = 8000
_MAX_KEY_LEN = 250
_UI_DEFAULT = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store


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
    """MLflow key of a per-epoch value a ranker names ``vali_ndcg@10`` -> ``curve/vali_ndcg_at_10``.

    Learning curves live under their own prefix, so they never sit beside (or share a key with)
    the final ``vali/ndcg_at_10`` of a fold.
    """
    return keys.curve_key(sanitize_key(key))


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


# ------------------------------------------------------------------------------- run params
def run_params(cfg: DictConfig, choices: Mapping[str, str] | None = None) -> dict[str, str]:
    """The run's choices as MLflow params (the policy is in :mod:`ltr_bench.tracking_keys`).

    - ``model``, ``loss``, ... : the chosen option of each group (``keys.CHOICE_GROUPS``);
    - every value of the hyperparameter groups (``model.dropout``, ``optimizer.lr``, ...), so
      models of one family share one key set;
    - ``seed``, ``objective.metric``, ``objective.split``;
    - in the other groups (dataset, protocol, eval, trainer) only values that differ from the
      chosen option's file (``dataset.fold=1``): the option's name stands for the rest.

    Each value once: a value that only refers to another key (``model.loss: ${loss}``,
    ``model.seed: ${seed}``) is left out, and so are config metadata (``_target_``, ``accepts``)
    and machine facts (``keys.MACHINE_KEYS``, logged by :func:`machine_tags`).
    """
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)
    choices = dict(choices or {})
    out: dict[str, str] = {}
    for group in keys.CHOICE_GROUPS:
        node = cfg.get(group)
        name = node.get("name") if isinstance(node, DictConfig) else node
        name = name if name is not None else choices.get(group)
        if name is not None:
            out[group] = str(name)
    for key in keys.TOP_LEVEL_PARAMS:
        _walk_params(cfg, raw.get(key), key, out, reference=_ALL)
    for group in keys.CHOICE_GROUPS:
        if not isinstance(raw.get(group), dict):
            continue
        reference: Any = _ALL
        if group not in keys.HYPERPARAMETER_GROUPS:
            if group not in out:  # a group without a name key, outside a Hydra job
                option = _closest_option(group, raw[group])
                if option is not None:
                    out[group] = option
            found = _option_file(group, out.get(group))
            reference = _ALL if found is None else found
        _walk_params(cfg, raw[group], group, out, reference)
    return out


def _walk_params(
    cfg: DictConfig, node: Any, path: str, out: dict[str, str], reference: Any, depth: int = 0
) -> None:
    """Leaves of the unresolved ``node`` at ``path`` -> resolved param strings (see run_params)."""
    if node is None and depth == 0:
        return
    if isinstance(node, dict) and node:
        for k, v in node.items():
            if k in keys.META_KEYS and (depth == 0 or k.startswith("_")):
                continue
            ref = (
                reference.get(k, _MISSING)
                if isinstance(reference, dict)
                else (_ALL if reference is _ALL else _MISSING)
            )
            _walk_params(cfg, v, f"{path}.{k}", out, ref, depth + 1)
        return
    if path in keys.MACHINE_KEYS or _refers_to_node(node):
        return
    if reference is not _ALL and reference is not _MISSING and reference == node:
        return  # the chosen option's own value: its name stands for it
    value = OmegaConf.select(cfg, path, throw_on_resolution_failure=False)
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    out[sanitize_key(path)] = text[:_MAX_PARAM_LEN]


_MISSING = object()  # no such key in the option's file: the value is logged
_ALL = object()  # no reference at all (hyperparameter groups): every value is logged


def _refers_to_node(value: Any) -> bool:
    """``${a.b}`` (another key's value, logged there) but not ``${oc.env:X}`` (a resolver)."""
    return isinstance(value, str) and re.fullmatch(r"\$\{[\w.\[\]]+\}", value) is not None


def _option_file(group: str, option: str | None) -> dict[str, Any] | None:
    """The raw content of ``conf/<group>/<option>.yaml`` (None when not found: every value is
    then logged). Looked up in the running Hydra app's config sources, else beside the package."""
    if not option:
        return None
    for root in _config_roots():
        path = root / group / f"{option}.yaml"
        if path.is_file():
            data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
            if isinstance(data, dict):
                data.pop("defaults", None)
                return data
    return None


def _closest_option(group: str, node: dict[str, Any]) -> str | None:
    """The option of ``group`` whose file has the most values in common with ``node``."""
    best, best_score = None, 0
    for root in _config_roots():
        for path in sorted((root / group).glob("*.yaml")) if (root / group).is_dir() else []:
            data = OmegaConf.to_container(OmegaConf.load(path), resolve=False)
            if isinstance(data, dict):
                score = sum(1 for k, v in node.items() if data.get(k, _MISSING) == v)
                if score > best_score:
                    best, best_score = path.stem, score
        if best is not None:
            return best
    return best


def _config_roots() -> list[Path]:
    roots: list[Path] = []
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            for source in HydraConfig.get().runtime.config_sources:
                if str(source.get("schema")) == "file" and source.get("provider") == "main":
                    roots.append(Path(str(source.get("path"))))
    except Exception:  # noqa: BLE001 - fall back to the package's own tree
        pass
    here = Path(__file__).resolve().parent
    roots += [here / "conf", here.parent / "conf"]
    return roots


def machine_tags(cfg: DictConfig) -> dict[str, str]:
    """Facts about the machine rather than choices (threads, data paths, host name), as tags."""
    import socket

    out = {keys.TAG_HOST: socket.gethostname()}
    for key in keys.MACHINE_KEYS:
        value = OmegaConf.select(cfg, key, default=None, throw_on_resolution_failure=False)
        if value is not None:
            out[keys.TAG_MACHINE_PREFIX + key] = str(value)
    return out


def data_tags(facts: Mapping[str, Any]) -> dict[str, str]:
    """A dataset's description (sizes, paths, generator settings) as ``ltr.data.*`` tags."""
    return {keys.TAG_DATA_PREFIX + k: v for k, v in flatten_config(facts).items()}


# ------------------------------------------------------------------------- MLflow's own fields
def command_line() -> str:
    """The command that reproduces this job: ``ltr-bench <overrides>``; for a job of a multirun,
    its own overrides, followed by the command that started the multirun."""
    import shlex
    import sys

    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "python"
    if prog in ("cli.py", "__main__.py", "-c", "-m"):
        prog = "ltr-bench"
    started = " ".join([prog, *map(shlex.quote, sys.argv[1:])])
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
            job = [o for o in HydraConfig.get().overrides.task]
            return f"{prog} {' '.join(map(shlex.quote, job))}\n\n(a job of: {started})"
    except Exception:  # noqa: BLE001 - a description is never worth failing a run
        pass
    return started


_CONTEXT: dict[str, str] | None = None


def context_tags() -> dict[str, str]:
    """MLflow's standard run tags from its run-context registry (``mlflow.user``,
    ``mlflow.source.name`` / ``.type``, ``mlflow.source.git.commit``, plus any installed
    context-provider plugin), computed once per process; the git commit of the package's
    checkout is filled in when MLflow found none (e.g. started from outside the clone)."""
    global _CONTEXT
    if _CONTEXT is None:
        from mlflow.tracking.context.registry import resolve_tags

        try:
            tags = {k: str(v) for k, v in resolve_tags({}).items()}
        except Exception as exc:  # noqa: BLE001 - context is a convenience
            log.debug("MLflow run context not resolved: %s", exc)
            tags = {}
        if keys.MLFLOW_GIT_COMMIT not in tags:
            commit = git_commit()
            if commit:
                tags[keys.MLFLOW_GIT_COMMIT] = commit
        _CONTEXT = tags
    return dict(_CONTEXT)


def invocation_id() -> str:
    """One id per ``ltr-bench`` command: every job of a multirun (also in launcher worker
    processes) shares it, as they share Hydra's sweep folder. Filter on it to see what one
    command made (tag ``ltr.invocation``)."""
    import hashlib

    root = None
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode

        if HydraConfig.initialized():
            hc = HydraConfig.get()
            root = hc.sweep.dir if hc.mode == RunMode.MULTIRUN else hc.run.dir
            root = str(Path(hc.runtime.cwd) / str(root))
    except Exception:  # noqa: BLE001
        root = None
    if root is None:
        root = os.environ.setdefault("LTR_BENCH_INVOCATION", f"{os.getpid()}-{os.urandom(4).hex()}")
    return hashlib.sha1(root.encode()).hexdigest()[:10]


# ------------------------------------------------------------------------------ links to the UI
def ui_base(tracking_uri: str | None) -> str:
    """Where the MLflow UI of ``tracking_uri`` is served: the server itself for an http(s)
    store, else ``mlflow ui``'s default address."""
    if tracking_uri and tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return _UI_DEFAULT


def ui_link(
    tracking_uri: str | None,
    experiment_id: str,
    search_filter: str | None = None,
    run_id: str | None = None,
    view: str | None = None,
) -> str:
    """A link that opens the experiment's runs (or one run) in MLflow's machine-learning view
    (``workflowType=machine_learning``; MLflow 3's default is the GenAI view), filtered, or in a
    saved ``view`` (its own filter and columns: MLflow 3.17 does not combine the two)."""
    from urllib.parse import quote, urlencode

    path = f"/#/experiments/{quote(str(experiment_id))}"
    path += f"/runs/{run_id}" if run_id else "/runs"
    query = {"workflowType": "machine_learning"}
    if view:
        query["viewStateShareKey"] = view
    elif search_filter:
        query["searchFilter"] = search_filter
    return ui_base(tracking_uri) + path + "?" + urlencode(query, quote_via=quote)


def filter_eq(tag: str, value: str) -> str:
    """A search filter ``tags.`<tag>` = '<value>'`` (backticks: the names hold dots)."""
    return f"tags.`{tag}` = '{value}'"


def format_links(
    tracking_uri: str | None,
    experiment_id: str,
    search_filter: str,
    what: str,
    run_id: str | None = None,
) -> str:
    """The lines printed after a run, sweep or report: how to open the UI and the links."""
    lines = []
    if not (tracking_uri or "").startswith(("http://", "https://")):
        lines.append(
            f"MLflow UI: mlflow ui --backend-store-uri {tracking_uri}   (then open the links)"
        )
    lines.append(f"  {what}: {ui_link(tracking_uri, experiment_id, search_filter)}")
    lines.append(f"  filter:  {search_filter}")
    lines.append(
        f"  with metric columns (view '{keys.SAVED_VIEW_NAME}'; paste the filter there): "
        f"{ui_link(tracking_uri, experiment_id, view=keys.SAVED_VIEW_ID)}"
    )
    if run_id:
        lines.append(f"  run:     {ui_link(tracking_uri, experiment_id, run_id=run_id)}")
    return "\n".join(lines)


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


def ensure_experiment(tracking_uri: str, name: str, artifact_location: str | None = None) -> str:
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
        try:
            client = mlflow.MlflowClient(tracking_uri)  # opens (and migrates) a SQLite store
            exp = client.get_experiment_by_name(name)
        except MlflowException as exc:  # unreachable server, bad URI
            raise UserError(
                f"tracking.tracking_uri={tracking_uri}: cannot reach the MLflow store ({exc}); "
                "start the server or use tracking=mlflow"
            ) from None
        except Exception as exc:
            if db is not None and _is_not_a_database(exc):
                raise UserError(
                    f"tracking.tracking_uri={tracking_uri}: {db} is not a SQLite database; "
                    "move it away or point tracking.tracking_uri elsewhere"
                ) from None
            raise
        ui_tags = experiment_ui_tags()  # the "Machine learning" kind and a view with metric columns
        if exp is not None:
            if exp.lifecycle_stage == "deleted":
                client.restore_experiment(exp.experiment_id)
            for key, value in ui_tags.items():
                if key not in (exp.tags or {}):
                    client.set_experiment_tag(exp.experiment_id, key, value)
            return exp.experiment_id
        try:
            return client.create_experiment(name, artifact_location=artifact_location, tags=ui_tags)
        except MlflowException:
            exp = client.get_experiment_by_name(name)
            if exp is None:
                raise
            return exp.experiment_id


def _is_not_a_database(exc: BaseException) -> bool:
    """True when ``exc`` (or what it wraps) is SQLite's "file is not a database" (a garbage file)."""
    import sqlalchemy.exc

    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, sqlalchemy.exc.DatabaseError) and "not a database" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


def experiment_ui_tags() -> dict[str, str]:
    """Experiment tags for MLflow's UI: the "Machine learning" experiment kind (read by MLflow
    3.x UIs before 3.17; 3.17 takes the view from the URL, see :func:`ui_link`) and a saved view
    of the runs table with the metric columns a comparison needs (``keys.VIEW_COLUMNS``), which
    3.17 opens from the "Views" menu or ``?viewStateShareKey=ltr-bench-metrics``. The view's state
    follows MLflow 3.17's format (an internal one: another version ignores or rejects the view,
    never the runs)."""
    import time

    state = {
        "searchFilter": "",
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": list(keys.VIEW_COLUMNS),
        "columnOrder": [],
        "columnWidths": {},
        "runsExpanded": {},
        "runsPinned": [],
        "runsHidden": [],
        "runsVisibilityMap": {},
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "groupBy": None,
        "groupsExpanded": {},
        "autoRefreshEnabled": True,
        "globalLineChartConfig": {
            "xAxisKey": "step",
            "lineSmoothness": 0,
            "selectedXAxisMetricKey": "",
        },
    }
    now = int(time.time() * 1000)
    view = {
        "name": keys.SAVED_VIEW_NAME,
        "createdAt": now,
        "updatedAt": now,
        "state": json.dumps(state),
    }
    return {
        keys.EXPERIMENT_KIND: keys.EXPERIMENT_KIND_ML,
        keys.SAVED_VIEW_PREFIX + keys.SAVED_VIEW_ID: json.dumps(view),
    }


# ----------------------------------------------------------------------------------- reading runs
def open_client(tracking_uri: str) -> Any:
    """An ``MlflowClient`` bound to ``tracking_uri`` (never the process-wide tracking URI)."""
    import mlflow

    _quiet_mlflow()
    return mlflow.MlflowClient(tracking_uri)


def find_experiment(tracking_uri: str, name: str) -> tuple[str | None, list[str]]:
    """``(id of the experiment called name or None, names of up to 50 experiments)``."""
    client = open_client(tracking_uri)
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id, []
    return None, sorted(e.name for e in client.search_experiments(max_results=50))


def download_run_artifact(
    tracking_uri: str, run_id: str, path: str, dst: str | os.PathLike[str]
) -> Path:
    """The artifact ``path`` of run ``run_id``, downloaded into the folder ``dst``; its local path."""
    client = open_client(tracking_uri)
    Path(dst).mkdir(parents=True, exist_ok=True)
    return Path(client.download_artifacts(run_id, path, str(dst)))


def runs_frame(tracking_uri: str, experiment_id: str, search_filter: str = "") -> Any:
    """Every run of an experiment matching ``search_filter`` as a DataFrame laid out like
    ``mlflow.search_runs``: ``run_id, status, start_time, end_time`` (UTC timestamps) and
    ``tags.<key>``, ``params.<key>``, ``metrics.<key>`` columns (all pages)."""
    import pandas as pd

    client = open_client(tracking_uri)
    rows: list[dict[str, Any]] = []
    token = None
    while True:
        page = client.search_runs(
            [experiment_id], search_filter, max_results=50_000, page_token=token
        )
        for run in page:
            row: dict[str, Any] = {
                "run_id": run.info.run_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "start_time": run.info.start_time,
                "end_time": run.info.end_time,
            }
            row.update({f"tags.{k}": v for k, v in run.data.tags.items()})
            row.update({f"params.{k}": v for k, v in run.data.params.items()})
            row.update({f"metrics.{k}": v for k, v in run.data.metrics.items()})
            rows.append(row)
        token = page.token
        if not token:
            break
    frame = pd.DataFrame(rows)
    for column in ("start_time", "end_time"):
        if column in frame:
            frame[column] = pd.to_datetime(frame[column], unit="ms", utc=True)
    return frame


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
        self.client = SignalSafe(mlflow.MlflowClient(tracking_uri))

    # ------------------------------------------------------------------ construction
    @staticmethod
    def from_config(
        tracking: DictConfig | Mapping[str, Any], base_dir: str | os.PathLike[str]
    ) -> Tracker:
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
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> str:
        """Create a RUNNING run (nested under ``parent_id`` if given); return its id.

        The run gets MLflow's standard fields (user, source, git commit: :func:`context_tags`),
        the command line as its description and the ``ltr.invocation`` tag, then ``tags``.
        """
        all_tags = {
            **context_tags(),
            keys.MLFLOW_DESCRIPTION: description or command_line(),
            keys.TAG_INVOCATION: invocation_id(),
        }
        all_tags.update({k: str(v)[:_MAX_TAG_LEN] for k, v in tags.items() if v is not None})
        if parent_id:
            all_tags[keys.MLFLOW_PARENT] = parent_id
        run = self.client.create_run(self.experiment_id, tags=all_tags, run_name=name)
        return run.info.run_id

    def rename(self, run_id: str, name: str) -> None:
        """Give a run its final name (known once its data is read)."""
        self.client.update_run(run_id, name=name)

    def extend(self, run_id: str) -> None:
        """Move a finished container run's end time to now (a sweep run spans its trials)."""
        import time

        self.client.set_terminated(run_id, "FINISHED", end_time=int(time.time() * 1000))

    def log_inputs(self, run_id: str, inputs: list[Mapping[str, Any]]) -> None:
        """Dataset inputs (MLflow's Dataset column and filter): each ``{"name": "mq2008/Fold1",
        "digest": <fingerprint>, "context": "train" | "vali" | "test", "source": {...},
        "profile": {...}}``."""
        from mlflow.entities import Dataset, DatasetInput, InputTag

        items = []
        for i in inputs:
            ds = Dataset(
                name=str(i["name"]),
                digest=str(i["digest"])[:36],
                source_type=str(i.get("source_type", "local")),
                source=json.dumps(i.get("source") or {}, default=str),
                profile=json.dumps(i["profile"], default=str) if i.get("profile") else None,
            )
            items.append(
                DatasetInput(ds, [InputTag(keys.MLFLOW_DATASET_CONTEXT, str(i["context"]))])
            )
        if items:
            self.client.log_inputs(run_id, datasets=items)

    def experiment_link(self, search_filter: str, what: str, run_id: str | None = None) -> str:
        """The printed lines that open ``search_filter``'s runs in the UI (see :func:`format_links`)."""
        return format_links(self.tracking_uri, self.experiment_id, search_filter, what, run_id)

    def describe_run(self, run_id: str) -> str:
        """The printed line that says where run ``run_id`` is tracked."""
        return f"MLflow run {run_id} in {self.tracking_uri} (experiment '{self.experiment_name}')"

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        self.client.set_terminated(run_id, status=status)

    @contextlib.contextmanager
    def run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> Iterator[str]:
        """``with tracker.run(...) as run_id:`` — ends FINISHED, FAILED (error) or KILLED (signal)."""
        run_id = self.start_run(name, tags, parent_id, description)
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

    def find_or_create_sweep_run(
        self, study_name: str, tags: Mapping[str, Any], name: str | None = None
    ) -> str:
        """The ``sweep`` run of an Optuna study (tag ``ltr.study``), created on first use.

        Created FINISHED (it is a container; trials and the refit nest under it) so that no
        sweep run is ever left RUNNING; its end time moves with every trial (:meth:`extend`), so
        start to end spans the sweep. ``name``: its name when created here.
        """
        # Filter on the role only and match the study name here: names may hold any character.
        filt = f"tags.`{keys.TAG_ROLE}` = '{keys.ROLE_SWEEP}'"
        with _store_lock(self.tracking_uri):
            for run in self.client.search_runs([self.experiment_id], filt, max_results=50_000):
                if run.data.tags.get(keys.TAG_STUDY) == study_name:
                    return run.info.run_id
            run_id = self.start_run(
                name or f"sweep {study_name}",
                {**tags, keys.TAG_STUDY: study_name, keys.TAG_ROLE: keys.ROLE_SWEEP},
            )
            self.end_run(run_id, "FINISHED")
            return run_id

    # ------------------------------------------------------------------ logging
    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        """Log params; one that the run already holds with another value (MLflow params never
        change, e.g. a resumed sweep with a new ``n_trials``) is kept and a warning logged."""
        from mlflow.entities import Param
        from mlflow.exceptions import MlflowException

        items = [Param(sanitize_key(str(k)), str(v)[:_MAX_PARAM_LEN]) for k, v in params.items()]
        if not items:
            return
        try:
            self.client.log_batch(run_id, params=items)
        except MlflowException:
            held = self.client.get_run(run_id).data.params
            new = [p for p in items if p.key not in held]
            for p in items:
                if p.key in held and held[p.key] != p.value:
                    log.warning(
                        "param %s of run %s stays %r (not %r)", p.key, run_id, held[p.key], p.value
                    )
            if new:
                self.client.log_batch(run_id, params=new)

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)[:_MAX_TAG_LEN]) for k, v in tags.items() if v is not None]
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

    def log_artifact(
        self, run_id: str, path: str | os.PathLike[str], artifact_path: str | None = None
    ) -> None:
        self.client.log_artifact(run_id, str(path), artifact_path)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.client.log_text(run_id, text, artifact_file)

    def log_model(self, run_id: str, model: PyfuncModel) -> str | None:
        """A saved model as the MLflow ``pyfunc`` model ``model`` of the run (registered under
        ``tracking.register_model`` when set); returns its model id, None if it could not be
        logged (a warning; the run keeps its results)."""
        if not self.log_model_enabled:
            return None
        try:
            return log_pyfunc_model(
                self.client, self.experiment_id, run_id, model, self.register_model
            )
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

    def start_run(
        self,
        name: str,
        tags: Mapping[str, Any],
        parent_id: str | None = None,
        description: str | None = None,
    ) -> str:
        return ""

    def end_run(self, run_id: str, status: str = "FINISHED") -> None:
        pass

    def find_or_create_sweep_run(
        self, study_name: str, tags: Mapping[str, Any], name: str | None = None
    ) -> str:
        return ""

    def rename(self, run_id: str, name: str) -> None:
        pass

    def extend(self, run_id: str) -> None:
        pass

    def log_inputs(self, run_id: str, inputs: list[Mapping[str, Any]]) -> None:
        pass

    def experiment_link(self, search_filter: str, what: str, run_id: str | None = None) -> str:
        return ""

    def describe_run(self, run_id: str) -> str:
        return ""

    def log_params(self, run_id: str, params: Mapping[str, Any]) -> None:
        pass

    def set_tags(self, run_id: str, tags: Mapping[str, Any]) -> None:
        pass

    def log_metrics(
        self, run_id: str, metrics: Mapping[str, float], step: int | None = None
    ) -> None:
        pass

    def log_history(self, run_id: str, history: list[Mapping[str, Any]]) -> None:
        pass

    def log_artifact(self, run_id: str, path: Any, artifact_path: str | None = None) -> None:
        pass

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        pass

    def log_model(self, run_id: str, model: PyfuncModel) -> str | None:
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
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.exceptions import MlflowException
    from mlflow.models import Model, ModelSignature
    from mlflow.types import ColSpec, Schema

    _quiet_mlflow()
    signature = ModelSignature(
        inputs=Schema([ColSpec(t, n, required=r) for n, t, r in model.inputs]),
        outputs=Schema([ColSpec(t, n, required=r) for n, t, r in model.outputs]),
    )
    logged = client.create_logged_model(
        experiment_id,
        name=MODEL_NAME,
        source_run_id=run_id,
        params={k: str(v) for k, v in model.params.items()},
    )
    try:
        with (
            tempfile.TemporaryDirectory(prefix="ltr_bench_model_") as tmp,
            warnings.catch_warnings(),
        ):
            warnings.filterwarnings("ignore", message=".*input example was not provided")
            local = Path(tmp) / MODEL_NAME
            mlflow.pyfunc.save_model(
                str(local),
                loader_module=model.loader_module,
                data_path=str(model.data_dir),
                # No input example: rows of zeros tell nothing the signature does not, and MLflow
                # would store them twice (2.7 kB of a ~100 kB model).
                signature=signature,
                pip_requirements=_model_requirements(),
                mlflow_model=Model(
                    artifact_path=logged.artifact_location,
                    run_id=run_id,
                    model_id=logged.model_id,
                    model_uuid=logged.model_id,
                ),
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
        client.create_model_version(
            register_as, source=logged.artifact_location, run_id=run_id, model_id=logged.model_id
        )
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
    if not tracker.enabled:
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
        for k, v in OmegaConf.to_container(options, resolve=True).items():
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
    """The ``sweep.on_interrupted`` hook: end as KILLED the RUNNING ``trial`` runs of a study whose
    process is gone; return their run ids.

    ``trials``: the Optuna trials the sweeper marked interrupted (a trial number is never run
    again, so any RUNNING run of it is left over). ``reevaluations``: per re-evaluated trial, when
    its latest interrupted claim was failed (epoch seconds); a RUNNING re-evaluation run of that
    trial started before then is left over, one started later belongs to the claim that re-runs it.
    """
    tracking = config.get("tracking")
    if tracking is None:
        return []
    base_dir = OmegaConf.select(config, "hydra.runtime.cwd", default=None) or os.getcwd()
    tracker = Tracker.from_config(tracking, base_dir)
    if not tracker.enabled:
        return []
    numbers = {int(n) for n in trials}
    filt = f"attributes.status = 'RUNNING' and tags.`{keys.TAG_ROLE}` = '{keys.ROLE_TRIAL}'"
    killed = []
    for run in tracker.client.search_runs([tracker.experiment_id], filt, max_results=50_000):
        tags = run.data.tags
        if tags.get(TAG_STUDY) != study_name or not str(tags.get(TAG_TRIAL, "")).isdigit():
            continue
        number = int(tags[TAG_TRIAL])
        if tags.get(TAG_REEVALUATION) == "true":
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


class SignalSafe:
    """A proxy of an ``MlflowClient`` whose every method call holds SIGINT/SIGTERM until it returns.

    A signal's exception raised in the middle of a store call (e.g. inside SQLAlchemy, between a
    write and its commit) can leave the call's SQLite connection checked out with its write lock
    held; the ``finally`` that then ends the run KILLED waits for that lock and fails with
    "database is locked", and the run stays RUNNING. Held until the call returns, the signal is
    raised right after it, where ending the run works.
    """

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            with _signals_deferred():
                return attr(*args, **kwargs)

        call.__name__ = getattr(attr, "__name__", name)
        call.__doc__ = getattr(attr, "__doc__", None)
        return call


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while a run is being ended, so a second Ctrl-C cannot leave it RUNNING."""
    received: list[int] = []
    try:
        old = {
            s: signal.signal(s, lambda n, f: received.append(n))
            for s in (signal.SIGINT, signal.SIGTERM)
        }
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

        Per-epoch metric names go through :func:`curve_key` (``vali_ndcg@10`` ->
        ``curve/vali_ndcg_at_10``, the same keys as the ranker's ``history``), with the epoch as
        step; hyperparameters are not logged (see :meth:`log_hyperparams`).
        """

        def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
            if "epoch" in metrics:  # Lightning adds the epoch to epoch-level logs: use it as step
                step = int(metrics["epoch"])
            with _signals_deferred():  # a Ctrl-C mid-write would leave the SQLite store locked
                super().log_metrics(
                    {curve_key(k): v for k, v in metrics.items() if k != "epoch"}, step
                )

        def log_hyperparams(self, params: Any) -> None:
            """Nothing: the run's params are its config's choices (:func:`run_params`), logged
            once by the runner; Lightning's hparams would repeat them under other names."""

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


def find_runs(tracker: Tracker, tags: Mapping[str, str], status: str = "FINISHED") -> list[Any]:
    """Runs of ``tracker``'s experiment carrying every tag in ``tags`` with ``status``, newest
    first (empty when tracking is off); e.g. a finished experiment run by its ``ltr.experiment_key``."""
    if not tracker.enabled:
        return []
    if any("'" in str(v) for v in tags.values()):
        raise ValueError(f"tag values with quotes cannot be searched: {dict(tags)}")
    conditions = [f"tags.`{k}` = '{v}'" for k, v in tags.items()]
    conditions.append(f"attributes.status = '{status}'")
    return list(
        tracker.client.search_runs(
            [tracker.experiment_id],
            " and ".join(conditions),
            order_by=["attributes.start_time DESC"],
            max_results=1000,
        )
    )
