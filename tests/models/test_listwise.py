"""ListNet and LambdaRank: loss checks and query batching inside the module."""

from __future__ import annotations

import pytest

from ltr_bench.errors import UserError
from ltr_bench.models import DirectRanker, LambdaRank, ListNet
from tests.models.neural_toy import TINY, ndcg10, random_ndcg10, toy_splits


def test_list_models_reject_pair_losses_and_vice_versa() -> None:
    with pytest.raises(
        UserError,
        match=r"loss=l2 is a pair loss, .*; choose a list loss, one of \[approx_ndcg, lambda, "
        r"lambdaloss, listmle, listnet, neural_ndcg\]",
    ):
        ListNet(loss="l2")
    with pytest.raises(
        UserError,
        match=r"loss=lambda is a list loss, .*; choose a pair loss, one of \[hinge, l2, logistic\]",
    ):
        DirectRanker(loss="lambda")
    assert LambdaRank().loss == "lambda" and ListNet().loss == "listnet"


def test_lambda_batches_bound_pair_tensors() -> None:
    train, vali, test = toy_splits(n_train=30)
    ranker = LambdaRank(**TINY, batch_size=64, max_batch_cells=2000, seed=0)
    module = ranker.build_module(ranker.build_scorer(train.n_features), train, vali)
    for batch in module.train_batches(0, 1):  # queries of <= 40 docs: B x L^2 <= 2000 or B = 1
        b, width = batch.rows.shape
        assert b == 1 or b * width**2 <= 2000
    ranker.fit(train, vali)
    assert ndcg10(ranker.score(test), test) > random_ndcg10(test) + 0.2


def test_listnet_with_lambda_loss_config_node() -> None:
    train, vali, test = toy_splits(n_train=40)
    ranker = ListNet(**TINY, loss={"name": "lambda", "k": 10, "sigma": 2.0}, batch_size=4).fit(
        train, vali
    )
    assert ndcg10(ranker.score(test), test) > random_ndcg10(test) + 0.2
