"""Losses of the neural rankers against hand-computed values and a loop implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ltr_bench.data.queryset import QuerySet
from ltr_bench.losses import (
    hinge_pair_loss,
    ideal_dcg_per_query,
    l2_pair_loss,
    lambdarank_loss,
    listnet_loss,
    logistic_pair_loss,
    ndcg_swap_delta,
    ranks_in_queries,
    weighted_mean,
)
from ltr_bench.metrics import ideal_dcg, ranks_padded


def t(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


def test_weighted_mean() -> None:
    assert weighted_mean(t(1, 2, 3)).item() == pytest.approx(2.0)
    assert weighted_mean(t(1, 2, 3), t(1, 0, 3)).item() == pytest.approx((1 + 9) / 4)
    assert weighted_mean(t(1, 2), t(0, 0)).item() == 0.0  # no weight, no loss (no NaN)


def test_l2_pair_loss_hand_values() -> None:
    r = t(0.5, -1.0, 1.0)
    assert l2_pair_loss(r).item() == pytest.approx((0.25 + 4.0 + 0.0) / 3)
    # ECML Sect. 4.5 (iv): r(d_i) (1 - o1)^2, a weighted mean over the pairs
    labels_hi = torch.tensor([1, 2, 1])
    assert l2_pair_loss(r, labels_hi, label_weighted=True).item() == pytest.approx(
        (0.25 * 1 + 4.0 * 2 + 0.0) / 4
    )
    with pytest.raises(ValueError):
        l2_pair_loss(r, None, label_weighted=True)


def test_logistic_pair_loss_is_ranknet_cross_entropy() -> None:
    # Burges eq. 9 with P = 1: C = -o + log(1 + e^o) = log(1 + e^-o)
    r = t(0.0, 2.0)
    expected = (math.log(2.0) + math.log(1.0 + math.exp(-2.0))) / 2
    assert logistic_pair_loss(r).item() == pytest.approx(expected)
    # P = 1/2: symmetric cost with its minimum log 2 at o = 0 (Burges Sect. 5.1)

    def half(o: float) -> float:
        return logistic_pair_loss(t(o), target_probability=0.5).item()

    assert half(0.0) == pytest.approx(math.log(2.0))
    assert half(1.5) == pytest.approx(half(-1.5)) and half(1.5) > half(0.0)
    # stable for large outputs (no inf/nan)
    assert logistic_pair_loss(t(-1000.0)).item() == pytest.approx(1000.0)
    assert logistic_pair_loss(t(1000.0)).item() == pytest.approx(0.0, abs=1e-12)


def test_hinge_pair_loss_hand_values() -> None:
    r = t(0.5, 2.0, -1.0)
    assert hinge_pair_loss(r).item() == pytest.approx((0.5 + 0.0 + 2.0) / 3)
    assert hinge_pair_loss(r, margin=2.0).item() == pytest.approx((1.5 + 0.0 + 3.0) / 3)
    assert hinge_pair_loss(r, None, t(1, 1, 0)).item() == pytest.approx(0.25)


def test_ndcg_swap_delta_hand_values() -> None:
    # labels 2 and 0 -> gains 3 and 0; ranks 1 and 3 -> discounts 1 and 1/log2(4) = 0.5
    gi, gj, ri, rj, idcg = t(3.0), t(0.0), torch.tensor([1]), torch.tensor([3]), t(4.0)
    assert ndcg_swap_delta(gi, gj, ri, rj, idcg).item() == pytest.approx(3 * 0.5 / 4)
    # NDCG@2: rank 3 is below the cut-off, its discount is 0
    assert ndcg_swap_delta(gi, gj, ri, rj, idcg, k=2).item() == pytest.approx(3 * 1.0 / 4)
    # symmetric in the two documents
    assert ndcg_swap_delta(gj, gi, rj, ri, idcg).item() == pytest.approx(3 * 0.5 / 4)


def test_listnet_loss_hand_value_and_padding() -> None:
    e = math.e
    # query 1: scores [0, ln 2] -> P_s = [1/3, 2/3]; labels [1, 0] -> P_y = [e, 1] / (e + 1)
    q1 = -(e / (e + 1) * math.log(1 / 3) + 1 / (e + 1) * math.log(2 / 3))
    scores = torch.tensor([[0.0, math.log(2.0), 123.0], [5.0, -7.0, 9.0]], dtype=torch.float64)
    labels = torch.tensor([[1, 0, 2], [1, 4, 4]])
    mask = torch.tensor([[True, True, False], [True, False, False]])
    # query 2 has one document: P_y = P_s = 1, loss 0; padded entries play no role
    assert listnet_loss(scores, labels, mask).item() == pytest.approx(q1 / 2)
    assert listnet_loss(scores[:1], labels[:1], mask[:1]).item() == pytest.approx(q1)


def _lambdas_by_loop(s: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Textbook LambdaRank for one query: lambda_i = sum_j |dNDCG_ij| * dC_ij/ds_i."""
    n = len(s)
    order = sorted(range(n), key=lambda i: (-s[i], i))
    rank = np.empty(n)
    rank[order] = np.arange(1, n + 1)
    gain = 2.0**y - 1
    ideal = np.sort(gain)[::-1]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    lam, total = np.zeros(n), 0.0
    for i in range(n):
        for j in range(n):
            if y[i] > y[j]:
                disc_i, disc_j = 1 / math.log2(1 + rank[i]), 1 / math.log2(1 + rank[j])
                d = abs(gain[i] - gain[j]) * abs(disc_i - disc_j) / idcg
                sig = 1.0 / (1.0 + math.exp(s[i] - s[j]))  # -dC/do for C = log(1 + e^-o)
                lam[i] -= d * sig
                lam[j] += d * sig
                total += d
    return lam / total


