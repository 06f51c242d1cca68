"""The shared preprocessing cache: a miss computes and stores, a hit reads the same numbers back
memory-mapped, anything else (other data, other options, a tampered entry) recomputes."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ltr_bench.data import transform_cache
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.transform_cache import (
    NAMESPACE,
    cached_preprocessing,
    remembered_preprocessing,
)
from ltr_bench.data.transforms import Preprocessing


def _data(seed: int, n_queries: int = 12) -> QuerySet:
    rng = np.random.default_rng(seed)
    n = n_queries * 8
    return QuerySet.from_arrays(
        rng.normal(size=(n, 5)).astype(np.float32),
        rng.integers(0, 3, n),
        np.repeat(np.arange(n_queries), 8),
        source={"generator": "test", "seed": seed},
    )


CONFIG = {
    "preprocessing": {"feature_transform": "quantile_normal", "n_quantiles": 50},
    "test_role": "test",
}


class Counter:
    """``compute`` for the cache that counts its calls."""

    def __init__(self, train: QuerySet, test: QuerySet, n_quantiles: int = 50) -> None:
        self.train, self.test, self.n_quantiles, self.calls = train, test, n_quantiles, 0

    def __call__(self):
        self.calls += 1
        pre = Preprocessing(n_quantiles=self.n_quantiles, binarize_at=1, binarize_splits=["test"])
        pre.fit(self.train)
        return [pre.apply(self.train, "train"), None, pre.apply(self.test, "test")], pre


def _same(a: QuerySet, b: QuerySet) -> None:
    for name in ("features", "labels", "qid", "offsets"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))


def test_miss_then_hit_returns_the_same_numbers_memory_mapped(tmp_path: Path) -> None:
    train, test = _data(0), _data(1)
    compute = Counter(train, test)
    parts = [("train", train), ("vali", None), ("test", test)]
    (tr, va, te), pre, status = cached_preprocessing(CONFIG, parts, compute, tmp_path)
    assert (status, compute.calls, va) == ("miss", 1, None)
    (tr2, va2, te2), pre2, status2 = cached_preprocessing(CONFIG, parts, compute, tmp_path)
    assert (status2, compute.calls, va2) == ("hit", 1, None)
    _same(tr, tr2)
    _same(te, te2)
    assert isinstance(tr2.features, np.memmap) and tr2.features.mode == "c"  # copy-on-write map
    assert te2.source == te.source and set(te2.labels.tolist()) <= {0, 1}
    # The fitted preprocessing comes back too (a refit's saved model needs it): same numbers on new data.
    other = _data(2)
    _same(pre.apply(other, "vali"), pre2.apply(other, "vali"))
    assert pre2.describe() == pre.describe()
    # A copy of the same data (another worker, another trial) hits the same entry.
    copy = QuerySet(
        train.features.copy(), train.labels.copy(), train.qid.copy(), train.offsets.copy()
    )
    assert (
        cached_preprocessing(
            CONFIG, [("train", copy), ("vali", None), ("test", test)], compute, tmp_path
        )[2]
        == "hit"
    )


def test_an_entry_is_data_never_a_pickle(tmp_path: Path) -> None:
    """The fitted preprocessing is stored as JSON options plus arrays: every file of an entry
    loads with ``allow_pickle=False``, so a planted entry can never run code."""
    train, test = _data(0), _data(1)
    cached_preprocessing(
        CONFIG, [("train", train), ("vali", None), ("test", test)], Counter(train, test), tmp_path
    )
    (entry,) = (tmp_path / NAMESPACE).iterdir()
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["preprocessing"]["options"]["n_quantiles"] == 50
    for npy in entry.glob("*.npy"):
        assert np.load(npy, allow_pickle=False).dtype.kind != "O"
    assert (entry / "preprocessing.quantiles.npy").is_file()


@pytest.mark.parametrize("transform", ["quantile_normal", "standard", "per_query", "none"])
def test_preprocessing_state_round_trip_is_bit_exact(transform: str) -> None:
    train, other = _data(0), _data(3)
    pre = Preprocessing(feature_transform=transform, n_quantiles=30, binarize_at=2, min_docs=2).fit(
        train
    )
    options, arrays = pre.state()
    json.dumps(options)  # plain JSON data
    back = Preprocessing.from_state(json.loads(json.dumps(options)), arrays)
    for split in ("train", "vali", "test"):
        _same(pre.apply(other, split), back.apply(other, split))
    assert back.describe() == pre.describe()


def test_a_restored_quantile_transform_builds_its_maps_only_when_applied(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cache hit restores the fitted preprocessing beside data that is preprocessed already;
    a search trial never applies it, so it must not pay for the per-feature maps."""
    from ltr_bench.data.transforms import quantile

    built: list[int] = []
    real = quantile._ColumnMap.__init__

    def counting(self: Any, *args: Any) -> None:
        built.append(1)
        real(self, *args)

    pre = Preprocessing(feature_transform="quantile_normal", n_quantiles=30).fit(_data(0))
    options, arrays = pre.state()
    monkeypatch.setattr(quantile._ColumnMap, "__init__", counting)
    back = Preprocessing.from_state(options, arrays)
    assert built == []
    _same(pre.apply(_data(3), "test"), back.apply(_data(3), "test"))
    assert len(built) == 2 * _data(0).n_features  # the fitted one's maps, then the restored one's


