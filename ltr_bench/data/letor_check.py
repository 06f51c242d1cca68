"""Finding the first malformed line of a LETOR file, for an error that names it.

Only called when the fast reader rejects a file or a check on its arrays fails: the file is scanned
again, chunk by chunk, each chunk tried with scikit-learn's parser and checked vectorised, and only
a failing chunk checked line by line in Python.
"""

from __future__ import annotations

import io
import itertools
import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from ltr_bench.data.letor_reader import iter_lines
from ltr_bench.errors import DataFormatError

#: Labels are stored as int32: a label must be an integer in ``0..LABEL_MAX``.
LABEL_MAX = 2**31 - 1
_SCAN_CHUNK_LINES = 20_000


def locate(path: Path, n_features: int | None, parser_message: str) -> DataFormatError:
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
    from sklearn.datasets import load_svmlight_file  # a heavy import: only when a file is checked

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
