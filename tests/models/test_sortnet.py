"""SortNet: CmpNN symmetry and weight sharing, vectorised ranking vs brute force, learning."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.metrics import evaluate
from ltr_bench.models import SortNet
from ltr_bench.models.sortnet import CmpNN
from tests.models.neural_toy import linear_queries


def random_net(n_features: int, n_hidden: int, activation: str, seed: int, scale: float) -> CmpNN:
    torch.manual_seed(seed)
    net = CmpNN(n_features, n_hidden, activation)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0.0, scale)
    return net


@settings(max_examples=60, deadline=None)
@given(
    n_features=st.integers(1, 6),
    pairs=st.integers(1, 6),
    activation=st.sampled_from(["sigmoid", "tanh", "relu"]),
    seed=st.integers(0, 2**16),
    scale=st.floats(0.1, 3.0),
)
def test_symmetry_holds_for_random_weights(n_features, pairs, activation, seed, scale):
    net = random_net(n_features, 2 * pairs, activation, seed, scale)
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(16, n_features, generator=gen) * 3
    y = torch.randn(16, n_features, generator=gen) * 3
    with torch.no_grad():
        gt_xy, lt_xy = net(x, y)
        gt_yx, lt_yx = net(y, x)
        gt_xx, lt_xx = net(x, x)
    torch.testing.assert_close(gt_xy, lt_yx, rtol=1e-6, atol=1e-6)  # N>(x,y) = N<(y,x)
    torch.testing.assert_close(lt_xy, gt_yx, rtol=1e-6, atol=1e-6)
    assert torch.equal(gt_xx, lt_xx)  # a document never beats itself


def test_matches_explicit_dual_neuron_network():
    """CmpNN equals a plain 2d -> 2h -> 2 MLP whose weights follow the paper's rules 1-3."""
    net = random_net(5, 8, "sigmoid", 0, 1.0)
    v_x, v_y, b = net.v_x.detach(), net.v_y.detach(), net.b.detach()
    w_gt, w_lt, b_out = net.w_gt.detach(), net.w_lt.detach(), net.b_out.detach()
    hidden_w = torch.cat([torch.cat([v_x, v_y], 1), torch.cat([v_y, v_x], 1)], 0)  # i, then i'
    hidden_b = torch.cat([b, b])
    out_w = torch.stack([torch.cat([w_gt, w_lt]), torch.cat([w_lt, w_gt])])  # rows o>, o<
    x, y = torch.randn(20, 5), torch.randn(20, 5)
    h = torch.sigmoid(torch.cat([x, y], 1) @ hidden_w.T + hidden_b)
    expected = torch.sigmoid(h @ out_w.T + b_out)
    with torch.no_grad():
        gt, lt = net(x, y)
    torch.testing.assert_close(torch.stack([gt, lt], 1), expected)


def brute_force(model: SortNet, data: QuerySet) -> tuple[np.ndarray, set[int]]:
    """Mean margin over the other documents of the query and the mis-compared pair codes."""
    scores = np.zeros(data.n_docs)
    wrong = set()
    for a, b in zip(data.offsets[:-1], data.offsets[1:]):
        i, j = np.meshgrid(np.arange(a, b), np.arange(a, b), indexing="ij")
        i, j = i.ravel(), j.ravel()
        gt, lt = model.compare(data.features[i], data.features[j])
        margin = (gt - lt).reshape(b - a, b - a)
        np.fill_diagonal(margin, 0.0)
        scores[a:b] = margin.sum(1) / max(b - a - 1, 1)
        bad = (data.labels[i] > data.labels[j]) & ((gt - lt) <= 0) & (i != j)
        wrong |= set((i[bad] * data.n_docs + j[bad]).tolist())
    return scores, wrong


@pytest.mark.parametrize("chunk_elements", [4_000_000, 2_000])
def test_vectorised_ranking_equals_brute_force(chunk_elements):
    data = linear_queries(15, 1, min_len=3)
    model = SortNet(n_hidden=6, chunk_elements=chunk_elements, max_opponents=64)
    model.net = random_net(data.n_features, 6, "sigmoid", 3, 1.0)
    scores, codes = model._rank(data, model.net, with_wrong_pairs=True)
    expected_scores, expected_wrong = brute_force(model, data)
    np.testing.assert_allclose(scores, expected_scores, rtol=1e-5, atol=1e-6)
    assert set(codes.tolist()) == expected_wrong and len(expected_wrong) > 0
    np.testing.assert_array_equal(model.score(data), scores)


def test_opponent_sampling_is_deterministic():
    data = linear_queries(10, 2, min_len=3)
    model = SortNet(n_hidden=4, max_opponents=5, seed=1)
    model.net = random_net(data.n_features, 4, "tanh", 0, 1.0)
    a, b = model.score(data), model.score(data)
    assert np.array_equal(a, b) and np.isfinite(a).all()
    full = SortNet(n_hidden=4, max_opponents=1000)
    full.net = model.net
    assert not np.allclose(a, full.score(data))  # long queries really were subsampled


def test_learns_and_keeps_best_iteration():
    train, vali, test = (
        linear_queries(n, seed, min_len=3) for n, seed in ((50, 0), (25, 1), (40, 2))
    )
    adam = {"name": "adam", "lr": 3e-3}
    model = SortNet(n_hidden=10, max_iter=6, epochs_per_iter=4, optimizer=adam, seed=0).fit(
        train, vali
    )
    random = evaluate(np.random.default_rng(0).random(test.n_docs), test, names=("ndcg@10",))
    learned = evaluate(model.score(test), test, names=("ndcg@10",))
    assert learned.means["ndcg@10"] > random.means["ndcg@10"] + 0.25, (learned.means, random.means)
    # Algorithm 3.1: C* is the iteration with the best vali quality, and it is what scores.
    curve = [rec["vali_ndcg@10"] for rec in model.history]
    assert curve[model.best_iteration_] == max(curve)
    vali_now = evaluate(model.score(vali), vali, names=("ndcg@10",)).means["ndcg@10"]
    assert vali_now == pytest.approx(max(curve), abs=1e-12)
    sizes = [rec["n_train_pairs"] for rec in model.history if "n_train_pairs" in rec]
    assert sizes == sorted(sizes) and sizes[0] > 0  # TP only grows (below the cap)


def test_bad_options():
    with pytest.raises(UserError, match="n_hidden"):
        CmpNN(4, 3)
    with pytest.raises(UserError, match="optimizer"):
        SortNet(optimizer="rmsprop")
    with pytest.raises(UserError, match="optimizer._target_"):
        SortNet(optimizer={"name": "x", "_target_": "torch.optim.NoSuchOptimizer"})


def test_optimizer_comes_from_the_optimizer_group_node():
    import torch

    from ltr_bench.models.networks import build_optimizer

    sgd = {"name": "sgd", "_target_": "torch.optim.SGD", "lr": 0.1, "momentum": 0.5}
    opt = build_optimizer(SortNet(optimizer=sgd).optimizer, CmpNN(3, 4).parameters())
    assert isinstance(opt, torch.optim.SGD) and opt.defaults["momentum"] == 0.5
    default = SortNet().optimizer
    assert (default.name, default.target) == ("adam", torch.optim.Adam)
    assert default.params == {"lr": 3e-3, "weight_decay": 0.0}
    with pytest.raises(UserError, match="hidden_activation"):
        CmpNN(4, 4, "softplus")
