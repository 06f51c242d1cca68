"""Reading LETOR / SVMlight ranking files: ``<label> qid:<q> <i>:<v> ... [# comment]``.

Fast path: :func:`ltr_bench.data.letor_reader.read_letor` (linear time: pandas' C parser over
regular blocks of lines, scikit-learn's parser for the others), followed by cheap vectorised
checks (values finite, labels integers in ``0..LABEL_MAX``, the lines of a query contiguous, a
last line without newline not shorter than the others). Only when the parser rejects a block or a
check fails is the file scanned again, chunk by chunk, to name the first offending 1-based line
in a :class:`~ltr_bench.errors.DataFormatError`. Feature indices are 1-based as in all LETOR data
(index ``i`` is column ``i - 1``; index 0 is an error). A leading UTF-8 byte-order mark is
skipped; gzip, bzip2 and xz files are read transparently.

Parsed files are cached (see :mod:`ltr_bench.data.cache`): a later :func:`load_letor` of the
same content memory-maps the arrays (after checking their checksums) instead of parsing.

The line-by-line checks live in :mod:`ltr_bench.data.letor_check` (``find_first_problem``,
``check_line`` and ``LABEL_MAX`` are re-exported here), the progress lines for big files in
:mod:`ltr_bench.data.letor_progress`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ltr_bench.data.cache import ArrayCache, file_sha256, options_key, resolve_cache_dir
from ltr_bench.data.letor_check import LABEL_MAX, check_line, find_first_problem, locate
from ltr_bench.data.letor_progress import Progress, file_size, say
from ltr_bench.data.letor_reader import BlockRejected, iter_lines, read_letor
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import DataFormatError, UserError

CACHE_NAMESPACE = "letor-v2"
#: Files larger than this get a progress line while they are parsed.
PROGRESS_BYTES = 100 * 10**6
_DOCID = re.compile(rb"docid\s*=\s*(\S+)")


# ---------------------------------------------------------------------------------------- API
def load_letor(
    path: str | os.PathLike,
    n_features: int | None = None,
    with_docids: bool = False,
    cache_dir: str | os.PathLike | None = None,
    *,
    use_cache: bool = True,
    verify_cache: bool = True,
) -> QuerySet:
    """Load a LETOR file as a :class:`QuerySet` (dense float32 features), using the cache.

    Args:
        path: the text file (may be gzip/bzip2/xz-compressed).
        n_features: number of feature columns (MQ2007/MQ2008: 46, MSLR: 136); ``None`` infers
            the largest index in the file. A larger index in the file is an error.
        with_docids: keep the ``#docid = ...`` comment of every line as ``docids`` (str array;
            the whole comment if it has no ``docid =``, "" if the line has no comment).
        cache_dir: cache root (default ``$LTR_CACHE`` or ``~/.cache/ltr_bench``).
        use_cache: False parses without reading or writing the cache.
        verify_cache: check a cache entry's array checksums before using it (on by default; a
            mismatch warns, parses the file again and replaces the entry).

    Raises:
        DataFormatError: naming the file and 1-based line of the first malformed line.
        UserError: a missing, unreadable or non-text file.
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
    sha = _readable(path, lambda: file_sha256(path, root))
    if root is None:
        return _readable(path, lambda: _parse(path, n_features, with_docids, sha))
    options = {"n_features": n_features, "docids": bool(with_docids)}
    cache = ArrayCache(root, CACHE_NAMESPACE)
    key = f"{sha[:32]}-{options_key(options)}"
    hit = cache.load(key, verify=verify_cache)
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
    big = file_size(path) > PROGRESS_BYTES
    qs = _readable(path, lambda: _parse(path, n_features, with_docids, sha, progress=big))
    arrays = {"features": qs.features, "labels": qs.labels, "qid": qs.qid, "offsets": qs.offsets}
    if qs.docids is not None:
        arrays["docids"] = qs.docids
    t = time.perf_counter()
    cache.store(key, arrays, {"source": qs.source, "options": options})
    if big:
        say(f"cached {path.name} in {time.perf_counter() - t:.1f} s ({cache.entry_dir(key)})")
    return qs


def parse_letor(
    path: str | os.PathLike, n_features: int | None = None, with_docids: bool = False
) -> QuerySet:
    """Parse a LETOR file without touching the cache (same checks and errors as load_letor)."""
    return load_letor(path, n_features, with_docids, use_cache=False)


