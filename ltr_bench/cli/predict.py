"""``ltr-bench-predict``: rank LETOR files with a saved model.

    ltr-bench-predict MODEL FILE [FILE ...] [--out DIR] [--tag TAG] [--eval run|paper|graded]

``MODEL`` is an MLflow model URI (``runs:/<run id>/model``, ``models:/<name>/<version>`` or
``models:/<name>/latest``, resolved in ``--tracking-uri``) or a local folder (a downloaded MLflow
model, or the ``pipeline`` folder inside it). Per input file it writes, into ``--out``:

- ``<stem>.scores.tsv``: ``qid  docid  label  score`` per document, in the file's order;
- ``<stem>.run``: a TREC run file ``qid Q0 docid rank score tag`` (rank 1 = highest score);

docids come from the lines' ``#docid = ...`` comments, else the document's 1-based position in
the file. Files with relevance labels are also evaluated as the run evaluated its test split
(``--eval run``, its query filters and label binarisation) or as ``paper`` / ``graded``; the
metrics table is printed and written to ``metrics.csv``.

Argparse, not Hydra: a handful of flags, and a model folder from a user path is read without
unpickling anything (:mod:`ltr_bench.saved_model`). Bad input is one sentence and exit code 2.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.cli.gc_policy import tune_garbage_collection
from ltr_bench.errors import UserError

EXIT_USER_ERROR = 2
EVALS = ("run", "paper", "graded")
URI_SCHEMES = ("runs:/", "models:/")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ltr-bench-predict",
        description="Score LETOR files with a saved ltr_bench model: per-document scores, a TREC "
        "run file and, where the files have relevance labels, the metrics table.",
    )
    p.add_argument(
        "model",
        help="runs:/<run id>/model, models:/<name>/<version|latest>, or a local model folder",
    )
    p.add_argument(
        "files", nargs="+", type=Path, help="LETOR files (label qid:<q> i:v ... # docid = ...)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default predictions/<date>_<time>); existing files are never overwritten",
    )
    p.add_argument(
        "--tag", default=None, help="the run tag of the TREC run file (default: the model's name)"
    )
    p.add_argument(
        "--eval",
        choices=EVALS,
        default="run",
        dest="evaluation",
        help="how labelled files are evaluated: as the model's run evaluated test (run), "
        "with labels binarised at the dataset's threshold (paper), or graded (graded)",
    )
    p.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow store of runs:/ and models:/ URIs (default $MLFLOW_TRACKING_URI, "
        "else sqlite:///mlflow.db in the current folder)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``ltr-bench-predict``."""
    tune_garbage_collection()
    args = build_parser().parse_args(argv)
    try:
        sys.exit(predict(args))
    except UserError as exc:
        print(f"ltr-bench-predict: error: {str(exc).rstrip('.')}", file=sys.stderr)
        sys.exit(EXIT_USER_ERROR)


def predict(args: argparse.Namespace) -> int:
    """Score every file; returns the exit code."""
    from ltr_bench.data.letor import load_letor

    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        raise UserError(f"the data file {missing[0]} does not exist; give LETOR files to score")
    out = args.out or Path("predictions") / time.strftime("%Y-%m-%d_%H-%M-%S")
    pipeline = load_model(args.model, args.tracking_uri)
    tag = args.tag or str(pipeline.info.get("model") or "ltr_bench")
    stems = [f.stem for f in args.files]
    if len(set(stems)) != len(stems):
        stems = [f"{i + 1}_{s}" for i, s in enumerate(stems)]
    targets = [out / f"{s}{ext}" for s in stems for ext in (".scores.tsv", ".run")] + [
        out / "metrics.csv"
    ]
    taken = [str(t) for t in targets if t.exists()]
    if taken:
        raise UserError(f"{taken[0]} exists; choose another --out (outputs are never overwritten)")
    rows: list[tuple[str, dict[str, float]]] = []
    names: list[str] = []
    for path, stem in zip(args.files, stems):
        data = load_letor(path, with_docids=True, use_cache=False)
        pipeline.check_features(data.n_features, where=str(path))
        scores = pipeline.score(data)
        docids = _docids(data)
        out.mkdir(parents=True, exist_ok=True)
        _write_scores(out / f"{stem}.scores.tsv", data, docids, scores)
        _write_trec(out / f"{stem}.run", data, docids, scores, tag)
        print(
            f"{path}: {data.n_docs} documents in {data.n_queries} queries -> "
            f"{out / (stem + '.scores.tsv')}, {out / (stem + '.run')}",
            flush=True,
        )
        metrics = evaluate_file(pipeline, data, args.evaluation)
        if metrics is None:
            print(f"{path}: no document is labelled relevant, so no metrics", flush=True)
            continue
        rows.append((str(path), metrics))
        names = names or list(metrics)
    if rows:
        table = format_table(rows, names, args.evaluation)
        print(table, flush=True)
        with open(out / "metrics.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["file", "eval", *names])
            for f, m in rows:
                w.writerow([f, args.evaluation, *(f"{m[n]:.6f}" for n in names)])
        print(f"metrics: {out / 'metrics.csv'}", flush=True)
    return 0


# ------------------------------------------------------------------------------ the model
def load_model(model: str, tracking_uri: str | None = None) -> Any:
    """The :class:`~ltr_bench.saved_model.ScoringPipeline` of a model URI or local folder."""
    from ltr_bench.saved_model import load_pipeline

    if model.startswith(URI_SCHEMES):
        with tempfile.TemporaryDirectory(prefix="ltr_bench_predict_") as tmp:
            return load_pipeline(pipeline_folder(_download(model, tracking_uri, tmp)))
    folder = Path(model).expanduser()
    if not folder.is_dir():
        raise UserError(
            f"the model {model} is neither a folder nor a model URI; give runs:/<run id>/model, "
            "models:/<name>/<version|latest> or a model folder"
        )
    return load_pipeline(pipeline_folder(folder))


def pipeline_folder(folder: Path) -> Path:
    """The folder holding ``pipeline.json``: ``folder`` itself or its MLflow model's data path."""
    from ltr_bench.saved_model import PIPELINE_FILE

    if (folder / PIPELINE_FILE).is_file():
        return folder
    mlmodel = folder / "MLmodel"
    if mlmodel.is_file():
        import yaml

        flavor = (
            (yaml.safe_load(mlmodel.read_text()) or {})
            .get("flavors", {})
            .get("python_function", {})
        )
        if flavor.get("loader_module") == "ltr_bench.saved_model" and flavor.get("data"):
            return folder / str(flavor["data"])
    raise UserError(
        f"{folder} is not an ltr_bench model: it has no {PIPELINE_FILE} and no ltr_bench MLmodel"
    )


def _download(uri: str, tracking_uri: str | None, dst: str) -> Path:
    import logging

    import mlflow
    from mlflow.exceptions import MlflowException

    logging.getLogger("mlflow").setLevel(logging.ERROR)
    store = (
        tracking_uri
        or os.environ.get("MLFLOW_TRACKING_URI")
        or f"sqlite:///{Path('mlflow.db').resolve()}"
    )
    db = store[len("sqlite:///") :] if store.startswith("sqlite:///") else None
    if db is not None and not Path(db).is_file():
        raise UserError(
            f"the MLflow store {store} does not exist; run ltr-bench-predict where "
            "ltr-bench ran or give --tracking-uri"
        )
    mlflow.set_tracking_uri(store)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    try:
        return Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=dst))
    except MlflowException as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else exc.__class__.__name__
        raise UserError(
            f"the model {uri} was not found in {store} ({first.rstrip('.')}); check the "
            "run id or model name and version, or --tracking-uri"
        ) from None


