"""Reading LETOR / SVMlight ranking files: ``<label> qid:<q> <i>:<v> ... [# comment]``.

Fast path: scikit-learn's C parser (``load_svmlight_file(..., query_id=True)``) reads the file,
followed by cheap vectorised checks (every row has a qid, values finite, labels non-negative
integers, the lines of a query contiguous). Only when the parser raises or a check fails is the
file scanned again, chunk by chunk, to name the first offending 1-based line in a
:class:`~ltr_bench.errors.DataFormatError`. Feature indices are 1-based as in all LETOR data
(index ``i`` is column ``i - 1``; index 0 is an error).

Parsed files are cached (see :mod:`ltr_bench.data.cache`): a later :func:`load_letor` of the
same content memory-maps the arrays instead of parsing.
"""

from __future__ import annotations

import io
import itertools
import math
import os
import re
from pathlib import Path
from typing import Iterator

import numpy as np
from sklearn.datasets import load_svmlight_file

from ltr_bench.data.cache import ArrayCache, file_sha256, options_key, resolve_cache_dir
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import DataFormatError, UserError

CACHE_NAMESPACE = "letor-v1"
_SCAN_CHUNK_LINES = 20_000
_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


# ---------------------------------------------------------------------------------------- API
def load_letor(
    path: str | os.PathLike,
    n_features: int | None = None,
    with_docids: bool = False,
    cache_dir: str | os.PathLike | None = None,
    *,
    use_cache: bool = True,
) -> QuerySet:
    """Load a LETOR file as a :class:`QuerySet` (dense float32 features), using the cache.

    Args:
        path: the text file.
        n_features: number of feature columns (MQ2007/MQ2008: 46, MSLR: 136); ``None`` infers
            the largest index in the file. A larger index in the file is an error.
        with_docids: keep the ``#docid = ...`` comment of every line as ``docids`` (str array;
            the whole comment if it has no ``docid =``, "" if the line has no comment).
        cache_dir: cache root (default ``$LTR_CACHE`` or ``~/.cache/ltr_bench``).
        use_cache: False parses without reading or writing the cache.

    Raises:
        DataFormatError: naming the file and 1-based line of the first malformed line.
    """
    path = _existing_file(path)
    if n_features is not None and int(n_features) < 1:
        raise UserError(f"n_features must be a positive integer, got {n_features!r}")
    n_features = None if n_features is None else int(n_features)
    root = resolve_cache_dir(cache_dir) if use_cache else None
    if root is not None and root.resolve() == path.parent.resolve():
        raise UserError(
            f"the cache dir {root} is the data file's own folder; set cache_dir or $LTR_CACHE "
            "to a separate folder"
        )
    sha = file_sha256(path, root)
    if root is None:
        return _parse(path, n_features, with_docids, sha)
    options = {"n_features": n_features, "docids": bool(with_docids), "parser": "sklearn"}
    cache = ArrayCache(root, CACHE_NAMESPACE)
    key = f"{sha[:32]}-{options_key(options)}"
    hit = cache.load(key)
    if hit is not None:
        arrays, meta = hit
        return QuerySet(
            features=arrays["features"],
            labels=arrays["labels"],
            qid=arrays["qid"],
            offsets=arrays["offsets"],
            docids=arrays.get("docids"),
            source={**meta["source"], "path": str(path), "cache": str(cache.entry_dir(key))},
        )
    qs = _parse(path, n_features, with_docids, sha)
    arrays = {"features": qs.features, "labels": qs.labels, "qid": qs.qid, "offsets": qs.offsets}
    if qs.docids is not None:
        arrays["docids"] = qs.docids
    cache.store(key, arrays, {"source": qs.source, "options": options})
    return qs


def parse_letor(
    path: str | os.PathLike, n_features: int | None = None, with_docids: bool = False
) -> QuerySet:
    """Parse a LETOR file without touching the cache (same checks and errors as load_letor)."""
    return load_letor(path, n_features, with_docids, use_cache=False)