def test_other_data_or_options_miss(tmp_path: Path) -> None:
    train, test = _data(0), _data(1)
    compute = Counter(train, test)
    cached_preprocessing(
        CONFIG, [("train", train), ("vali", None), ("test", test)], compute, tmp_path
    )
    changed = QuerySet(train.features.copy(), train.labels.copy(), train.qid, train.offsets)
    changed.features[0, 0] += 1.0
    assert (
        cached_preprocessing(
            CONFIG, [("train", changed), ("vali", None), ("test", test)], compute, tmp_path
        )[2]
        == "miss"
    )
    other_cfg = {**CONFIG, "preprocessing": {**CONFIG["preprocessing"], "n_quantiles": 20}}
    assert (
        cached_preprocessing(
            other_cfg, [("train", train), ("vali", None), ("test", test)], compute, tmp_path
        )[2]
        == "miss"
    )
    # the same input in another slot (e.g. vali instead of test) is another entry
    assert (
        cached_preprocessing(
            CONFIG, [("train", train), ("vali", test), ("test", None)], compute, tmp_path
        )[2]
        == "miss"
    )
    assert compute.calls == 4
    assert len(list((tmp_path / NAMESPACE).iterdir())) == 4


@pytest.mark.parametrize("damage", ["flip a feature", "truncate", "checksum"])
def test_a_tampered_entry_warns_and_is_recomputed(tmp_path: Path, damage: str) -> None:
    train, test = _data(0), _data(1)
    compute = Counter(train, test)
    parts = [("train", train), ("vali", None), ("test", test)]
    (tr, _, _), _, _ = cached_preprocessing(CONFIG, parts, compute, tmp_path)
    (entry,) = (tmp_path / NAMESPACE).iterdir()
    target = entry / "train.features.npy"
    if damage == "flip a feature":
        raw = bytearray(target.read_bytes())
        raw[-3] ^= 0xFF
        target.write_bytes(bytes(raw))
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:-40])
    else:
        meta = json.loads((entry / "meta.json").read_text())
        meta["sha256"]["test.labels"] = "0" * 64
        (entry / "meta.json").write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="preprocessing cache entry .* recomputing"):
        (tr2, _, _), _, status = cached_preprocessing(CONFIG, parts, compute, tmp_path)
    assert (status, compute.calls) == ("miss", 2)
    _same(tr, tr2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the rewritten entry verifies again
        assert cached_preprocessing(CONFIG, parts, compute, tmp_path)[2] == "hit"


def test_switched_off_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    train, test = _data(0), _data(1)
    compute = Counter(train, test)
    parts = [("train", train), ("vali", None), ("test", test)]
    monkeypatch.setenv("LTR_TRANSFORM_CACHE", "off")
    assert cached_preprocessing(CONFIG, parts, compute, tmp_path)[2] == "off"
    assert cached_preprocessing(CONFIG, parts, compute, tmp_path)[2] == "off"
    assert compute.calls == 2 and not (tmp_path / NAMESPACE).exists()


@pytest.fixture
def empty_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transform_cache, "_remembered", type(transform_cache._remembered)())


