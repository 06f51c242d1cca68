"""LambdaRank (Burges et al., "Ranking as function approximation", Sect. 6; journal Sect. 2).

A neural scorer trained on whole queries with lambda-gradients: for every pair of a query with
different labels, RankNet's gradient (Burges eq. 9) scaled by ``|delta NDCG|`` of swapping the two
documents in the current ranking (:func:`ltr_bench.losses.listwise.lambdarank_loss`). The network and the
list batching are ListNet's; only the loss differs, so this is :class:`ListNet` with another
default loss.
"""

from __future__ import annotations

from ltr_bench.models.listnet import ListNet


class LambdaRank(ListNet):
    """ListNet's network and query batches trained with the ``lambda`` loss (NDCG@k via
    ``loss.k``, RankNet's ``sigma`` via ``loss.sigma``)."""

    default_loss = "lambda"
