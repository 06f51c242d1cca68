"""Faults in the data layer: nothing silently wrong, one sentence.

CLI cases run ``ltr_bench.cli.main.main([...])`` in-process and check exit code 2, exactly one error
line naming the file:line or the config key, and no traceback; the cache and file-format cases
call the data layer's functions. All data is tiny and generated.
"""

from __future__ import annotations

import bz2
import gzip
import os
import re
import signal
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ltr_bench.data import cache as cache_mod
from ltr_bench.data import letor
from ltr_bench.data.cache import CacheWarning
from ltr_bench.data.letor import LABEL_MAX, load_letor
from ltr_bench.errors import DataFormatError, UserError
from tests.data.letor_files import random_letor


# --------------------------------------------------------------------------------- helpers
@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("LTR_CACHE_VERIFY", raising=False)


def make_folder(root: Path, n_features: int = 5) -> Path:
    """A LETOR folder Fold1..Fold5/{train,vali,test}.txt of tiny random data."""
    for k in range(1, 6):
        for j, split in enumerate(("train", "vali", "test")):
            random_letor(
                root / f"Fold{k}" / f"{split}.txt",
                n_queries=6,
                n_features=n_features,
                seed=10 * k + j,
                qid_start=1000 * k + 100 * j,
            )
    return root


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """Run ``ltr-bench`` in-process; returns ``(exit code, stderr)``."""
    from ltr_bench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")  # main() sets it; restored afterwards
    monkeypatch.setattr(sys, "argv", ["ltr-bench"])
    term = signal.getsignal(signal.SIGTERM)

    def run(*args: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            main([*args, "threads=1", "tracking=none"])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            signal.signal(signal.SIGTERM, term)
        return code, capsys.readouterr().err

    return run


def one_error_line(err: str) -> str:
    """The single ``ltr-bench: error:`` line of ``err`` (asserting there is exactly one)."""
    assert "Traceback" not in err, err
    lines = [ln for ln in err.splitlines() if ln.startswith("ltr-bench: error:")]
    assert len(lines) == 1, err
    return lines[0]


def letor_run(folder: Path, *extra: str) -> list[str]:
    return ["dataset=letor", f"dataset.path={folder}", "dataset.fold=1", "model=lambdamart", *extra]


# ------------------------------------------------------------- 1. the cache verifies entries
def _zero_features(entry: Path) -> None:
    a = np.load(entry / "features.npy")
    np.save(entry / "features.npy", np.zeros_like(a))


def _reverse_labels(entry: Path) -> None:
    a = np.load(entry / "labels.npy")
    np.save(entry / "labels.npy", a[::-1].copy())


def _empty_labels(entry: Path) -> None:
    (entry / "labels.npy").write_bytes(b"")


def _shift_offsets(entry: Path) -> None:
    a = np.load(entry / "offsets.npy")
    a[-1] += 500
    np.save(entry / "offsets.npy", a)


@pytest.mark.parametrize(
    "tamper",
    [_zero_features, _reverse_labels, _empty_labels, _shift_offsets],
    ids=["zeroed-features", "reversed-labels", "emptied-labels", "offsets+500"],
)
def test_1_tampered_cache_entry_warns_and_is_parsed_again(tmp_path, tamper):
    p = random_letor(tmp_path / "d" / "train.txt", n_queries=8, seed=4)
    fresh = load_letor(p, use_cache=False)
    load_letor(p)  # parse + store
    entry = Path(load_letor(p).source["cache"])  # a verified hit knows its entry
    tamper(entry)
    with pytest.warns(CacheWarning, match=re.escape(str(entry))):
        again = load_letor(p)
    for name in ("features", "labels", "qid", "offsets"):
        np.testing.assert_array_equal(getattr(again, name), getattr(fresh, name))
    # the entry was replaced: the next load is a clean, verified hit (no warning)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        hit = load_letor(p)
    assert isinstance(hit.features, np.memmap)
    np.testing.assert_array_equal(hit.labels, fresh.labels)


def test_1_unverified_load_skips_the_check(tmp_path):
    """verify_cache=False (the benchmark's baseline) hands out the entry as it is."""
    p = random_letor(tmp_path / "d" / "train.txt", seed=5)
    load_letor(p)
    entry = Path(load_letor(p).source["cache"])
    _zero_features(entry)
    assert np.all(np.asarray(load_letor(p, verify_cache=False).features) == 0)


# ------------------------------------------------------------------ 2. labels beyond int32
def test_2_label_beyond_int32_is_rejected_with_file_and_line(tmp_path, cli):
    folder = make_folder(tmp_path / "data")
    train = folder / "Fold1" / "train.txt"
    lines = train.read_text().splitlines(keepends=True)
    lines[4] = "5000000000" + lines[4][1:]
    train.write_text("".join(lines))
    code, err = cli(*letor_run(folder))
    assert code == 2
    line = one_error_line(err)
    assert f"{train}:5:" in line and "5000000000" in line and str(LABEL_MAX) in line
    # the largest label that fits is read exactly
    ok = tmp_path / "ok.txt"
    ok.write_text(f"{LABEL_MAX} qid:1 1:1\n0 qid:1 1:2\n")
    assert load_letor(ok).labels[0] == LABEL_MAX


# ---------------------------------------------------------------- 3. truncated last line
@pytest.mark.parametrize("cut", ["qid", "feature"])
def test_3_truncated_last_line_is_an_error(tmp_path, cli, cut):
    folder = make_folder(tmp_path / "data")
    train = folder / "Fold1" / "train.txt"
    text = train.read_text()
    last = text.splitlines()[-1]
    n_lines = len(text.splitlines())
    cut_line = " ".join(last.split()[:2]) if cut == "qid" else " ".join(last.split()[:4])
    train.write_text(text[: text.rindex(last)] + cut_line)  # no final newline
    code, err = cli(*letor_run(folder))
    assert code == 2
    line = one_error_line(err)
    assert f"{train}:{n_lines}:" in line and "truncated?" in line


def test_3_cut_inside_a_field_and_complete_last_lines(tmp_path):
    p = tmp_path / "a.txt"
    p.write_text("1 qid:1 1:0.5 2:0.25\n0 qid:1 1:0.1 2:")  # cut after the colon
    with pytest.raises(DataFormatError, match=r"truncated\?") as info:
        load_letor(p)
    assert info.value.line == 2
    # a complete last line without a newline, and a short line that ends with one, are fine
    p.write_text("1 qid:1 1:0.5 2:0.25\n0 qid:1 1:0.1 2:0.2")
    assert load_letor(p).n_docs == 2
    p.write_text("1 qid:1 1:0.5 2:0.25\n0 qid:1 1:0.1\n")
    assert load_letor(p).features[1, 1] == 0


# ---------------------------------------------------------------- 8. unreadable data file
def test_8_unreadable_data_file_is_one_sentence(tmp_path, cli, monkeypatch):
    folder = make_folder(tmp_path / "data")
    train = folder / "Fold1" / "train.txt"
    train.chmod(0)
    try:
        readable = os.access(train, os.R_OK)  # root reads anyway: simulate the refusal
        if readable:
            real = cache_mod.sha256_file

            def refuse(path):
                if Path(path).resolve() == train.resolve():
                    raise PermissionError(13, "Permission denied", str(path))
                return real(path)

            monkeypatch.setattr(cache_mod, "sha256_file", refuse)
        code, err = cli(*letor_run(folder))
    finally:
        train.chmod(0o644)
    assert code == 2
    line = one_error_line(err)
    assert str(train) in line and "not readable" in line and "permission" in line


# -------------------------------------------------------------- 9. typed dataset keys
@pytest.mark.parametrize(
    "override,dataset",
    [
        ("dataset.n_features=abc", "letor"),
        ("dataset.relevance_threshold=abc", "letor"),
        ("dataset.n_train=abc", "synthetic"),
    ],
)
def test_9_non_numeric_dataset_key_names_the_key(tmp_path, cli, override, dataset):
    args = letor_run(make_folder(tmp_path / "data")) if dataset == "letor" else ["model=lambdamart"]
    code, err = cli(*args, override)
    assert code == 2
    line = one_error_line(err)
    key = override.split("=")[0]
    assert key in line and "'abc'" in line and "integer" in line


# ----------------------------------------------------------------- 13. wrong or unhelpful words
def test_13_bom_is_accepted_and_stripped(tmp_path):
    p = random_letor(tmp_path / "a.txt", seed=2)
    with_bom = tmp_path / "bom.txt"
    with_bom.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    a, b = load_letor(p), load_letor(with_bom, with_docids=True)
    np.testing.assert_array_equal(a.features, b.features)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert letor.find_first_problem(with_bom) is None


def test_13_compressed_files_are_read_or_named(tmp_path):
    p = random_letor(tmp_path / "a.txt", seed=3)
    plain = load_letor(p)
    gz = tmp_path / "a.txt.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    bz = tmp_path / "a.txt.bz2"
    bz.write_bytes(bz2.compress(p.read_bytes()))
    for packed in (gz, bz):
        qs = load_letor(packed)
        np.testing.assert_array_equal(qs.features, plain.features)
        np.testing.assert_array_equal(qs.qid, plain.qid)
    # a bad line inside a gzip file is located like in a plain one
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(gzip.compress(b"1 qid:1 1:0.5\n0 qid:1 1:abc\n"))
    with pytest.raises(DataFormatError, match="non-numeric") as info:
        load_letor(bad)
    assert info.value.line == 2
    # archives are named, never shown as bytes
    z = tmp_path / "a.zip"
    with zipfile.ZipFile(z, "w") as zf:
        zf.write(p, "a.txt")
    with pytest.raises(UserError, match="zip archive") as info:
        load_letor(z)
    assert "\\x" not in str(info.value) and "PK" not in str(info.value)
    garbage = tmp_path / "g.bin"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(UserError, match="NUL bytes"):
        load_letor(garbage)


def test_13_directory_where_a_file_is_expected(tmp_path, cli):
    with pytest.raises(UserError, match="is a directory"):
        load_letor(tmp_path)
    folder = make_folder(tmp_path / "data")
    vali = folder / "Fold1" / "vali.txt"
    vali.unlink()
    vali.mkdir()
    code, err = cli(*letor_run(folder))
    assert code == 2
    line = one_error_line(err)
    assert str(vali) in line and "is a directory" in line and "does not exist" not in line


def test_13_all_zero_labels_name_the_file(tmp_path, cli):
    folder = make_folder(tmp_path / "data")
    train = folder / "Fold1" / "train.txt"
    train.write_text(re.sub(r"(?m)^\d+ ", "0 ", train.read_text()))
    code, err = cli(*letor_run(folder))
    assert code == 2
    line = one_error_line(err)
    assert str(train) in line and "every label is 0" in line


def test_13_stray_feature_index_blames_the_right_file_and_line(tmp_path, cli):
    folder = make_folder(tmp_path / "data")
    train = folder / "Fold1" / "train.txt"
    lines = train.read_text().splitlines(keepends=True)
    lines[6] = lines[6].rstrip("\n") + " 999:0.5\n"
    train.write_text("".join(lines))
    code, err = cli(*letor_run(folder))
    assert code == 2
    line = one_error_line(err)
    assert f"{train}:7:" in line and "999" in line and "vali.txt" in line
