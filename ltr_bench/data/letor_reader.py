"""Reading LETOR text in linear time: pandas' C CSV parser over blocks, scikit-learn for odd blocks.

Why (``benchmarks/bench_letor.py`` compares them on MSLR-shaped files): scikit-learn's
``load_svmlight_file(query_id=True)`` grows its query-id array with ``np.append`` per line, so it
is quadratic in the number of lines; without query ids it is linear but slow (a Python ``float()``
per value). pyarrow's CSV reader and a ``np.fromstring`` pass are not faster than pandas' C parser
(which converts correctly rounded, like Python's ``float``); LightGBM's loader only yields binned
features, not the values.

A file is read in blocks of about :data:`BLOCK_BYTES`, cut at line ends. A *regular* block -- every
line ``<label> qid:<q> <i>:<v> ...`` with single spaces, the same number of fields on every line,
digits/sign/``.``/``e`` in the numbers, optional ``# comments``, LF or CRLF -- is recognised with a
few C-speed bytes passes (``translate``/``count``), turned into a space-separated table (``:`` ->
space) and parsed by pandas. Every other block (sparse lines of varying length, tabs, blank lines,
odd tokens) is parsed by scikit-learn's parser on that block only, exactly as before, so the cost
stays linear. Both convert each number to the nearest float64 and cast to float32, so the arrays
are bit-identical to ``load_svmlight_file(..., dtype=np.float32)``.

This module only reads; the checks that name a file and line live in :mod:`ltr_bench.data.letor`.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO, cast

import numpy as np

from ltr_bench.errors import UserError

BLOCK_BYTES = 8 << 20  # 16 MiB: peak memory 3.2x the result at 100k lines; 8 MiB: 2.3x
BOM = b"\xef\xbb\xbf"
#: Largest index (and qid magnitude) the fast path converts exactly via float64.
_EXACT_INT = 2**53
_MAX_INDEX = 2**31 - 1

_DIGITS = b"0123456789+-"
_SEPARATORS = b" :\r\n.eE"
_DECIMAL_QID = re.compile(rb"qid:[^ \r\n]")
_SEPS_DROP = b".eEqid\r"
_COLON_TO_SPACE = bytes.maketrans(b":", b" ")
_COMMENT = re.compile(rb"#[^\n]*")
_LINE_PATTERN = re.compile(rb"(?: :)+ ?\n")

_STREAMS = {
    b"\x1f\x8b": ("gzip", lambda f: gzip.GzipFile(fileobj=f, mode="rb")),
    b"BZh": ("bzip2", lambda f: bz2.BZ2File(f, mode="rb")),
    b"\xfd7zXZ\x00": ("xz", lambda f: lzma.LZMAFile(f, mode="rb")),
}
_ARCHIVES = {
    b"PK\x03\x04": "a zip archive",
    b"Rar!": "a rar archive",
    b"7z\xbc\xaf\x27\x1c": "a 7z archive",
    b"\x28\xb5\x2f\xfd": "zstd-compressed",
}


class BlockRejected(Exception):
    """scikit-learn's parser rejected a block: the caller scans the file for the exact line."""


@dataclass
class RawLetor:
    """What :func:`read_letor` returns (no checks beyond parsing applied yet).

    ``last_line_fields`` is the ``i:v`` count of the file's last line when that line is a data
    line without a final newline (else None); ``min_other_fields`` the fewest ``i:v`` fields on
    any other data line (None if there is none).
    """

    features: np.ndarray
    labels: np.ndarray
    qid: np.ndarray
    n_lines: int
    last_line_fields: int | None
    min_other_fields: int | None
    compression: str | None


# -------------------------------------------------------------------------------- opening
def open_data(path: str | os.PathLike) -> tuple[BinaryIO, BinaryIO, str | None]:
    """``(stream, raw file, compression)`` of a data file; gzip/bzip2/xz are read transparently.

    Raises:
        UserError: for archives (zip, rar, 7z) and zstd, naming the file and what to do.
    """
    raw = open(path, "rb")
    head = raw.read(8)
    raw.seek(0)
    for magic, what in _ARCHIVES.items():
        if head.startswith(magic):
            raw.close()
            raise UserError(
                f"data file {path} is {what}, not LETOR text; unpack it and give the .txt inside"
            )
    for magic, (name, cls) in _STREAMS.items():
        if head.startswith(magic):
            return cast(BinaryIO, cls(raw)), raw, name  # a BufferedIOBase reads like one
    return raw, raw, None


def iter_lines(path: str | os.PathLike) -> Iterator[bytes]:
    """The file's lines as bytes (decompressed, a leading UTF-8 BOM removed)."""
    stream, raw, _ = open_data(path)
    with raw, stream:
        first = True
        for line in stream:
            if first and line.startswith(BOM):
                line = line[len(BOM) :]
            first = False
            yield line


