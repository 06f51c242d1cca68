"""The linear-time LETOR reader gives scikit-learn's arrays, bit for bit, on every input it accepts.

Property tests generate small files (dense and sparse lines, ``#docid`` comments, comment-only and
blank lines, CRLF, trailing spaces, long decimals, a last line without newline) and compare
:func:`read_letor` -- with tiny blocks, so block boundaries fall everywhere -- against
``load_svmlight_file(..., dtype=np.float32, query_id=True)``.
"""

from __future__ import annotations

import glob
import io

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_svmlight_file

from ltr_bench.data import letor_reader
from ltr_bench.data.letor import load_letor
from ltr_bench.data.letor_reader import read_letor
from ltr_bench.errors import DataFormatError

from .test_letor import BAD


def sklearn_arrays(data: bytes, n_features: int | None):
    X, y, q = load_svmlight_file(
        io.BytesIO(data), n_features=n_features, dtype=np.float32, query_id=True, zero_based=False
    )
    return X.toarray(), y, q


def assert_same(raw, ref) -> None:
    X, y, q = ref
    assert raw.features.dtype == np.float32 and raw.features.shape == X.shape
    np.testing.assert_array_equal(raw.features.view(np.uint32), X.view(np.uint32))  # bit-identical
    np.testing.assert_array_equal(raw.labels, y)
    np.testing.assert_array_equal(raw.qid, q)


# ------------------------------------------------------------------------------ generation
_values = st.one_of(
    st.integers(-1000, 100_000).map(str),
    st.floats(-1e6, 1e6, allow_nan=False).map(repr),
    st.floats(0, 1, allow_nan=False).map(lambda v: f"{v:.6f}"),
    st.floats(-1e30, 1e30, allow_nan=False).map(lambda v: f"{v:.17e}"),
    st.text("0123456789", min_size=1, max_size=25).map(lambda d: f"0.{d}"),
    st.sampled_from(["0", "0.0", "-0", "1e-45", "3.4e38", ".5", "5.", "+2", "1E3"]),
)


@st.composite
def letor_files(draw):
    n_features = draw(st.integers(1, 8))
    dense = draw(st.booleans())
    crlf = draw(st.booleans())
    n_queries = draw(st.integers(1, 5))
    lines: list[str] = []
    for qi in range(n_queries):
        qid = draw(st.integers(-5, 10**12)) * 10 + qi  # distinct per query
        for _ in range(draw(st.integers(1, 6))):
            if dense:
                idx = list(range(1, n_features + 1))
            else:
                idx = sorted(draw(st.sets(st.integers(1, n_features), max_size=n_features)))
            label = draw(st.sampled_from(["0", "1", "2", "4", "1.0", "3e0", "17"]))
            fields = [f"{i}:{draw(_values)}" for i in idx]
            line = " ".join([label, f"qid:{qid}", *fields])
            if draw(st.integers(0, 4)) == 0:
                line += f" #docid = GX{draw(st.integers(0, 999)):03d} inc = 1 prob = 0.5"
            if draw(st.integers(0, 4)) == 0:
                line += " "
            lines.append(line)
            if draw(st.integers(0, 9)) == 0:
                lines.append(draw(st.sampled_from(["", "# a comment", "   "])))
    nl = "\r\n" if crlf else "\n"
    text = nl.join(lines) + (nl if draw(st.booleans()) else "")
    return text.encode(), n_features, dense


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(letor_files(), st.sampled_from([16, 64, 300, 1 << 20]), st.booleans())
def test_same_arrays_as_sklearn(tmp_path_factory, file, block_bytes, give_n_features):
    data, n_features, _ = file
    path = tmp_path_factory.mktemp("prop") / "f.txt"
    path.write_bytes(data)
    nf = n_features if give_n_features else None
    assert_same(read_letor(path, nf, block_bytes=block_bytes), sklearn_arrays(data, nf))


def test_regular_dense_blocks_take_the_fast_path(tmp_path, monkeypatch):
    """A dense file (with comments, CRLF, trailing spaces) never reaches scikit-learn."""
    lines = [f"{i % 3} qid:{i // 4} 1:{i}.5 2:0.{i:04d} 3:{i}e-3 #docid = D{i}" for i in range(40)]
    data = ("  \r\n".join(lines) + "  \r\n").encode()
    path = tmp_path / "dense.txt"
    path.write_bytes(data)
    ref = sklearn_arrays(data, None)
    monkeypatch.setattr("sklearn.datasets.load_svmlight_file", _boom)
    assert_same(read_letor(path, block_bytes=256), ref)