def test_data_without_a_cache_folder_is_preprocessed_once_per_process(empty_memory: None) -> None:
    """Generated data: a later trial of the same worker gets the first trial's numbers, computed
    once, and its own copies of them."""
    train, test = _data(0), _data(1)
    compute = Counter(train, test)
    parts = [("train", train), ("vali", None), ("test", test)]
    (tr, va, te), pre, status = remembered_preprocessing(CONFIG, parts, compute)
    assert (status, compute.calls, va) == ("miss", 1, None)
    expected = QuerySet(tr.features.copy(), tr.labels.copy(), tr.qid.copy(), tr.offsets.copy())
    tr.features[:] = 0.0  # the first caller writes into its arrays ...
    (tr2, _, te2), pre2, status2 = remembered_preprocessing(CONFIG, parts, compute)
    assert (status2, compute.calls) == ("hit", 1)
    _same(tr2, expected)  # ... which the entry does not see
    _same(te2, te)
    assert tr2.features is not remembered_preprocessing(CONFIG, parts, compute)[0][0].features
    other = _data(2)
    _same(pre.apply(other, "vali"), pre2.apply(other, "vali"))
    assert pre2 is not pre and te2.source == te.source


def test_the_process_keeps_its_most_recent_entries_and_none_switched_off(
    empty_memory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    computes = [Counter(_data(seed), _data(99)) for seed in range(3)]
    parts = [[("train", c.train), ("vali", None), ("test", c.test)] for c in computes]
    entry_bytes = sum(  # the preprocessed train and test parts of one entry
        a.nbytes
        for q in computes[0]()[0]
        if q is not None
        for a in (q.features, q.labels, q.qid, q.offsets)
    )
    computes[0].calls = 0
    monkeypatch.setattr(transform_cache, "MEMORY_BYTES", 2 * entry_bytes)  # room for two
    for p, c in zip(parts, computes):
        assert remembered_preprocessing(CONFIG, p, c)[2] == "miss"
    assert remembered_preprocessing(CONFIG, parts[2], computes[2])[2] == "hit"
    assert remembered_preprocessing(CONFIG, parts[0], computes[0])[2] == "miss"  # the oldest left
    assert [c.calls for c in computes] == [2, 1, 1]
    monkeypatch.setenv("LTR_TRANSFORM_CACHE", "off")
    assert remembered_preprocessing(CONFIG, parts[0], computes[0])[2] == "off"
    monkeypatch.delenv("LTR_TRANSFORM_CACHE")
    monkeypatch.setattr(transform_cache, "MEMORY_BYTES", 100)  # larger inputs: computed each time
    assert remembered_preprocessing(CONFIG, parts[1], computes[1])[2] == "off"
    assert computes[0].calls == 3 and computes[1].calls == 2


def test_a_second_inner_cv_run_on_generated_data_refits_no_preprocessing(
    tmp_path: Path, empty_memory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a sweep worker's later trials: the same inner folds of the same generated data, so the
    same fold metrics, with the quantile transform fitted only by the first run."""
    from tests.inprocess import run_ltr_bench

    fits: list[int] = []
    fit = Preprocessing.fit
    monkeypatch.setattr(Preprocessing, "fit", lambda self, data: fits.append(1) or fit(self, data))
    args = ("protocol.objective=inner_cv", "protocol.inner_cv=3", "dataset.n_train=300")
    args += ("model.epochs=1", "tracking=none", "trainer.enable_progress_bar=false")
    folds = []
    for run in ("first", "second"):
        result = run_ltr_bench(*args, f"hydra.run.dir={tmp_path / run}", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        folds.append(json.loads((tmp_path / run / "results.json").read_text())["folds"])
        assert len(fits) == 3  # one per inner fold, all in the first run
    assert [f["metrics"] for f in folds[0]] == [f["metrics"] for f in folds[1]]
