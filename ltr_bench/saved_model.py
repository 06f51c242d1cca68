"""A saved model: the whole scoring pipeline of a fold run and nothing else.

What a run needs to turn raw LETOR features into the scores it reported: the fitted preprocessing
(feature transform parameters, feature count, relevance threshold, the evaluation's query filters
and label binarisation for metrics) and the ranker's learned parameters (a torch state dict,
LightGBM model text, AdaRank's weight vector, SortNet's comparator weights). Never training or
validation data, so its size does not grow with the training set.

On disk (a folder)::

    pipeline.json        format, ranker class + constructor arguments, feature count, threshold,
                         preprocessing options, metric options
    preprocessing.npz    fitted transform arrays (quantile knots / mean and std); no pickles
    ranker/              what the ranker's ``save_params`` wrote (e.g. scorer.pt, model.txt)

:func:`save_pipeline` writes it, :func:`load_pipeline` reads it back: the ranker class is
resolved from ``_target_`` and must be a :class:`~ltr_bench.models.base.Ranker` subclass, torch
weights load with ``weights_only=True`` and arrays with ``allow_pickle=False``. MLflow logs the
folder as a ``pyfunc`` model whose loader is :func:`_load_pyfunc` (``loader_module``), so
``mlflow.pyfunc.load_model(uri).predict(frame)`` scores raw features.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError

FORMAT = "ltr_bench.scoring_pipeline"
FORMAT_VERSION = 1
PIPELINE_FILE = "pipeline.json"
ARRAYS_FILE = "preprocessing.npz"
RANKER_DIR = "ranker"
QID_COLUMN = "qid"  # the optional query-id column of a pyfunc input frame
LOADER_MODULE = __name__  # MLflow's pyfunc loader_module: this module's _load_pyfunc
PYFUNC_OUTPUTS = (("score", "double", True),)  # the signature's output: one score per row


def feature_columns(n_features: int) -> list[str]:
    """Column names of the pyfunc input: ``f1`` .. ``f<F>`` (LETOR feature ids are 1-based)."""
    return [f"f{i}" for i in range(1, n_features + 1)]


def pyfunc_inputs(n_features: int) -> list[tuple[str, str, bool]]:
    """The signature's input columns ``(name, MLflow type, required)``: an optional ``qid`` and
    the raw feature values ``f1`` .. ``f<F>`` (double, so float32 and float64 frames both pass
    MLflow's type check; scoring reads them as float32, as LETOR files are read)."""
    return [(QID_COLUMN, "long", False)] + [
        (c, "double", True) for c in feature_columns(n_features)
    ]


# ------------------------------------------------------------------------------- the pipeline
@dataclass
class ScoringPipeline:
    """A fitted :class:`~ltr_bench.data.transforms.Preprocessing` and a fitted ranker.

    Args:
        preprocessing: fitted on the run's training split.
        ranker: fitted; must implement ``save_params`` / ``load_params`` to be saved.
        n_features: feature columns the model was trained on.
        relevance_threshold: the dataset's relevance threshold (labels >= it are relevant).
        ranker_spec: the ranker's ``_target_`` and constructor arguments (the run's model config).
        metrics: the evaluation's metric options (``names``, ``relevance_threshold``,
            ``no_relevant``), so labelled input is scored as the run scored its test split.
        info: provenance (run id, model and dataset names, package version); not used to score.
    """

    preprocessing: Any
    ranker: Any
    n_features: int
    relevance_threshold: int
    ranker_spec: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    # -------------------------------------------------------------- scoring
    def check_features(self, n_features: int, where: str = "the input") -> None:
        if int(n_features) != self.n_features:
            raise UserError(
                f"{where} has {n_features} features but the model was trained on "
                f"{self.n_features}; give data with the features of the model's dataset"
            )

    def transform(self, data: QuerySet) -> QuerySet:
        """The fitted feature transform applied to raw ``data`` (no query is dropped)."""
        self.check_features(data.n_features)
        return self.preprocessing.transform.transform(data)

    def score(self, data: QuerySet) -> np.ndarray:
        """``[N]`` float64 scores of the raw documents of ``data`` (higher = more relevant)."""
        if data.n_docs == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(self.ranker.score(self.transform(data)), dtype=np.float64).reshape(-1)

    def score_arrays(self, features: np.ndarray, qid: np.ndarray | None = None) -> np.ndarray:
        """Scores of raw feature rows ``[N, F]`` in their input order.

        ``qid`` groups rows into queries; it matters for per-query transforms and for rankers
        that score a document against the others of its query (SortNet). Without it every row is
        its own query for those, and the scores of other rankers do not depend on it.
        """
        x = np.asarray(features, dtype=np.float32)
        if x.ndim != 2:
            raise UserError(
                f"features must be a 2-D array [documents, {self.n_features}], got shape {x.shape}"
            )
        self.check_features(x.shape[1])
        n = x.shape[0]
        q = np.arange(n, dtype=np.int64) if qid is None else np.asarray(qid).astype(np.int64)
        if q.shape != (n,):
            raise UserError(f"qid has shape {q.shape} but there are {n} feature rows")
        # Queries in order of first appearance, documents in input order (as QuerySet groups).
        _, first, inverse = np.unique(q, return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        order = np.argsort(rank[inverse.reshape(-1)], kind="stable")
        data = QuerySet.from_arrays(x[order], np.zeros(n, dtype=np.int32), q[order])
        out = np.empty(n, dtype=np.float64)
        out[order] = self.score(data)
        return out

    def evaluation_data(self, raw: QuerySet) -> QuerySet:
        """``raw`` as the run evaluated its test split: its query filters and label binarisation
        (features untouched; pair it with :meth:`score` of the same filtered set)."""
        pre = self.preprocessing
        return pre.binarize(pre.filter_queries(raw, "test"), "test")


# ------------------------------------------------------------------------------- saving
def save_pipeline(pipeline: ScoringPipeline, folder: str | Path) -> Path:
    """Write ``pipeline`` into ``folder`` (created; must not hold a pipeline yet)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / PIPELINE_FILE).exists():
        raise FileExistsError(
            f"{folder / PIPELINE_FILE} exists; a saved model is never overwritten"
        )
    save_params = getattr(pipeline.ranker, "save_params", None)
    if not callable(save_params):
        raise NotImplementedError(
            f"{type(pipeline.ranker).__name__} has no save_params(folder); "
            "see the docs' guide 'Your own model' (docs/guides/own-model.md) to make it savable"
        )
    (folder / RANKER_DIR).mkdir()
    ranker_info = save_params(folder / RANKER_DIR) or {}
    pre_options, arrays = _preprocessing_state(pipeline.preprocessing)
    # the knots are compressed already; the cast: no array is named allow_pickle
    np.savez(folder / ARRAYS_FILE, **cast(dict[str, Any], arrays))
    doc = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "n_features": int(pipeline.n_features),
        "relevance_threshold": int(pipeline.relevance_threshold),
        "ranker": {"spec": _jsonable(pipeline.ranker_spec), "info": _jsonable(ranker_info)},
        "preprocessing": pre_options,
        "metrics": _jsonable(pipeline.metrics),
        "info": _jsonable(pipeline.info),
    }
    (folder / PIPELINE_FILE).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return folder


def load_pipeline(folder: str | Path) -> ScoringPipeline:
    """Read a pipeline written by :func:`save_pipeline` (an MLflow model's ``data`` folder or
    the folder itself)."""
    folder = Path(folder)
    path = folder / PIPELINE_FILE
    if not path.is_file():
        raise UserError(f"{folder} is not a saved ltr_bench model: it has no {PIPELINE_FILE}")
    try:
        doc = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from None
    if doc.get("format") != FORMAT or int(doc.get("format_version", 0)) > FORMAT_VERSION:
        raise UserError(
            f"{path}: format {doc.get('format')!r} version {doc.get('format_version')} is not one "
            f"this ltr_bench reads ({FORMAT} <= {FORMAT_VERSION}); upgrade ltr_bench"
        )
    n_features = int(doc["n_features"])
    with np.load(folder / ARRAYS_FILE, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    preprocessing = _restore_preprocessing(doc["preprocessing"], arrays)
    ranker = _build_ranker(doc["ranker"]["spec"], path)
    ranker.load_params(folder / RANKER_DIR, n_features)
    return ScoringPipeline(
        preprocessing=preprocessing,
        ranker=ranker,
        n_features=n_features,
        relevance_threshold=int(doc["relevance_threshold"]),
        ranker_spec=dict(doc["ranker"]["spec"]),
        metrics=dict(doc.get("metrics") or {}),
        info=dict(doc.get("info") or {}),
    )


def folder_size(folder: str | Path) -> int:
    """Bytes of all files under ``folder``."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


# ------------------------------------------------------------------------------- MLflow pyfunc
class PyfuncScorer:
    """What ``mlflow.pyfunc.load_model`` wraps: ``predict(frame) -> scores``.

    The input is a pandas DataFrame with the feature columns ``f1`` .. ``f<F>`` (raw values, as in
    the LETOR file) and optionally ``qid``; a bare ``[N, F]`` array works too when called on the
    unwrapped model. The output is one float64 score per row, in the input order.
    """

    def __init__(self, pipeline: ScoringPipeline) -> None:
        self.pipeline = pipeline

    def predict(self, model_input: Any, params: Mapping[str, Any] | None = None) -> np.ndarray:
        columns = feature_columns(self.pipeline.n_features)
        qid = None
        if hasattr(model_input, "columns"):
            missing = [c for c in columns if c not in model_input.columns]
            if missing:
                raise UserError(
                    f"the input has no column {missing[0]}; give the columns "
                    f"{columns[0]}..{columns[-1]} (and optionally {QID_COLUMN})"
                )
            if QID_COLUMN in model_input.columns:
                qid = model_input[QID_COLUMN].to_numpy()
            features = model_input[columns].to_numpy(dtype=np.float32)
        else:
            features = np.asarray(model_input, dtype=np.float32)
        return self.pipeline.score_arrays(features, qid)


def _load_pyfunc(data_path: str) -> PyfuncScorer:
    """MLflow's ``loader_module`` hook: the model's ``data`` folder -> a pyfunc scorer."""
    return PyfuncScorer(load_pipeline(data_path))


# ------------------------------------------------------------------------------- internals
def _build_ranker(spec: Any, path: Path) -> Any:
    """An unfitted ranker from its saved spec (read from ``path``); only a Ranker subclass is
    constructed, and a spec it cannot be built from (e.g. edited by hand) is a UserError."""
    from hydra.utils import get_class, instantiate

    from ltr_bench.errors import find_in_chain
    from ltr_bench.models.base import Ranker

    if not isinstance(spec, dict):
        raise UserError(f"{path}: the ranker spec must be a mapping with _target_, not {spec!r}")
    target = str(spec.get("_target_", ""))
    try:
        cls = get_class(target)
    except Exception as exc:  # noqa: BLE001 - Hydra wraps import errors in its own types
        raise UserError(
            f"the saved model's ranker class {target!r} cannot be imported ({exc.__class__.__name__}); "
            "install the package that defines it"
        ) from None
    if not (isinstance(cls, type) and issubclass(cls, Ranker)):
        raise UserError(f"the saved model's ranker class {target!r} is not an ltr_bench Ranker")
    try:
        return instantiate(spec, _convert_="all")
    except Exception as exc:  # noqa: BLE001 - Hydra wraps the constructor's error
        reason = find_in_chain(exc.__cause__, UserError) or exc.__cause__ or exc
        first = (str(reason).strip().splitlines() or [type(reason).__name__])[0]
        raise UserError(
            f"{path}: the ranker spec cannot build {target} ({first.rstrip('.')}); "
            "restore the file or save the model again"
        ) from None


def _preprocessing_state(pre: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The options and fitted arrays of a :class:`~ltr_bench.data.transforms.Preprocessing`,
    the quantile knots packed small (:func:`pack_knots`)."""
    options, arrays = pre.state()
    if "quantiles" in arrays:
        stats = None
        if "order_values" in arrays:
            stats = (
                int(np.asarray(arrays.pop("order_rows")).reshape(-1)[0]),
                arrays.pop("order_values"),
            )
        arrays.update(pack_knots(arrays.pop("quantiles"), stats))
    return options, arrays


def _restore_preprocessing(options: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> Any:
    from ltr_bench.data.transforms import Preprocessing

    arrays = dict(arrays)
    if "knots_xz" in arrays or "order_xz" in arrays:
        quantiles, stats = unpack_knots(arrays)
        arrays = {"quantiles": quantiles}
        if stats is not None:
            arrays.update(order_rows=np.asarray([stats[0]]), order_values=stats[1])
    return Preprocessing.from_state(options, arrays, threads=1)


def pack_knots(
    quantiles: np.ndarray, order_stats: tuple[int, np.ndarray] | None = None
) -> dict[str, np.ndarray]:
    """Quantile knots ``[n_q, F]`` (float64, non-decreasing per column), losslessly and small.

    With the fit's order statistics (:func:`~ltr_bench.data.transforms.knot_order_stats`) that
    give back these very knots, those are stored: training values, many tied, as differences of
    their bit patterns per column, xz-compressed (MQ2008 Fold1: 70 kB). Otherwise the knots
    themselves the same way (97 kB; 368 kB as plain floats). Either way bit-exact, so a loaded
    model transforms exactly as the run did.
    """
    from ltr_bench.data.transforms import knots_from_order_stats

    quantiles = np.asarray(quantiles, dtype=np.float64)
    if order_stats is not None:
        rows, values = int(order_stats[0]), np.asarray(order_stats[1])
        if values.dtype == np.float32 and np.array_equal(
            knots_from_order_stats(rows, values, quantiles.shape[0]).view(np.int64),
            quantiles.view(np.int64),
        ):
            cols = np.ascontiguousarray(values.T)
            steps = np.diff(cols.view(np.int32), axis=1, prepend=np.int32(0))
            return {
                "order_xz": _xz(steps.astype("<i4")),
                "order_shape": np.asarray(cols.shape),
                "order_rows": np.asarray([rows]),
                "knots_count": np.asarray([quantiles.shape[0]]),
            }
    cols = np.ascontiguousarray(quantiles.T)
    steps = np.diff(cols.view(np.int64), axis=1, prepend=np.int64(0))
    return {"knots_xz": _xz(steps.astype("<i8")), "knots_shape": np.asarray(cols.shape)}


def unpack_knots(
    arrays: Mapping[str, np.ndarray],
) -> tuple[np.ndarray, tuple[int, np.ndarray] | None]:
    """The inverse of :func:`pack_knots`: ``[n_q, F]`` float64 knots and the order statistics
    when they were stored."""
    import lzma

    from ltr_bench.data.transforms import knots_from_order_stats

    if "quantiles" in arrays:  # stored plain (float64 [n_q, F])
        return np.asarray(arrays["quantiles"], dtype=np.float64), None
    if "order_xz" in arrays:
        n_features, m = (int(v) for v in arrays["order_shape"])
        steps = np.frombuffer(lzma.decompress(arrays["order_xz"].tobytes()), dtype="<i4")
        cols = np.cumsum(steps.reshape(n_features, m), axis=1, dtype=np.int32)
        values = np.ascontiguousarray(cols.view(np.float32).T)
        rows = int(np.asarray(arrays["order_rows"]).reshape(-1)[0])
        n_q = int(np.asarray(arrays["knots_count"]).reshape(-1)[0])
        return knots_from_order_stats(rows, values, n_q), (rows, values)
    n_features, n_q = (int(v) for v in arrays["knots_shape"])
    steps = np.frombuffer(lzma.decompress(arrays["knots_xz"].tobytes()), dtype="<i8")
    cols = np.cumsum(steps.reshape(n_features, n_q), axis=1, dtype=np.int64)
    return np.ascontiguousarray(cols.view(np.float64).T), None


def _xz(arr: np.ndarray) -> np.ndarray:
    import lzma

    return np.frombuffer(
        lzma.compress(arr.tobytes(), preset=9 | lzma.PRESET_EXTREME), dtype=np.uint8
    )


def _jsonable(value: Any) -> Any:
    """Plain JSON data (config nodes, NumPy scalars and tuples converted)."""
    return json.loads(json.dumps(value, default=_json_default))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON data")
