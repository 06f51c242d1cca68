"""The parse cache: round trip, memory-mapping, content keys, atomic writes, settings."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil

import numpy as np
import pytest

from ltr_bench.data import letor
from ltr_bench.data.cache import (
    ArrayCache,
    CacheWarning,
    file_sha256,
    resolve_cache_dir,
    sha256_file,
)
from ltr_bench.data.letor import load_letor
from ltr_bench.errors import UserError

from .letor_files import random_letor


def _no_parse(*args, **kwargs):
    raise AssertionError("the file was parsed again instead of read from the cache")


def test_round_trip_equal_and_memory_mapped(tmp_path, monkeypatch):
    p = random_letor(tmp_path / "data" / "train.txt", n_queries=8)
    cache = tmp_path / "cache"
    first = load_letor(p, n_features=5, with_docids=False, cache_dir=cache)
    monkeypatch.setattr(letor, "read_letor", _no_parse)
    second = load_letor(p, n_features=5, cache_dir=cache)
    for name in ("features", "labels", "qid", "offsets"):
        a, b = getattr(first, name), getattr(second, name)
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
        assert isinstance(b, np.memmap) and not b.flags.writeable
    assert second.fingerprint() == first.fingerprint()
    assert second.source["sha256"] == first.source["sha256"] == sha256_file(p)
    assert not any(f.name.endswith(".npy") for f in p.parent.iterdir())  # nothing in the data dir


def test_docids_cached_separately(tmp_path, monkeypatch):
    p = tmp_path / "d" / "a.txt"
    p.parent.mkdir()
    p.write_text("1 qid:1 1:1 #docid = A\n0 qid:1 1:2 #docid = B\n")
    a = load_letor(p, with_docids=True)
    assert load_letor(p).docids is None
    monkeypatch.setattr(letor, "read_letor", _no_parse)
    assert load_letor(p, with_docids=True).docids.tolist() == ["A", "B"] == a.docids.tolist()


def test_key_is_content_not_path(tmp_path, monkeypatch):
    p = random_letor(tmp_path / "a" / "train.txt")
    load_letor(p)
    copy = tmp_path / "b" / "copy.txt"
    copy.parent.mkdir()
    shutil.copy(p, copy)
    monkeypatch.setattr(letor, "read_letor", _no_parse)
    qs = load_letor(copy)  # same bytes elsewhere: a hit, reported under its own path
    assert qs.source["path"] == str(copy.resolve())


def test_changed_file_is_parsed_again(tmp_path):
    p = tmp_path / "d" / "a.txt"
    p.parent.mkdir()
    p.write_text("1 qid:1 1:1\n")
    assert load_letor(p).features[0, 0] == 1
    p.write_text("1 qid:1 1:2\n")  # same size: the stat memo must still notice (mtime/inode)
    os.utime(p, ns=(1, 1))
    assert load_letor(p).features[0, 0] == 2


def test_options_are_part_of_the_key(tmp_path):
    p = random_letor(tmp_path / "d" / "a.txt", n_features=3)
    assert load_letor(p).n_features == 3
    assert load_letor(p, n_features=6).n_features == 6


def test_cache_dir_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "env"))
    assert resolve_cache_dir() == tmp_path / "env"
    assert resolve_cache_dir(tmp_path / "arg") == tmp_path / "arg"
    monkeypatch.setenv("LTR_CACHE", "off")
    assert resolve_cache_dir() is None
    monkeypatch.delenv("LTR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_cache_dir() == tmp_path / "xdg" / "ltr_bench"


def test_cache_off_and_not_in_data_dir(tmp_path, monkeypatch):
    p = random_letor(tmp_path / "d" / "a.txt")
    monkeypatch.setenv("LTR_CACHE", "off")
    assert not isinstance(load_letor(p).features, np.memmap)
    assert not isinstance(load_letor(p, cache_dir=None).features, np.memmap)
    with pytest.raises(UserError, match="cache dir"):
        load_letor(p, cache_dir=p.parent)


def test_hash_memo_and_verify(tmp_path, monkeypatch):
    p = random_letor(tmp_path / "d" / "a.txt")
    root = tmp_path / "c"
    digest = file_sha256(p, root)
    assert digest == sha256_file(p)
    memo = next((root / "hashes").iterdir())
    assert digest in memo.read_text()
    calls = []
    monkeypatch.setattr("ltr_bench.data.cache.sha256_file", lambda q: calls.append(q) or "x")
    assert file_sha256(p, root) == digest and calls == []  # stat unchanged: memo used
    monkeypatch.setenv("LTR_CACHE_VERIFY", "1")
    assert file_sha256(p, root) == "x" and len(calls) == 1


def _store(args):
    root, i = args
    arr = np.arange(200_000, dtype=np.float64)
    ok = ArrayCache(root, "ns").store("k", {"a": arr, "b": arr[:5] * i}, {"writer": i})
    return ok


def test_parallel_writers_leave_one_complete_entry(tmp_path):
    ctx = mp.get_context("fork")
    with ctx.Pool(4) as pool:
        results = pool.map(_store, [(tmp_path, i) for i in range(8)])
    assert all(results)
    arrays, meta = ArrayCache(tmp_path, "ns").load("k")
    np.testing.assert_array_equal(arrays["a"], np.arange(200_000))
    np.testing.assert_array_equal(arrays["b"], np.arange(5) * meta["writer"])
    leftovers = [d.name for d in (tmp_path / "ns").iterdir() if d.name != "k"]
    assert leftovers == []


def test_broken_entry_is_rebuilt(tmp_path):
    p = random_letor(tmp_path / "d" / "a.txt")
    first = load_letor(p)  # parsed and stored
    second = load_letor(p)  # read back: knows its entry
    entry = second.source["cache"]
    os.remove(os.path.join(entry, "labels.npy"))
    with pytest.warns(CacheWarning, match="labels.npy"):
        third = load_letor(p)
    np.testing.assert_array_equal(third.labels, first.labels)
    assert os.path.exists(os.path.join(entry, "labels.npy"))


def test_entry_meta_records_checksums(tmp_path):
    arr = np.arange(12, dtype=np.float32).reshape(3, 4)
    cache = ArrayCache(tmp_path, "ns")
    assert cache.store("k", {"a": arr, "s": np.array(["x", "yz"])}, {})
    arrays, meta = cache.load("k")
    assert meta["checksums"]["a"]["shape"] == [3, 4] and meta["checksums"]["a"]["dtype"] == "<f4"
    np.testing.assert_array_equal(arrays["a"], arr)
    np.save(tmp_path / "ns" / "k" / "a.npy", arr.T.copy())  # same bytes count, other shape
    with pytest.warns(CacheWarning, match="shape"):
        assert cache.load("k") is None
    assert cache.load("k", verify=False) is not None