def _blocks(stream: BinaryIO, size: int) -> Iterator[tuple[bytes, bool]]:
    """Blocks of whole lines; the file's last line, if it has no newline, comes alone, flagged."""
    rest = b""
    first = True
    while True:
        chunk = stream.read(size)
        if first:
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM) :]
            first = False
        if not chunk:
            if rest:
                yield rest, False
            return
        cut = chunk.rfind(b"\n")
        if cut < 0:
            rest += chunk
            continue
        yield (rest + chunk[: cut + 1] if rest else chunk[: cut + 1]), True
        rest = chunk[cut + 1 :]


# ------------------------------------------------------------------------------ block parsing
def _table(block: bytes) -> list[np.ndarray] | None:
    """The float64 columns (label, qid, i1, v1, i2, v2, ...) of a regular block, else None."""
    if b"#" in block:
        block = _COMMENT.sub(b"", block)
    skel = block.translate(None, _DIGITS)
    n = skel.count(b"\n")
    letters = skel.translate(None, _SEPARATORS)
    if n == 0 or len(letters) != 3 * n or letters.count(b"qid") != n:
        return None  # other characters than numbers and separators, or not one 'qid' a line
    if block.count(b" qid:") != n or _DECIMAL_QID.search(skel):
        return None  # a line without ' qid:' as its second field, or a qid like 1e2 or 3.0
    if b".:" in skel or b"e:" in skel or b"E:" in skel:
        return None  # an index written as a decimal: scikit-learn's int() rejects it
    if b"\r" in skel and skel.count(b"\r") != skel.count(b"\r\n"):
        return None
    seps = skel.translate(None, _SEPS_DROP)
    first = seps[: seps.index(b"\n") + 1]
    if not _LINE_PATTERN.fullmatch(first) or len(seps) != len(first) * n or seps.count(first) != n:
        return None  # n non-overlapping copies filling the length: every line has this layout
    trailing = first.endswith(b" \n")
    if trailing and block.count(b" \n") + block.count(b" \r\n") != n:
        return None  # the space before the newline must end the line, not start a stray token
    k = first.count(b":") - 1
    n_cols = 2 * k + 3 + (1 if trailing else 0)
    import pandas as pd

    try:
        frame = pd.read_csv(
            io.BytesIO(block.translate(_COLON_TO_SPACE)),
            sep=" ",
            header=None,
            names=list(range(n_cols)),
            usecols=[0, *range(2, 2 * k + 3)],
            dtype=np.float64,
            na_filter=False,
            skip_blank_lines=False,
            engine="c",
        )
    except (ValueError, TypeError, OverflowError, pd.errors.ParserError):
        return None
    if frame.shape != (n, 2 * k + 2):
        return None
    return [frame[c].to_numpy(dtype=np.float64) for c in frame.columns]