def check_same_n_features(*sets: QuerySet) -> int:
    """The common feature count of ``sets``; a mismatch is an error naming both files."""
    first = sets[0]
    for other in sets[1:]:
        if other.n_features != first.n_features:
            a = first.source.get("path", "the first set")
            b = other.source.get("path", "another set")
            raise DataFormatError(
                str(b),
                None,
                f"has {other.n_features} features but {a} has {first.n_features}; "
                "give n_features (dataset.n_features) so both are read with the same width",
            )
    return first.n_features


# ------------------------------------------------------------------------------- fast path
def _parse(path: Path, n_features: int | None, with_docids: bool, sha: str) -> QuerySet:
    try:
        X, y, qid = load_svmlight_file(
            str(path),
            n_features=n_features,
            dtype=np.float32,
            query_id=True,
            zero_based=False,
        )
    except (ValueError, OverflowError, IndexError, UnicodeDecodeError) as exc:
        raise _locate(path, n_features, str(exc)) from None
    n = X.shape[0]
    if n == 0:
        raise DataFormatError(str(path), None, "has no data lines (empty file)")
    if qid.shape[0] != n:  # sklearn silently skips a missing qid
        raise _locate(path, n_features, "a line has no qid")
    if not np.all(np.isfinite(X.data)) or not np.all(np.isfinite(y)):
        raise _locate(path, n_features, "non-finite value")
    if np.any(y < 0) or np.any(y != np.round(y)):
        raise _locate(path, n_features, "bad label")
    starts = np.concatenate([[0], np.flatnonzero(qid[1:] != qid[:-1]) + 1])
    if len(np.unique(qid[starts])) != len(starts):
        raise _locate(path, n_features, "non-contiguous query")
    features = X.toarray()
    if features.dtype != np.float32:
        features = features.astype(np.float32)
    offsets = np.concatenate([starts, [n]]).astype(np.int64)
    docids = _read_docids(path) if with_docids else None
    if docids is not None and docids.shape[0] != n:
        raise _locate(path, n_features, "comment count mismatch")
    source = {
        "format": "letor",
        "path": str(path),
        "sha256": sha,
        "n_features": int(features.shape[1]),
    }
    return QuerySet(
        features=features,
        labels=y.astype(np.int32),
        qid=qid.astype(np.int64),
        offsets=offsets,
        docids=docids,
        source=source,
    )


def _read_docids(path: Path) -> np.ndarray:
    """The comment of every data line: the ``docid = X`` value, else the stripped comment."""
    out: list[str] = []
    with open(path, "rb") as f:
        for raw in f:
            body, hash_, comment = raw.partition(b"#")
            if not body.strip():
                continue
            m = _DOCID.search(comment) if hash_ else None
            text = m.group(1) if m else comment.strip()
            out.append(text.decode("utf-8", "replace"))
    return np.array(out, dtype=str)


# ------------------------------------------------------------------------- error location
def _locate(path: Path, n_features: int | None, parser_message: str) -> DataFormatError:
    """Scan ``path`` for its first malformed line and return the error to raise."""
    found = find_first_problem(path, n_features)
    if found is None:  # the scan is stricter than the parser in every case we know of
        return DataFormatError(str(path), None, f"could not be read ({parser_message})")
    line, problem = found
    return DataFormatError(str(path), line, problem)