def test_lambdarank_gradient_equals_lambdas() -> None:
    rng = np.random.default_rng(3)
    s = rng.normal(size=7)
    y = np.array([2, 0, 1, 0, 2, 1, 0])
    scores = torch.tensor(s[None, :], requires_grad=True)
    labels = torch.tensor(y[None, :])
    mask = torch.ones(1, 7, dtype=torch.bool)
    lambdarank_loss(scores, labels, mask).backward()
    np.testing.assert_allclose(scores.grad[0].numpy(), _lambdas_by_loop(s, y), rtol=1e-10)


def test_lambdarank_two_documents_hand_value() -> None:
    # labels [1, 0], tied scores: document order ranks doc 0 first; the only pair's cost is
    # log(1 + e^0) = log 2 and its gradient on s_0 is -1/2 (normalised by its own weight)
    scores = torch.zeros(1, 2, dtype=torch.float64, requires_grad=True)
    loss = lambdarank_loss(scores, torch.tensor([[1, 0]]), torch.ones(1, 2, dtype=torch.bool))
    loss.backward()
    assert loss.item() == pytest.approx(math.log(2.0))
    assert scores.grad[0].tolist() == pytest.approx([-0.5, 0.5])


def test_lambdarank_ignores_padding() -> None:
    s = torch.tensor([[0.3, -0.2, 0.9, 0.0]], dtype=torch.float64)
    y = torch.tensor([[1, 0, 2, 5]])
    full = lambdarank_loss(s[:, :3], y[:, :3], torch.ones(1, 3, dtype=torch.bool))
    padded = lambdarank_loss(s, y, torch.tensor([[True, True, True, False]]))
    assert padded.item() == pytest.approx(full.item())


# ====================================================================== |delta NDCG| weighting
def test_ranks_and_ideal_dcg_match_padded_metrics() -> None:
    rng = np.random.default_rng(0)
    labels = [list(rng.integers(0, 3, size=n)) for n in (5, 1, 9, 4)]
    qid = np.repeat(np.arange(len(labels)), [len(q) for q in labels])
    data = QuerySet.from_arrays(np.zeros((len(qid), 1)), np.concatenate(labels), qid)
    scores = rng.integers(0, 4, size=data.n_docs).astype(np.float64)  # with ties
    s_pad, mask = data.pad(scores)
    y_pad, _ = data.pad(data.labels.astype(np.int64))
    expected = ranks_padded(torch.tensor(s_pad), torch.tensor(mask))[torch.tensor(mask)]
    qidx = torch.as_tensor(data.query_index())
    got = ranks_in_queries(torch.tensor(scores), qidx, torch.as_tensor(data.offsets[:-1]))
    assert torch.equal(got, expected)
    for k in (None, 3):
        np.testing.assert_allclose(
            ideal_dcg_per_query(torch.as_tensor(data.labels), qidx, data.n_queries, k).numpy(),
            ideal_dcg(torch.tensor(y_pad), torch.tensor(mask), k).numpy(),
        )