def check_same_n_features(*sets: QuerySet) -> int:
    """The common feature count of ``sets``; a mismatch is an error naming the wider file's line.

    The file with the most columns has a feature index beyond the others' width: the error names
    its first such line (so a stray ``999:`` in train.txt blames train.txt, not vali.txt).
    """
    widths = [s.n_features for s in sets]
    if len(set(widths)) <= 1:
        return widths[0]
    wide = sets[int(np.argmax(widths))]
    narrow = sets[int(np.argmin(widths))]
    a = narrow.source.get("path", "another set")
    b = wide.source.get("path", "a set")
    found = find_first_problem(b, narrow.n_features) if Path(str(b)).is_file() else None
    m = re.search(r"feature index (\d+) is above", found[1]) if found else None
    idx = int(m.group(1)) if m else wide.n_features
    raise DataFormatError(
        str(b),
        found[0] if found is not None and m else None,
        f"feature index {idx} is beyond the {narrow.n_features} features of {a}; fix the line, "
        "or give dataset.n_features so all files are read with the same width",
    )


# ------------------------------------------------------------------------------- fast path
def _parse(
    path: Path, n_features: int | None, with_docids: bool, sha: str, progress: bool = False
) -> QuerySet:
    bar = Progress(path) if progress else None
    try:
        raw = read_letor(path, n_features, progress=bar.update if bar else None)
    except BlockRejected as exc:
        raise locate(path, n_features, str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    X, y, qid = raw.features, raw.labels, raw.qid
    n = X.shape[0]
    if n == 0:
        raise DataFormatError(str(path), None, "has no data lines (empty file)")
    if not np.all(np.isfinite(X)) or not np.all(np.isfinite(y)):
        raise locate(path, n_features, "non-finite value")
    if np.any(y < 0) or np.any(y > LABEL_MAX) or np.any(y != np.round(y)):
        raise locate(path, n_features, "bad label")
    if raw.last_line_fields is not None and raw.min_other_fields is not None:
        if raw.last_line_fields < raw.min_other_fields:
            raise DataFormatError(
                str(path),
                raw.n_lines,
                f"the last line has {raw.last_line_fields} features where every other line has "
                f"at least {raw.min_other_fields}, and no final newline (truncated?); restore "
                "the end of the file or delete the line",
            )
    starts = np.concatenate([[0], np.flatnonzero(qid[1:] != qid[:-1]) + 1])
    if len(np.unique(qid[starts])) != len(starts):
        raise locate(path, n_features, "non-contiguous query")
    offsets = np.concatenate([starts, [n]]).astype(np.int64)
    docids = _read_docids(path) if with_docids else None
    if docids is not None and docids.shape[0] != n:
        raise locate(path, n_features, "comment count mismatch")
    source = {
        "format": "letor",
        "path": str(path),
        "sha256": sha,
        "n_features": int(X.shape[1]),
    }
    if raw.compression:
        source["compression"] = raw.compression
    return QuerySet(
        features=X,
        labels=y.astype(np.int32),
        qid=qid,
        offsets=offsets,
        docids=docids,
        source=source,
    )


def _read_docids(path: Path) -> np.ndarray:
    """The comment of every data line: the ``docid = X`` value, else the stripped comment."""
    out: list[str] = []
    for raw in iter_lines(path):
        body, hash_, comment = raw.partition(b"#")
        if not body.strip():
            continue
        m = _DOCID.search(comment) if hash_ else None
        text = m.group(1) if m else comment.strip()
        out.append(text.decode("utf-8", "replace"))
    return np.array(out, dtype=str)


def _existing_file(path: str | os.PathLike) -> Path:
    p = Path(path).expanduser()
    if p.is_dir():
        raise UserError(f"data file {p} is a directory, not a file; give the LETOR .txt file")
    if not p.is_file():
        raise UserError(f"data file {p} does not exist")
    return p.resolve()


def _readable(path: Path, read: Callable):
    """Run ``read()``; a file-system error on ``path`` becomes one sentence (UserError)."""
    try:
        return read()
    except PermissionError:
        raise UserError(
            f"data file {path} is not readable (permission denied); check its permissions"
        ) from None
    except IsADirectoryError:
        raise UserError(f"data file {path} is a directory, not a file") from None
    except OSError as exc:
        raise UserError(f"cannot read data file {path} ({exc.strerror or exc})") from None


__all__ = [
    "load_letor",
    "parse_letor",
    "check_same_n_features",
    "find_first_problem",
    "check_line",
    "LABEL_MAX",
]