# ------------------------------------------------------------------------------ outputs
def _docids(data: Any) -> np.ndarray:
    """``#docid = X`` of each line, else the document's 1-based position in the file."""
    position = np.arange(1, data.n_docs + 1).astype(str)
    if data.docids is None:
        return position
    ids = np.asarray(data.docids, dtype=str)
    return np.where(np.char.str_len(ids) > 0, ids, position)


def _write_scores(path: Path, data: Any, docids: np.ndarray, scores: np.ndarray) -> None:
    with open(path, "x") as fh:
        fh.write("qid\tdocid\tlabel\tscore\n")
        for q, d, y, s in zip(data.qid, docids, data.labels, scores):
            fh.write(f"{q}\t{d}\t{y}\t{s:.9g}\n")


def trec_ranks(data: Any, scores: np.ndarray) -> np.ndarray:
    """1-based rank of each document in its query: by score, ties by document order."""
    qi = data.query_index()
    order = np.lexsort((np.arange(data.n_docs), -np.asarray(scores, dtype=np.float64), qi))
    ranks = np.empty(data.n_docs, dtype=np.int64)
    ranks[order] = np.arange(data.n_docs) - data.offsets[qi[order]] + 1
    return ranks


def _write_trec(path: Path, data: Any, docids: np.ndarray, scores: np.ndarray, tag: str) -> None:
    ranks = trec_ranks(data, scores)
    order = np.lexsort((ranks, data.query_index()))
    tag = "".join(c if not c.isspace() else "_" for c in tag) or "ltr_bench"
    with open(path, "x") as fh:
        for i in order:
            fh.write(f"{data.qid[i]} Q0 {docids[i]} {ranks[i]} {scores[i]:.9g} {tag}\n")


# ------------------------------------------------------------------------------ metrics
def evaluate_file(pipeline: Any, data: Any, evaluation: str = "run") -> dict[str, float] | None:
    """The metric means on ``data`` as ``evaluation`` scores it, or None without relevant labels."""
    from ltr_bench.data.transforms import binarize_labels, drop_queries_without_relevant
    from ltr_bench.metrics import evaluate

    threshold = pipeline.relevance_threshold
    if not np.any(data.labels > 0):
        return None  # unlabelled (all 0)
    m = pipeline.metrics
    names = list(m.get("names") or ["ndcg@10"])
    no_relevant = m.get("no_relevant", "drop")
    if evaluation == "run":
        try:
            kept = pipeline.evaluation_data(data)
        except UserError:
            return None  # no query left after the run's filters
        metric_threshold = m.get("relevance_threshold", 1)
    else:
        kept = drop_queries_without_relevant(data, threshold)
        if kept.n_queries == 0:
            return None
        if evaluation == "paper":
            kept, metric_threshold = binarize_labels(kept, threshold), 1
        else:
            metric_threshold = threshold
    result = evaluate(
        pipeline.score(kept),
        kept,
        names=names,
        relevance_threshold=metric_threshold,
        no_relevant=no_relevant,
    )
    return {n: float(result.means[n]) for n in names}


def format_table(
    rows: Sequence[tuple[str, dict[str, float]]], names: Sequence[str], evaluation: str
) -> str:
    width = max(12, *(len(Path(f).name) + 2 for f, _ in rows))
    lines = [f"{'eval=' + evaluation:<{width}}" + "".join(f"{n:>9}" for n in names)]
    for f, m in rows:
        lines.append(
            f"{Path(f).name:<{width}}"
            + "".join(f"{m[n]:>9.4f}" if math.isfinite(m[n]) else f"{'nan':>9}" for n in names)
        )
    return "\n".join(lines)


def console_main() -> None:
    """The ``ltr-bench-predict`` console script: :func:`main` with the command line's arguments."""
    main()


if __name__ == "__main__":  # python -m ltr_bench.cli.predict
    console_main()