def _features_from_columns(
    cols: list[np.ndarray], n_features: int | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(features float32 [n, width], fields per line)`` from a regular block, or None."""
    n = len(cols[0])
    k = (len(cols) - 2) // 2
    if np.any(np.abs(cols[1]) >= _EXACT_INT):
        return None
    idx_cols, val_cols = cols[2::2], cols[3::2]
    fields = np.full(n, k, dtype=np.int64)
    if k and all(np.all(c == j) for j, c in enumerate(idx_cols, 1)):  # dense: 1..k in order
        if n_features is not None and k > n_features:
            return None
        width = k if n_features is None else n_features
        features = (np.empty if width == k else np.zeros)((n, width), dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            for j, c in enumerate(val_cols):
                features[:, j] = c
        features += 0  # -0.0 -> 0.0, as scikit-learn's CSR -> dense sum does
        return features, fields
    idx = np.column_stack(idx_cols) if k else np.zeros((n, 0))
    if k and (idx.min() < 1 or idx.max() > _MAX_INDEX or np.any(np.diff(idx, axis=1) <= 0)):
        return None
    width = int(idx.max()) if k else 0
    if n_features is not None:
        if width > n_features:
            return None
        width = n_features
    features = np.zeros((n, width), dtype=np.float32)
    if k:
        with np.errstate(over="ignore", invalid="ignore"):
            vals = np.column_stack(val_cols).astype(np.float32)
        features[np.repeat(np.arange(n), k), idx.astype(np.int64).ravel() - 1] = vals.ravel()
        features += 0  # -0.0 -> 0.0, as scikit-learn's CSR -> dense sum does
    return features, fields


def _parse_block(
    block: bytes, n_features: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(features float32, labels float64, qid int64, fields per line)`` of a block of lines.

    Raises:
        BlockRejected: when scikit-learn's parser (the exact path) rejects the block.
    """
    cols = _table(block)
    if cols is not None:
        done = _features_from_columns(cols, n_features)
        if done is not None:
            features, fields = done
            return features, cols[0], cols[1].astype(np.int64), fields
    from sklearn.datasets import load_svmlight_file

    try:
        X, y, qid = load_svmlight_file(
            io.BytesIO(block),
            n_features=n_features,
            dtype=np.float32,
            query_id=True,
            zero_based=False,
        )
    except (ValueError, OverflowError, IndexError, UnicodeDecodeError) as exc:
        raise BlockRejected(str(exc)) from None
    if qid.shape[0] != X.shape[0]:  # sklearn silently skips a missing qid
        raise BlockRejected("a line has no qid")
    return X.toarray(), np.asarray(y, dtype=np.float64), qid.astype(np.int64), np.diff(X.indptr)


# ------------------------------------------------------------------------------------- API
def read_letor(
    path: str | os.PathLike,
    n_features: int | None = None,
    progress: Callable[[int], None] | None = None,
    block_bytes: int | None = None,
) -> RawLetor:
    """Parse a LETOR file into dense float32 features, float64 labels and int64 query ids.

    Args:
        path: the file (plain, or gzip/bzip2/xz-compressed).
        n_features: the feature count; None infers the largest index.
        progress: called with the number of (on-disk) bytes read so far, after each block.
        block_bytes: block size (default :data:`BLOCK_BYTES`).

    Raises:
        BlockRejected: a block scikit-learn's parser rejects (locate the line with
            :func:`ltr_bench.data.letor.find_first_problem`).
        UserError: an archive or a file that is not text.
    """
    stream, raw, compression = open_data(path)
    try:
        size = os.fstat(raw.fileno()).st_size
    except (OSError, AttributeError):
        size = 0
    sink = _Rows(n_features, size)
    labels_parts: list[np.ndarray] = []
    qid_parts: list[np.ndarray] = []
    n_lines = 0
    min_fields: int | None = None
    last_fields: int | None = None
    with raw, stream:
        try:
            for block, complete in _blocks(stream, block_bytes or BLOCK_BYTES):
                if n_lines == 0 and b"\x00" in block[:65536]:
                    raise UserError(
                        f"data file {path} is not LETOR text (it contains NUL bytes); give the "
                        "uncompressed .txt file"
                    )
                n_lines += block.count(b"\n") + (0 if complete else 1)
                features, labels, qid, fields = _parse_block(
                    block if complete else block + b"\n", n_features
                )
                if len(labels):
                    if complete:
                        low = int(fields.min())
                        min_fields = low if min_fields is None else min(min_fields, low)
                    else:
                        last_fields = int(fields[-1])
                    sink.add(features, raw.tell())
                    labels_parts.append(labels)
                    qid_parts.append(qid)
                if progress is not None:
                    progress(raw.tell())
        except (EOFError, gzip.BadGzipFile, lzma.LZMAError, OSError) as exc:
            if compression is None:
                raise
            raise UserError(
                f"data file {path} is {compression}-compressed but cannot be decompressed "
                f"({exc}); download it again or give the uncompressed .txt"
            ) from None
    return RawLetor(
        sink.result(),
        np.concatenate(labels_parts) if labels_parts else np.zeros(0),
        np.concatenate(qid_parts) if qid_parts else np.zeros(0, dtype=np.int64),
        n_lines,
        last_fields,
        min_fields,
        compression,
    )


class _Rows:
    """The float32 feature matrix, filled block by block into one preallocated array.

    The first block's bytes per row give an estimate of the file's rows; the array is allocated
    25% larger (pages never written are never resident, so the slack costs no memory) and grown
    (copied) only if the estimate was short or a later block is wider. So the peak memory is about
    one result plus one block, instead of two results for a list of blocks joined at the end.
    """

    def __init__(self, n_features: int | None, file_size: int) -> None:
        self.n_features = n_features
        self.file_size = file_size
        self.buf: np.ndarray | None = None
        self.rows = 0

    def add(self, features: np.ndarray, position: int) -> None:
        m, w = features.shape
        if self.buf is None:
            per_row = max(position, 1) / m
            est = int(self.file_size / per_row * 1.25) + 1024 if self.file_size else m
            width = self.n_features if self.n_features is not None else max(w, 1)
            self.buf = np.zeros((max(est, m), width), dtype=np.float32)
        width = self.buf.shape[1]
        if self.rows + m > self.buf.shape[0] or w > width:
            grown = np.zeros(
                (max(2 * self.buf.shape[0], self.rows + m), max(w, width)), dtype=np.float32
            )
            grown[: self.rows, :width] = self.buf[: self.rows]
            self.buf = grown
        self.buf[self.rows : self.rows + m, :w] = features
        self.rows += m

    def result(self) -> np.ndarray:
        if self.buf is None:
            return np.zeros(
                (0, self.n_features if self.n_features is not None else 1), dtype=np.float32
            )
        return self.buf[: self.rows]


__all__ = ["read_letor", "open_data", "iter_lines", "RawLetor", "BlockRejected", "BLOCK_BYTES"]
