"""Dataset objects and their configs: LETOR folds, synthetic data, errors naming config keys."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from ltr_bench.data.datasets import (
    FoldData,
    LetorFolds,
    SyntheticDataset,
    default_data_root,
    resolve_data_root,
)
from ltr_bench.data.transforms import Preprocessing
from ltr_bench.errors import DataFormatError, UserError

from .letor_files import random_letor

REPO = Path(__file__).resolve().parents[2]


def _letor_tree(root: Path, name="FAKE", n_features=4) -> Path:
    """Five parts S1..S5 (10 queries each) rotated into Fold1..5 like LETOR 4.0."""
    parts = [
        random_letor(
            root / "parts" / f"S{s}.txt",
            n_queries=10,
            n_features=n_features,
            seed=s,
            qid_start=100 * s,
        )
        for s in range(1, 6)
    ]
    for k in range(1, 6):
        order = [(k - 1 + j) % 5 for j in range(5)]  # train: 3 parts, vali, test
        fold = root / name / f"Fold{k}"
        fold.mkdir(parents=True)
        (fold / "train.txt").write_text("".join(parts[i].read_text() for i in order[:3]))
        shutil.copy(parts[order[3]], fold / "vali.txt")
        shutil.copy(parts[order[4]], fold / "test.txt")
    return root


def test_letor_folds_interface(tmp_path):
    root = _letor_tree(tmp_path)
    ds = LetorFolds(root=root, folder="FAKE", n_features=4, relevance_threshold=1, name="fake")
    assert ds.n_folds == 5 and ds.fold_numbers == (1, 2, 3, 4, 5)
    f = ds.load_fold(0)
    assert isinstance(f, FoldData) and f.name == "fake/Fold1"
    assert (f.train.n_queries, f.vali.n_queries, f.test.n_queries) == (30, 10, 10)
    ids = [set(q.query_ids) for q in (f.train, f.vali, f.test)]
    assert ids[0].isdisjoint(ids[1] | ids[2]) and ids[1].isdisjoint(ids[2])
    assert f.describe()["test"]["sha256"] == f.test.source["sha256"]
    everything = ds.load_all()
    assert everything.n_queries == 50 and len(np.unique(everything.query_ids)) == 50
    assert ds.describe()["folds"] == [1, 2, 3, 4, 5]


def test_fold_numbers_are_one_based(tmp_path):
    root = _letor_tree(tmp_path)
    ds = LetorFolds(root=root, folder="FAKE", fold=3)
    assert ds.n_folds == 1 and ds.fold_numbers == (3,)
    f = ds.load_fold(0)
    assert f.name.endswith("Fold3")
    assert f.test.source["path"].endswith("Fold3/test.txt")
    assert LetorFolds(root=root, folder="FAKE", fold=[2, 5]).fold_numbers == (2, 5)
    with pytest.raises(UserError, match="dataset.fold"):
        LetorFolds(root=root, folder="FAKE", fold=0)
    with pytest.raises(IndexError):
        ds.load_fold(1)


def test_path_overrides_root(tmp_path):
    root = _letor_tree(tmp_path)
    ds = LetorFolds(path=root / "FAKE", folder=None, fold=1)
    assert ds.load_fold(0).train.n_queries == 30


def test_missing_data_names_config_key_and_env(tmp_path):
    with pytest.raises(UserError) as info:
        LetorFolds(root=tmp_path, folder="MQ2008")
    assert "dataset.root" in str(info.value) and "LTR_DATA" in str(info.value)
    with pytest.raises(UserError) as info:
        LetorFolds(path=tmp_path / "nowhere")
    assert "dataset.path" in str(info.value) and "LTR_DATA" in str(info.value)
    with pytest.raises(UserError, match="dataset.path"):
        LetorFolds(path=None, folder=None)
    (tmp_path / "X" / "Fold1").mkdir(parents=True)
    with pytest.raises(UserError, match="train.txt"):
        LetorFolds(root=tmp_path, folder="X", fold=1)


def test_fold_with_different_feature_counts_is_an_error(tmp_path):
    root = _letor_tree(tmp_path)
    random_letor(root / "FAKE" / "Fold1" / "test.txt", n_features=3)
    with pytest.raises(DataFormatError, match="features"):
        LetorFolds(root=root, folder="FAKE", fold=1).load_fold(0)


def test_data_root_resolution(monkeypatch, tmp_path):
    monkeypatch.setenv("LTR_DATA", str(tmp_path))
    assert resolve_data_root(None) == tmp_path
    assert resolve_data_root(tmp_path / "x") == tmp_path / "x"
    monkeypatch.delenv("LTR_DATA")
    assert resolve_data_root(None) == default_data_root() == REPO.parent / "shared/data/letor"


def test_synthetic_dataset_interface():
    ds = SyntheticDataset(n_train=300, n_vali=100, n_test=200, n_features=5, n_folds=2)
    f0, f0b, f1 = ds.load_fold(0), ds.load_fold(0), ds.load_fold(1)
    assert (f0.train.n_docs, f0.vali.n_docs, f0.test.n_docs) == (300, 100, 200)
    assert f0.train.fingerprint() == f0b.train.fingerprint() != f1.train.fingerprint()
    assert ds.load_all().n_docs == 600
    assert ds.describe()["n_folds"] == 2 and ds.relevance_threshold == 2
    with pytest.raises(UserError, match="dataset.relevance_threshold"):
        SyntheticDataset(n_classes=2, relevance_threshold=2)


# ------------------------------------------------------------------------ the YAML configs
@pytest.fixture
def conf_dir(tmp_path):
    """conf/dataset and conf/eval of the repo under a minimal top-level config."""
    d = tmp_path / "conf"
    for group in ("dataset", "eval"):
        shutil.copytree(REPO / "conf" / group, d / group)
    (d / "config.yaml").write_text(
        yaml.safe_dump({"defaults": [{"dataset": "synthetic"}, {"eval": "paper"}, "_self_"]})
    )
    return d


def _compose(conf_dir, overrides):
    with initialize_config_dir(config_dir=str(conf_dir), version_base="1.3"):
        return compose(config_name="config", overrides=overrides)


def test_every_dataset_config_has_name_and_threshold(conf_dir):
    expected = {
        "synthetic": 2,
        "mq2007": 1,
        "mq2008": 1,
        "mslr_web10k": 2,
        "mslr_web30k": 2,
        "letor": 1,
    }
    files = {p.stem for p in (REPO / "conf" / "dataset").glob("*.yaml")}
    assert files == set(expected)
    for name, threshold in expected.items():
        raw = yaml.safe_load((REPO / "conf" / "dataset" / f"{name}.yaml").read_text())
        assert raw["name"] == name and raw["relevance_threshold"] == threshold
        assert raw["_target_"].startswith("ltr_bench.data.datasets.")


def test_default_synthetic_config_runs_end_to_end(conf_dir):
    cfg = _compose(conf_dir, [])
    ds = instantiate(cfg.dataset)
    prep: Preprocessing = instantiate(cfg.eval.preprocessing)
    f = ds.load_fold(0)
    prep.fit(f.train)
    test = prep.apply(f.test, "test")
    assert set(np.unique(test.labels)) == {0, 1}
    assert prep.binarize_at == 2 and cfg.eval.metrics.relevance_threshold == 1
    assert list(cfg.eval.metrics.names) == ["ndcg@1", "ndcg@3", "ndcg@5", "ndcg@10", "map", "mrr"]
    assert abs(float(test.features.std()) - 1 / 3) < 0.03


def test_graded_config_keeps_labels(conf_dir):
    cfg = _compose(conf_dir, ["eval=graded", "dataset.n_train=300"])
    prep = instantiate(cfg.eval.preprocessing)
    f = instantiate(cfg.dataset).load_fold(0)
    test = prep.fit(f.train).apply(f.test, "test")
    assert test.labels.max() == 4 and prep.binarize_at is None
    assert cfg.eval.metrics.relevance_threshold == 2 == prep.relevance_threshold


def test_letor_config_missing_data_is_one_sentence(conf_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_DATA", str(tmp_path / "empty"))
    cfg = _compose(conf_dir, ["dataset=mslr_web10k"])
    assert cfg.dataset.root == str(tmp_path / "empty")
    # Hydra wraps errors raised in a target; the UserError is the exception's __cause__
    with pytest.raises(Exception) as info:
        instantiate(cfg.dataset)
    cause = info.value if isinstance(info.value, UserError) else info.value.__cause__
    assert isinstance(cause, UserError)
    assert "dataset.root" in str(cause) and "LTR_DATA" in str(cause)
    cfg = _compose(conf_dir, ["dataset=letor"])
    with pytest.raises(Exception) as info:
        instantiate(cfg.dataset)
    cause = info.value if isinstance(info.value, UserError) else info.value.__cause__
    assert isinstance(cause, UserError) and "dataset.path" in str(cause)


@pytest.mark.realdata
def test_mq2008_config_with_default_root(conf_dir, real_root, tmp_path, monkeypatch):
    monkeypatch.setenv("LTR_DATA", str(real_root))
    cfg = _compose(conf_dir, ["dataset=mq2008", "dataset.fold=1", f"dataset.cache_dir={tmp_path}"])
    ds = instantiate(cfg.dataset)
    f = ds.load_fold(0)
    assert (f.train.n_docs, f.train.n_queries, f.train.n_features) == (9630, 471, 46)
    assert (f.vali.n_docs, f.test.n_docs) == (2707, 2874)
    prep = instantiate(cfg.eval.preprocessing).fit(f.train)
    test = prep.apply(f.test, "test")
    assert test.n_queries < f.test.n_queries  # queries without relevant documents dropped
    assert set(np.unique(test.labels)) == {0, 1}
    everything = ds.load_all()
    assert (everything.n_queries, everything.n_docs) == (784, 15211)


def test_authors_config_keeps_queries_without_relevant_documents_and_drops_short_ones(
    conf_dir, tmp_path
):
    """eval=authors (the authors' scripts): a test query without a relevant document counts 0 in the
    mean, a query with fewer than 10 documents is dropped; eval=paper does the opposite."""
    from ltr_bench.data.letor import load_letor
    from ltr_bench.metrics import evaluate

    from .letor_files import write_letor

    # q1: 12 docs, one relevant; q2: 12 docs, none relevant; q3: 5 docs, one relevant
    qids = np.repeat([1, 2, 3], [12, 12, 5])
    labels = np.zeros(len(qids), dtype=int)
    labels[[0, 24]] = 2
    feats = np.round(np.random.default_rng(0).uniform(size=(len(qids), 3)), 4)
    data = load_letor(
        write_letor(tmp_path / "test.txt", labels, qids, feats), 3, cache_dir=tmp_path / "cache"
    )
    scores = -np.arange(len(qids), dtype=float)  # ranks each query's first document first: NDCG 1
    kept = {}
    for name in ("paper", "authors"):
        cfg = _compose(conf_dir, [f"eval={name}", "dataset=letor", "dataset.relevance_threshold=1"])
        test = instantiate(cfg.eval.preprocessing).fit(data).apply(data, "test")
        kept[name] = sorted(np.unique(test.query_ids).tolist())
        m = cfg.eval.metrics
        s = scores[np.isin(data.qid, test.query_ids)]
        kept[name + " ndcg@10"] = evaluate(
            s,
            test,
            names=["ndcg@10"],
            relevance_threshold=m.relevance_threshold,
            no_relevant=m.no_relevant,
        ).means["ndcg@10"]
    assert kept["paper"] == [1, 3] and kept["paper ndcg@10"] == pytest.approx(1.0)
    assert kept["authors"] == [1, 2] and kept["authors ndcg@10"] == pytest.approx(0.5)