def _boom(*args, **kwargs):
    raise AssertionError("scikit-learn's parser was used for a regular block")


def test_irregular_block_falls_back_to_sklearn(tmp_path):
    data = b"1 qid:1 1:0.5\n0 qid:1 2:0.25 3:1\n\n2\tqid:2 1:1\n"
    path = tmp_path / "sparse.txt"
    path.write_bytes(data)
    assert_same(read_letor(path), sklearn_arrays(data, None))


def test_rejects_what_sklearn_rejects_on_the_fast_path(tmp_path):
    """Tokens pandas would read (``3.0:`` as an index, ``1e2`` as a qid) are left to sklearn."""
    for data in (b"1 qid:1 1:0.5 3.0:1\n", b"1 qid:1e2 1:0.5\n", b"1 qid:1 1:0.5 2:1.2.3\n"):
        path = tmp_path / "odd.txt"
        path.write_bytes(data)
        with pytest.raises(DataFormatError) as info:
            load_letor(path, use_cache=False)
        assert info.value.line == 1


@pytest.mark.parametrize("name,text,line,words", BAD, ids=[b[0] for b in BAD])
def test_bad_input_line_found_with_tiny_blocks(tmp_path, monkeypatch, name, text, line, words):
    monkeypatch.setattr(letor_reader, "BLOCK_BYTES", 16)
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(DataFormatError) as info:
        load_letor(p, n_features=3, use_cache=False)
    assert info.value.line == line and words in info.value.problem


def test_progress_line_for_big_files(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("ltr_bench.data.letor.PROGRESS_BYTES", 10)
    p = tmp_path / "d" / "a.txt"
    p.parent.mkdir()
    p.write_text("1 qid:1 1:0.5\n0 qid:1 1:0.25\n")
    load_letor(p)
    err = capsys.readouterr().err
    assert f"parsing {p}" in err and "(cached afterwards)" in err and "cached a.txt" in err
    load_letor(p)  # a cache hit prints nothing
    assert capsys.readouterr().err == ""


@pytest.mark.realdata
def test_mq2008_all_files_bit_identical_to_sklearn(real_root, monkeypatch):
    paths = sorted(glob.glob(str(real_root / "MQ2008" / "Fold*" / "*.txt")))
    assert len(paths) == 15
    refs = [sklearn_arrays(open(p, "rb").read(), None) for p in paths]
    monkeypatch.setattr("sklearn.datasets.load_svmlight_file", _boom)  # all on the fast path
    for p, ref in zip(paths, refs):
        assert_same(read_letor(p), ref)


_EDITS = st.lists(
    st.tuples(
        st.integers(0, 10**6),
        st.sampled_from(list(b" :q.eE\t\r\n#-+0x")),
        st.sampled_from(["insert", "delete", "replace"]),
    ),
    min_size=1,
    max_size=4,
)


def _edit(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for pos, byte, kind in edits:
        i = pos % (len(out) + 1)
        if kind == "insert":
            out.insert(i, byte)
        elif out and i < len(out):
            if kind == "delete":
                del out[i]
            else:
                out[i] = byte
    return bytes(out)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(letor_files(), _EDITS, st.sampled_from([16, 1 << 20]))
def test_damaged_files_read_like_sklearn_or_rejected_like_it(tmp_path_factory, file, edits, bb):
    """Differential fuzzing: after random edits, either both parsers reject the file or the
    arrays are the same (scikit-learn dropping a line's missing qid counts as a rejection)."""
    data = _edit(file[0], edits)
    path = tmp_path_factory.mktemp("fuzz") / "f.txt"
    path.write_bytes(data)
    try:
        ref = sklearn_arrays(data, None)
        if len(ref[2]) != len(ref[1]):
            ref = None
    except Exception:  # noqa: BLE001 - any rejection
        ref = None
    try:
        raw = read_letor(path, block_bytes=bb)
    except letor_reader.BlockRejected:
        raw = None
    assert (raw is None) == (ref is None), data
    if ref is not None:
        assert_same(raw, ref)
