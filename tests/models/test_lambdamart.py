"""LambdaMART (LightGBM lambdarank): learns, stops early, is deterministic, checks labels."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.metrics import evaluate
from ltr_bench.models import LambdaMART
from tests.models.neural_toy import linear_queries


def toy_queries(n_queries: int, seed: int, grades: int = 3) -> QuerySet:
    """``grades`` relevance grades cut between the 60 % and 95 % quantiles of the latent score."""
    return linear_queries(n_queries, seed, cuts=np.linspace(0.6, 0.95, grades - 1))


@pytest.fixture(scope="module")
def splits() -> tuple[QuerySet, QuerySet, QuerySet]:
    return toy_queries(60, 0), toy_queries(30, 1), toy_queries(40, 2)


def ndcg10(scores: np.ndarray, data: QuerySet) -> float:
    return evaluate(scores, data, names=("ndcg@10",)).means["ndcg@10"]


def test_learns_well_above_random(splits):
    train, vali, test = splits
    model = LambdaMART(n_estimators=50, seed=0).fit(train, vali)
    random = ndcg10(np.random.default_rng(0).random(test.n_docs), test)
    learned = ndcg10(model.score(test), test)
    assert learned > random + 0.25, (learned, random)
    assert learned > 0.8


def test_early_stopping_stops_and_is_deterministic(splits):
    train, vali, test = splits
    kwargs = dict(
        n_estimators=400,
        learning_rate=0.3,
        num_leaves=31,
        max_depth=-1,
        early_stopping_rounds=5,
        seed=3,
    )
    a = LambdaMART(**kwargs).fit(train, vali)
    b = LambdaMART(**kwargs).fit(train, vali)
    assert a.best_iteration_ is not None and a.n_trees_ < 400
    # LightGBM grows `early_stopping_rounds` trees past the best one, then stops.
    assert len(a.history) == a.best_iteration_ + 5
    curve = [rec["vali_ndcg@10"] for rec in a.history]
    assert curve[a.best_iteration_ - 1] == max(curve)
    assert np.array_equal(a.score(test), b.score(test))
    assert a.history == b.history


def test_without_vali_grows_all_trees(splits):
    train, _, test = splits
    model = LambdaMART(n_estimators=7, seed=0).fit(train)
    assert model.n_trees_ == 7
    assert [rec["round"] for rec in model.history] == list(range(1, 8))
    assert set(model.history[0]) == {"round", "train_ndcg@10"}
    assert model.score(test).shape == (test.n_docs,)


def test_graded_labels_up_to_four_and_bad_labels():
    data = toy_queries(20, 5, grades=5)
    assert data.labels.max() == 4
    model = LambdaMART(n_estimators=5, seed=0).fit(data)
    assert np.isfinite(model.score(data)).all()
    with pytest.raises(UserError, match="labels"):
        LambdaMART(n_estimators=5).fit(data.with_labels(data.labels - 1))
    with pytest.raises(UserError, match="n_estimators"):
        LambdaMART(n_estimators=0)