def find_first_problem(
    path: str | os.PathLike, n_features: int | None = None
) -> tuple[int | None, str] | None:
    """``(1-based line, problem)`` of the first malformed line of a LETOR file, or None.

    Streams the file in chunks of lines; each chunk is first tried with the fast parser and
    checked vectorised, and only a failing chunk is checked line by line in Python.
    """
    seen: set[int] = set()
    last_qid: int | None = None
    n_data = 0
    with open(path, "rb") as f:
        for first_line, lines in _chunks(f):
            bad = _chunk_problem(lines, first_line, n_features)
            if bad is not None:
                return bad
            # query contiguity across (and inside) chunks, on the parsed qids
            for lineno, raw in enumerate(lines, first_line):
                body = raw.partition(b"#")[0]
                if not body.strip():
                    continue
                n_data += 1
                try:
                    q = int(body.split(None, 2)[1][4:])
                except (IndexError, ValueError):  # only if the parser accepted what we reject
                    return lineno, check_line(raw, n_features) or "malformed line"
                if q != last_qid:
                    if q in seen:
                        return lineno, (
                            f"query qid:{q} continues here after other queries; the lines of a "
                            "query must be contiguous"
                        )
                    seen.add(q)
                    last_qid = q
    if n_data == 0:
        return None, "has no data lines (empty file)"
    return None


def _chunks(f: io.BufferedReader) -> Iterator[tuple[int, list[bytes]]]:
    lineno = 1
    while True:
        lines = list(itertools.islice(f, _SCAN_CHUNK_LINES))
        if not lines:
            return
        yield lineno, lines
        lineno += len(lines)


def _chunk_problem(
    lines: list[bytes], first_line: int, n_features: int | None
) -> tuple[int, str] | None:
    """First problem inside one chunk of lines (parser + vectorised checks, then per line)."""
    try:
        X, y, qid = load_svmlight_file(
            io.BytesIO(b"".join(lines)),
            n_features=n_features,
            dtype=np.float64,
            query_id=True,
            zero_based=False,
        )
        clean = (
            qid.shape[0] == X.shape[0]
            and np.all(np.isfinite(X.data))
            and np.all(np.isfinite(y))
            and np.all(y >= 0)
            and np.all(y == np.round(y))
        )
        if clean:
            return None
    except Exception:  # noqa: BLE001 - any parser failure means: check line by line
        pass
    for lineno, raw in enumerate(lines, first_line):
        problem = check_line(raw, n_features)
        if problem is not None:
            return lineno, problem
    return None


def check_line(raw: bytes, n_features: int | None = None) -> str | None:
    """What is wrong with one LETOR line (None if nothing; blank/comment lines are fine)."""
    body = raw.partition(b"#")[0]
    tokens = body.split()
    if not tokens:
        return None
    label = _float(tokens[0])
    if label is None:
        return f"label {_show(tokens[0])} is not a number"
    if not math.isfinite(label) or label < 0 or label != round(label):
        return f"label {_show(tokens[0])} is not a non-negative integer"
    if len(tokens) < 2 or not tokens[1].startswith(b"qid:"):
        return "missing 'qid:' (the second field must be qid:<integer>)"
    try:
        int(tokens[1][4:])
    except ValueError:
        return f"query id {_show(tokens[1])} is not an integer"
    prev = 0
    for tok in tokens[2:]:
        idx_s, colon, val_s = tok.partition(b":")
        if not colon:
            return f"field {_show(tok)} is not <index>:<value>"
        try:
            idx = int(idx_s)
        except ValueError:
            return f"feature index in {_show(tok)} is not an integer"
        if idx < 1:
            return f"feature index {idx} is below 1 (LETOR indices are 1-based)"
        if n_features is not None and idx > n_features:
            return f"feature index {idx} is above n_features={n_features}"
        if idx <= prev:
            return f"feature index {idx} is not increasing (previous index {prev})"
        prev = idx
        value = _float(val_s)
        if value is None:
            return f"feature {idx} has non-numeric value {_show(val_s)}"
        if not math.isfinite(value):
            return f"feature {idx} has non-finite value {_show(val_s)}"
    return None


def _float(s: bytes) -> float | None:
    try:
        return float(s)
    except ValueError:
        return None


def _show(s: bytes) -> str:
    text = s.decode("utf-8", "replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def _existing_file(path: str | os.PathLike) -> Path:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"data file {p} does not exist")
    return p.resolve()


__all__ = [
    "load_letor",
    "parse_letor",
    "check_same_n_features",
    "find_first_problem",
    "check_line",
]
