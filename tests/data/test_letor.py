"""load_letor: values, docids, n_features, and one clear error per kind of bad input."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_bench.data import letor_check
from ltr_bench.data.letor import check_same_n_features, find_first_problem, load_letor
from ltr_bench.errors import DataFormatError, UserError

from .letor_files import random_letor, write_letor

GOOD = (
    "2 qid:10 1:0.5 2:1 3:0 #docid = GX01 inc = 1\n"
    "0 qid:10 1:0.25 2:0 3:7 #docid = GX02 inc = 1\n"
    "1 qid:3 1:1 2:2 3:3 #docid = GX03\n"
)


def test_parses_hand_written_file(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text(GOOD)
    qs = load_letor(p)
    np.testing.assert_array_equal(
        qs.features, np.array([[0.5, 1, 0], [0.25, 0, 7], [1, 2, 3]], dtype=np.float32)
    )
    assert qs.features.dtype == np.float32 and qs.labels.dtype == np.int32
    np.testing.assert_array_equal(qs.labels, [2, 0, 1])
    np.testing.assert_array_equal(qs.qid, [10, 10, 3])
    np.testing.assert_array_equal(qs.offsets, [0, 2, 3])
    assert qs.docids is None
    assert qs.source["sha256"] and qs.source["path"].endswith("a.txt")
    assert qs.source["n_features"] == 3


def test_docids_and_wider_n_features(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text(GOOD + "0 qid:3 1:1\n")  # no comment -> ""
    qs = load_letor(p, n_features=5, with_docids=True)
    assert qs.n_features == 5 and np.all(qs.features[:, 3:] == 0)
    assert qs.docids.tolist() == ["GX01", "GX02", "GX03", ""]


def test_blank_and_comment_lines_are_skipped(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("# header\n\n" + GOOD.replace("\n", "\r\n"))
    qs = load_letor(p, with_docids=True)
    assert qs.n_docs == 3 and qs.docids.tolist() == ["GX01", "GX02", "GX03"]


BAD = [
    ("missing qid", "1 qid:1 1:0.5\n0 1:0.1\n", 2, "qid"),
    ("missing qid first", "1 1:0.5\n0 qid:2 1:0.1\n", 1, "qid"),
    ("non-numeric value", "1 qid:1 1:0.5\n0 qid:1 1:abc\n", 2, "non-numeric"),
    ("non-numeric label", "1 qid:1 1:0.5\nx qid:1 1:0.1\n", 2, "label"),
    ("fractional label", "1 qid:1 1:0.5\n1.5 qid:1 1:0.1\n", 2, "label"),
    ("negative label", "1 qid:1 1:0.5\n-1 qid:1 1:0.1\n", 2, "label"),
    ("index above n_features", "1 qid:1 1:0.5\n\n0 qid:1 1:0.1 4:2\n", 3, "above n_features=3"),
    ("nan", "1 qid:1 1:0.5\n0 qid:1 1:0.1\n0 qid:1 1:nan\n", 3, "non-finite"),
    ("inf", "# c\n1 qid:1 1:inf\n", 2, "non-finite"),
    ("index 0", "1 qid:1 0:0.5\n", 1, "below 1"),
    ("unsorted indices", "1 qid:1 2:0.5 1:0.3\n", 1, "not increasing"),
    ("garbage token", "1 qid:1 1:0.5\n1 qid:1 foo\n", 2, "not <index>:<value>"),
    (
        "non-contiguous query",
        "1 qid:1 1:0.5\n0 qid:2 1:0.1\n1 qid:2 1:0.2\n0 qid:1 1:0.3\n",
        4,
        "contiguous",
    ),
]


@pytest.mark.parametrize("name,text,line,words", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_file_and_line(tmp_path, name, text, line, words):
    p = tmp_path / "bad.txt"
    p.write_text(text)
    with pytest.raises(DataFormatError) as info:
        load_letor(p, n_features=3)
    err = info.value
    assert err.line == line, str(err)
    assert words in err.problem, str(err)
    assert str(err).startswith(f"{p}:{line}: ")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_file(tmp_path, text):
    p = tmp_path / "empty.txt"
    p.write_text(text)
    with pytest.raises(DataFormatError, match="empty") as info:
        load_letor(p)
    assert info.value.path == str(p)


def test_error_line_found_across_scan_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(letor_check, "_SCAN_CHUNK_LINES", 7)
    lines = [f"0 qid:{i // 4} 1:{i}" for i in range(40)]
    lines[22] = "0 qid:5 1:nan"
    lines[30] = "0 qid:1 1:1"  # a second, later problem (qid 1 again)
    p = tmp_path / "long.txt"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataFormatError) as info:
        load_letor(p)
    assert info.value.line == 23
    lines[22] = "0 qid:5 1:1"
    p.write_text("\n".join(lines) + "\n")
    assert find_first_problem(p) == (31, find_first_problem(p)[1])
    assert "contiguous" in find_first_problem(p)[1]


def test_missing_file_is_user_error(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_letor(tmp_path / "nope.txt")


def test_feature_count_mismatch_names_both_files(tmp_path):
    a = load_letor(random_letor(tmp_path / "train.txt", n_features=5))
    b = load_letor(random_letor(tmp_path / "test.txt", n_features=4, seed=1))
    with pytest.raises(DataFormatError) as info:
        check_same_n_features(a, b)
    msg = str(info.value)
    assert "train.txt" in msg and "test.txt" in msg and "5" in msg and "4" in msg
    assert check_same_n_features(a, a) == 5


def test_matches_independent_python_parse(tmp_path):
    rng = np.random.default_rng(3)
    n = 50
    qids = np.repeat(np.arange(7), [7, 7, 7, 7, 7, 7, 8])
    labels = rng.integers(0, 5, n)
    feats = np.round(rng.normal(size=(n, 6)), 5)
    p = write_letor(tmp_path / "r.txt", labels, qids, feats, comments=[f"d{i}" for i in range(n)])
    qs = load_letor(p, with_docids=True)
    ref = np.zeros((n, 6))
    for i, line in enumerate(p.read_text().splitlines()):
        for tok in line.split("#")[0].split()[2:]:
            j, v = tok.split(":")
            ref[i, int(j) - 1] = float(v)
    np.testing.assert_allclose(qs.features, ref.astype(np.float32))
    np.testing.assert_array_equal(qs.labels, labels)
    np.testing.assert_array_equal(qs.query_lengths, [7] * 6 + [8])
    assert qs.docids[-1] == f"d{n - 1}"


@pytest.mark.realdata
def test_mq2008_done_when_numbers(real_root, tmp_path):
    train = load_letor(real_root / "MQ2008/Fold1/train.txt", n_features=46, cache_dir=tmp_path)
    assert (train.n_docs, train.n_queries, train.n_features) == (9630, 471, 46)
    tests = [
        load_letor(real_root / f"MQ2008/Fold{k}/test.txt", n_features=46, cache_dir=tmp_path)
        for k in range(1, 6)
    ]
    assert sum(t.n_queries for t in tests) == 784
    assert sum(t.n_docs for t in tests) == 15211
    assert len(np.unique(np.concatenate([t.query_ids for t in tests]))) == 784
    labels = np.concatenate([t.labels for t in tests])
    np.testing.assert_array_equal(np.bincount(labels), [12279, 2001, 931])
    assert train.source["sha256"].startswith("9b98c14e9536")


@pytest.mark.realdata
def test_mslr_sample_and_docids(real_root, tmp_path):
    m = load_letor(real_root / "MSLR-sample/search_tiny_train.txt", 136, cache_dir=tmp_path)
    assert (m.n_docs, m.n_queries, m.n_features) == (582, 7, 136)
    np.testing.assert_array_equal(np.bincount(m.labels), [338, 155, 77, 6, 6])
    t = load_letor(real_root / "MQ2008/Fold1/test.txt", with_docids=True, cache_dir=tmp_path)
    assert t.docids.shape == (2874,) and all(d.startswith("GX") for d in t.docids[:20])
