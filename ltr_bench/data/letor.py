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
"""

from __future__ import annotations

import io
import itertools
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from sklearn.datasets import load_svmlight_file

from ltr_bench.data.cache import ArrayCache, file_sha256, options_key, resolve_cache_dir
from ltr_bench.data.letor_reader import BlockRejected, iter_lines, read_letor
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import DataFormatError, UserError

CACHE_NAMESPACE = "letor-v2"
#: Labels are stored as int32: a label must be an integer in ``0..LABEL_MAX``.
LABEL_MAX = 2**31 - 1
#: Files larger than this get a progress line while they are parsed.
PROGRESS_BYTES = 100 * 10**6
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
    big = _size(path) > PROGRESS_BYTES
    qs = _readable(path, lambda: _parse(path, n_features, with_docids, sha, progress=big))
    arrays = {"features": qs.features, "labels": qs.labels, "qid": qs.qid, "offsets": qs.offsets}
    if qs.docids is not None:
        arrays["docids"] = qs.docids
    t = time.perf_counter()
    cache.store(key, arrays, {"source": qs.source, "options": options})
    if big:
        _say(f"cached {path.name} in {time.perf_counter() - t:.1f} s ({cache.entry_dir(key)})")
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
        found[0] if m else None,
        f"feature index {idx} is beyond the {narrow.n_features} features of {a}; fix the line, "
        "or give dataset.n_features so all files are read with the same width",
    )


# ------------------------------------------------------------------------------- fast path
def _parse(
    path: Path, n_features: int | None, with_docids: bool, sha: str, progress: bool = False
) -> QuerySet:
    bar = _progress(path) if progress else None
    try:
        raw = read_letor(path, n_features, progress=bar.update if bar else None)
    except BlockRejected as exc:
        raise _locate(path, n_features, str(exc)) from None
    finally:
        if bar is not None:
            bar.close()
    X, y, qid = raw.features, raw.labels, raw.qid
    n = X.shape[0]
    if n == 0:
        raise DataFormatError(str(path), None, "has no data lines (empty file)")
    if not np.all(np.isfinite(X)) or not np.all(np.isfinite(y)):
        raise _locate(path, n_features, "non-finite value")
    if np.any(y < 0) or np.any(y > LABEL_MAX) or np.any(y != np.round(y)):
        raise _locate(path, n_features, "bad label")
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
        raise _locate(path, n_features, "non-contiguous query")
    offsets = np.concatenate([starts, [n]]).astype(np.int64)
    docids = _read_docids(path) if with_docids else None
    if docids is not None and docids.shape[0] != n:
        raise _locate(path, n_features, "comment count mismatch")
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


# --------------------------------------------------------------------------------- progress
class _Progress:
    """One stderr line for a big file; a tqdm bar when stderr is a terminal."""

    def __init__(self, path: Path) -> None:
        self.size = _size(path)
        self.start = time.perf_counter()
        self.path = path
        _say(f"parsing {path} ({_human(self.size)}) ... (cached afterwards)")
        self.bar = None
        if sys.stderr.isatty():
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.size,
                unit="B",
                unit_scale=True,
                file=sys.stderr,
                desc=path.name,
                leave=False,
            )
        self.done = 0

    def update(self, position: int) -> None:
        if self.bar is not None:
            self.bar.update(max(0, position - self.done))
        self.done = position

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        dt = time.perf_counter() - self.start
        _say(f"parsed {self.path.name} in {dt:.1f} s ({self.size / 1e6 / max(dt, 1e-9):.0f} MB/s)")


def _progress(path: Path) -> _Progress:
    return _Progress(path)


def _say(text: str) -> None:
    print(f"ltr-bench: {text}", file=sys.stderr, flush=True)


def _human(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} TB"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# ------------------------------------------------------------------------- error location
def _locate(path: Path, n_features: int | None, parser_message: str) -> DataFormatError:
    """Scan ``path`` for its first malformed line and return the error to raise."""
    found = find_first_problem(path, n_features)
    if found is None:  # the scan is stricter than the parser in every case we know of
        return DataFormatError(str(path), None, f"could not be read ({parser_message})")
    line, problem = found
    if line is not None and _is_unterminated_last_line(path, line):
        problem += " (truncated? the last line has no final newline)"
    return DataFormatError(str(path), line, problem)


def _is_unterminated_last_line(path: Path, line: int) -> bool:
    """True if ``line`` is the file's last line and the file does not end with a newline."""
    try:
        with open(path, "rb") as f:
            if f.read(2) == b"\x1f\x8b":
                return False
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return False
            f.seek(-1, os.SEEK_END)
            if f.read(1) == b"\n":
                return False
            f.seek(0)
            return (
                sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b"")) + 1 == line
            )
    except OSError:
        return False


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
    for first_line, lines in _chunks(iter_lines(path)):
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


def _chunks(lines_iter: Iterable[bytes]) -> Iterator[tuple[int, list[bytes]]]:
    it = iter(lines_iter)
    lineno = 1
    while True:
        lines = list(itertools.islice(it, _SCAN_CHUNK_LINES))
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
            dtype=np.float32,
            query_id=True,
            zero_based=False,
        )
        with np.errstate(invalid="ignore"):
            clean = (
                qid.shape[0] == X.shape[0]
                and np.all(np.isfinite(X.data))
                and np.all(np.isfinite(y))
                and np.all(y >= 0)
                and np.all(y <= LABEL_MAX)
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
    if label > LABEL_MAX:
        return (
            f"label {_show(tokens[0])} is out of range (labels are stored as int32: 0..{LABEL_MAX})"
        )
    if len(tokens) < 2 or not tokens[1].startswith(b"qid:"):
        return "missing 'qid:' (the second field must be qid:<integer>)"
    try:
        q = int(tokens[1][4:])
    except ValueError:
        return f"query id {_show(tokens[1])} is not an integer"
    if not -(2**63) <= q < 2**63:
        return f"query id {_show(tokens[1])} is out of the int64 range"
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
        if not math.isfinite(float(np.float32(value))):
            return f"feature {idx} has value {_show(val_s)}, beyond the float32 range"
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
