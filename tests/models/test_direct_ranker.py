"""DirectRanker (and its RankNet / RankSVM configs): Theorem 1's properties, config checks,
learning on generated data, early stopping, seeding and Lightning plumbing."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.errors import UserError
from ltr_bench.metrics import evaluate
from ltr_bench.models import DirectRanker
from ltr_bench.models.neural import staircase_factor
from tests.models.neural_toy import TINY, ndcg10, random_ndcg10, toy_splits

ANTISYMMETRIC_TAUS = ["tanh", "linear", "sigmoid2", "softsign"]


@pytest.fixture(scope="module")
def splits():
    return toy_splits()


def untrained(tau: str, seed: int, scale: float, hidden=(7, 5), activation="tanh", n_features=6):
    """A DirectRanker with random weights (no training): builds its module directly."""
    ranker = DirectRanker(hidden_sizes=list(hidden), activation=activation, output_activation=tau)
    torch.manual_seed(seed)
    scorer = ranker.build_scorer(n_features)
    with torch.no_grad():
        for p in scorer.parameters():
            p.normal_(0.0, scale)
    splits_ = toy_splits(n_train=3)
    ranker.module_ = ranker.build_module(
        scorer,
        splits_[0].with_features(np.zeros((splits_[0].n_docs, n_features), np.float32)),
        None,
    )
    return ranker


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    scale=st.floats(0.05, 3.0),
    tau=st.sampled_from(ANTISYMMETRIC_TAUS),
    activation=st.sampled_from(["tanh", "sigmoid", "relu", "linear"]),
)
def test_ranking_function_properties(seed: int, scale: float, tau: str, activation: str) -> None:
    """Theorem 1: r(x,y) = -r(y,x), r(x,x) = 0, transitivity; sorting by g == sorting by r."""
    ranker = untrained(tau, seed, scale, activation=activation)
    rng = np.random.default_rng(seed)
    x, y, z = (rng.normal(scale=2.0, size=(64, 6)).astype(np.float32) for _ in range(3))
    rxy, ryx = ranker.compare(x, y), ranker.compare(y, x)
    np.testing.assert_allclose(rxy, -ryx, atol=1e-6)  # (II) antisymmetry
    np.testing.assert_allclose(ranker.compare(x, x), 0.0, atol=1e-7)  # (I) reflexivity
    ryz, rxz = ranker.compare(y, z), ranker.compare(x, z)
    premise = (rxy >= 0) & (ryz >= 0)
    assert np.all(rxz[premise] >= -1e-6)  # (III) transitivity
    # sorting by one forward pass per document equals sorting by pairwise comparisons
    docs = x[:20]
    scores = ranker.score(docs)
    r = ranker.compare(np.repeat(docs, 20, axis=0), np.tile(docs, (20, 1))).reshape(20, 20)
    by_score = np.argsort(-scores, kind="stable")
    assert np.all(r[by_score[:-1], by_score[1:]] >= -1e-6)  # each document beats the next
    wins = (r > 1e-6).sum(axis=1)
    distinct = np.diff(np.sort(scores)).min() > 1e-4
    if distinct:
        np.testing.assert_array_equal(np.argsort(-wins, kind="stable"), by_score)


def test_compare_one_pair_returns_a_scalar() -> None:
    ranker = untrained("tanh", 0, 1.0)
    v = ranker.compare(np.ones(6, np.float32), np.zeros(6, np.float32))
    assert np.ndim(v) == 0 and -1.0 < float(v) < 1.0


@pytest.mark.parametrize(
    "kwargs, key",
    [
        (dict(output_activation="relu"), "model.output_activation"),
        (dict(output_activation="sigmoid"), "model.output_activation"),
        (dict(output_bias=True), "model.output_bias"),
        (dict(loss="listnet"), "loss"),
        (dict(loss={"name": "l2", "margin": 1.0}), "loss.margin"),
        (dict(pairs="some"), "model.pairs"),
        (dict(pair_weighting="ndcg"), "model.pair_weighting"),
        (dict(pairs_per_epoch=0), "model.pairs_per_epoch"),
        (dict(activation="none"), "activation"),
        (dict(activation="swish"), "model.activation"),
        (dict(dropout=1.0), "model.dropout"),
        (dict(lr_decay_to=2.0), "model.lr_decay_to"),
    ],
)
def test_bad_config_is_one_clear_error(kwargs: dict, key: str) -> None:
    with pytest.raises(UserError, match=key.replace(".", r"\.")):
        DirectRanker(**kwargs)


def test_bad_optimizer_parameter_is_a_user_error() -> None:
    """Refused where the ranker parses its config, not inside fit."""
    with pytest.raises(UserError, match=r"^optimizer.momentum is not a parameter of the 'adam'"):
        DirectRanker(**TINY, optimizer={"name": "adam", "momentum": 0.9})


def test_no_pairs_is_a_user_error(splits) -> None:
    train = splits[0]
    flat = train.with_labels(np.zeros(train.n_docs))
    with pytest.raises(UserError, match="no query with two different labels"):
        DirectRanker(**TINY).fit(flat)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(),  # the papers' L2 cost, tanh output, all different-label pairs
        dict(pairs="neighbours", loss={"name": "l2", "label_weighted": True}),  # ECML Sect. 4.5
        dict(pair_weighting="ndcg_swap", rank_refresh_steps=5),  # beyond the papers
        dict(loss="logistic", output_activation="linear", optimizer={"name": "sgd", "lr": 0.1}),
    ],
    ids=["default", "neighbours-label-weighted", "ndcg-swap", "ranknet"],
)
def test_learns(splits, kwargs: dict) -> None:
    train, vali, test = splits
    ranker = DirectRanker(**{**TINY, **kwargs}, batch_size=64, seed=0).fit(train, vali)
    baseline = random_ndcg10(test)
    assert ndcg10(ranker.score(test), test) > baseline + 0.25
    assert ranker.history and ranker.history[0]["train_loss"] > ranker.history[-1]["train_loss"]


def test_same_seed_same_scores_other_seed_other_scores(splits) -> None:
    train, vali, test = splits
    kw = dict(TINY, epochs=3, dropout=0.2, batch_size=64)
    a = DirectRanker(**kw, seed=5).fit(train, vali).score(test)
    b = DirectRanker(**kw, seed=5).fit(train, vali).score(test)
    c = DirectRanker(**kw, seed=6).fit(train, vali).score(test)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)


def test_early_stopping_restores_the_best_epoch(splits, tmp_path: Path, monkeypatch) -> None:
    """Stops after `patience` epochs without improvement and ends with the best vali weights;
    logs through the given Lightning logger and writes nothing into the working directory."""
    from lightning.pytorch.loggers import CSVLogger

    monkeypatch.chdir(tmp_path)
    train, vali, _ = splits
    logger = CSVLogger(str(tmp_path / "logs"), name="run")
    ranker = DirectRanker(
        **dict(TINY, epochs=40, early_stopping_patience=2),
        optimizer={"name": "adam", "lr": 0.05},
        batch_size=64,
    ).fit(train, vali, logger=logger)
    curve = [h["vali_ndcg@10"] for h in ranker.history]
    best = int(np.argmax(curve))
    assert ranker.best_epoch_ == best
    assert len(curve) == best + 3 < 40  # stopped 2 epochs after the best one
    final = evaluate(ranker.score(vali), vali, names=("ndcg@10",)).means["ndcg@10"]
    assert final == pytest.approx(curve[best], abs=1e-6)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["logs"]
    rows = list(csv.DictReader(open(next((tmp_path / "logs").rglob("metrics.csv")))))
    # the ranker logs under its history's names; the tracker maps them to MLflow keys
    logged = [float(r["vali_ndcg@10"]) for r in rows if r.get("vali_ndcg@10")]
    assert logged == pytest.approx(curve, abs=1e-6)
    assert any(r.get("train_loss") for r in rows) and any(r.get("lr") for r in rows)


def test_staircase_learning_rate() -> None:
    assert [staircase_factor(e, 4, 1e-3) for e in range(4)] == pytest.approx(
        [1.0, 0.1, 0.01, 0.001]
    )
    f = [staircase_factor(e, 5, 1e-2, every=2) for e in range(5)]
    assert f == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01])
    assert staircase_factor(3, 10, None) == 1.0


def test_fit_follows_the_staircase(splits) -> None:
    train, _, _ = splits
    ranker = DirectRanker(**dict(TINY, epochs=3), lr_decay_to=0.01, batch_size=256).fit(train)
    lrs = [h["lr"] for h in ranker.history]
    assert lrs == pytest.approx([4e-3, 4e-4, 4e-5])
    assert ranker.best_epoch_ is None and "vali_ndcg@10" not in ranker.history[0]


def test_score_handles_feature_mismatch(splits) -> None:
    train, _, _ = splits
    ranker = DirectRanker(**dict(TINY, epochs=1), batch_size=256).fit(train)
    with pytest.raises(UserError, match="features"):
        ranker.score(np.zeros((3, train.n_features + 1), np.float32))
    assert math.isfinite(float(ranker.score(train).sum()))
