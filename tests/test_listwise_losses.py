"""ListMLE, ApproxNDCG, NeuralNDCG and LambdaLoss against slow loop implementations of their
papers' formulas, gradient checks, invariances, parameter errors, and a training run each."""

from __future__ import annotations

import itertools
import json
import math
from functools import partial
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.errors import UserError
from ltr_bench.losses import (
    LAMBDALOSS_SCHEMES,
    approx_ndcg_loss,
    lambdaloss,
    lambdarank_loss,
    listmle_loss,
    loss_info,
    neural_ndcg_loss,
    neural_sort,
    resolve_loss,
    sinkhorn,
)
from ltr_bench.metrics import metric_padded

# One batch with every case the conventions cover: label and score ties, padding (garbage
# scores and labels), a query without a relevant document, a one-document query.
QUERIES = [
    ([0.3, -1.2, 0.3, 2.0, 0.7, -0.4], [2, 0, 1, 0, 1, 1]),  # label ties, a score tie
    ([1.5, 0.2, -0.8, 0.9], [0, 0, 0, 0]),  # no relevant document: dropped
    ([0.4], [2]),  # one document
    ([-0.5, 0.1, 1.1], [1, 0, 2]),
]
PAD_SCORE, PAD_LABEL = 50.0, 4


def batch(queries=QUERIES, width: int = 8) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Padded float64 scores, int labels, mask; padding holds large scores and labels."""
    s = torch.full((len(queries), width), PAD_SCORE, dtype=torch.float64)
    y = torch.full((len(queries), width), PAD_LABEL, dtype=torch.long)
    m = torch.zeros((len(queries), width), dtype=torch.bool)
    for q, (scores, labels) in enumerate(queries):
        s[q, : len(scores)] = torch.tensor(scores, dtype=torch.float64)
        y[q, : len(labels)] = torch.tensor(labels)
        m[q, : len(labels)] = True
    return s, y, m


# ----------------------------------------------------------------- the papers' formulas, by loop
def gain(label: int) -> float:
    return 2.0**label - 1.0


def disc(rank: float) -> float:
    return 1.0 / math.log2(1.0 + rank)


def idcg(labels: list[int], k: int | None = None) -> float:
    ideal = sorted(labels, reverse=True)[: k or len(labels)]
    return sum(gain(lab) * disc(r + 1) for r, lab in enumerate(ideal))


def score_ranks(scores: list[float]) -> list[int]:
    """1-based ranks by descending score, ties by document order."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    rank = [0] * len(scores)
    for r, i in enumerate(order):
        rank[i] = r + 1
    return rank


def plackett_luce_nll(scores: list[float], perm: list[int]) -> float:
    """-log prod_i exp(s_perm(i)) / sum_{k >= i} exp(s_perm(k))  (Xia et al. 2008)."""
    return sum(
        math.log(sum(math.exp(scores[j]) for j in perm[i:])) - scores[perm[i]]
        for i in range(len(perm))
    )


def listmle_by_loop(scores: list[float], labels: list[int]) -> float:
    perm = sorted(range(len(labels)), key=lambda i: (-labels[i], i))  # ties: document order
    return plackett_luce_nll(scores, perm)


def approx_ndcg_by_loop(scores: list[float], labels: list[int], temperature: float) -> float:
    alpha, n = 1.0 / temperature, len(scores)
    dcg = 0.0
    for x in range(n):
        pos = 1.0
        for y in range(n):
            if y != x:
                s_xy = scores[x] - scores[y]
                pos += math.exp(-alpha * s_xy) / (1.0 + math.exp(-alpha * s_xy))
        dcg += gain(labels[x]) / math.log2(1.0 + pos)
    return 1.0 - dcg / idcg(labels)


def neural_ndcg_by_loop(
    scores: list[float], labels: list[int], temperature: float, iterations: int, k: int | None
) -> float:
    n = len(scores)
    p = []
    for i in range(1, n + 1):  # NeuralSort row i
        z = [
            ((n + 1 - 2 * i) * scores[j] - sum(abs(scores[j] - sk) for sk in scores)) / temperature
            for j in range(n)
        ]
        e = [math.exp(v - max(z)) for v in z]
        p.append([v / sum(e) for v in e])
    for _ in range(iterations):  # Sinkhorn: columns, then rows
        col = [sum(p[i][j] for i in range(n)) for j in range(n)]
        p = [[p[i][j] / col[j] for j in range(n)] for i in range(n)]
        p = [[v / sum(row) for v in row] for row in p]
    kk = min(k or n, n)
    dcg = sum(sum(p[i][j] * gain(labels[j]) for j in range(n)) * disc(i + 1) for i in range(kk))
    return 1.0 - dcg / idcg(labels, k)


def lambdaloss_terms(
    scores: list[float], labels: list[int], scheme: str, mu: float, sigma: float
) -> tuple[float, float]:
    """(sum of weight * -log2 likelihood, sum of weights) of one query, by the paper's formulas."""
    rank = score_ranks(scores)
    big_g = [gain(lab) / idcg(labels) if idcg(labels) > 0 else 0.0 for lab in labels]
    n, total, weights = len(scores), 0.0, 0.0
    if scheme == "ndcg_loss1":
        norm = sum(math.exp(s) for s in scores)
        for i in range(n):
            w = big_g[i] * disc(rank[i])  # G_i / D_i
            total += -w * math.log2(math.exp(scores[i]) / norm)
            weights += w
        return total, weights
    for i, j in itertools.permutations(range(n), 2):
        if labels[i] <= labels[j]:
            continue
        rho = abs(disc(rank[i]) - disc(rank[j]))
        gap = abs(rank[i] - rank[j])
        delta = abs(disc(gap) - disc(gap + 1))
        factor = {"lambda_rank": rho, "ndcg_loss2": delta, "ndcg_loss2pp": rho + mu * delta}
        w = factor[scheme] * abs(big_g[i] - big_g[j])
        p_ij = 1.0 / (1.0 + math.exp(-sigma * (scores[i] - scores[j])))
        total += -math.log2(p_ij**w)
        weights += w
    return total, weights


def mean_over_relevant(per_query, queries=QUERIES) -> float:
    """Mean of ``per_query(scores, labels)`` over the queries with a relevant document."""
    kept = [per_query(sc, lab) for sc, lab in queries if max(lab) > 0]
    return sum(kept) / len(kept)


# ------------------------------------------------------------------------------ against loops
def test_listmle_matches_the_plackett_luce_likelihood() -> None:
    s, y, m = batch()
    got = listmle_loss(s, y, m, ties="document_order").item()
    expected = mean_over_relevant(listmle_by_loop)
    assert got == pytest.approx(expected, rel=1e-12)
    assert listmle_by_loop([0.4], [2]) == 0.0  # one document: -log 1


def test_listmle_random_ties_pick_one_order_of_each_tie_group() -> None:
    scores, labels = [0.3, -1.2, 0.8, 2.0, 0.7], [1, 0, 0, 1, 2]
    s, y, m = batch([(scores, labels)], width=6)
    # every order the labels allow: doc 4 first, {0, 3} in either order, then {1, 2}
    allowed = {
        round(plackett_luce_nll(scores, [4, *a, *b]), 9)
        for a in itertools.permutations([0, 3])
        for b in itertools.permutations([1, 2])
    }
    seen = set()
    for seed in range(40):
        torch.manual_seed(seed)
        value = round(listmle_loss(s, y, m).item(), 9)
        assert value in allowed
        seen.add(value)
    assert len(seen) >= 2  # the ties are really drawn


@pytest.mark.parametrize("temperature", [1.0, 0.1])
def test_approx_ndcg_matches_the_position_approximation(temperature: float) -> None:
    s, y, m = batch()
    got = approx_ndcg_loss(s, y, m, temperature=temperature).item()
    expected = mean_over_relevant(lambda sc, lab: approx_ndcg_by_loop(sc, lab, temperature))
    assert got == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("temperature", "iterations", "k"), [(1.0, 0, None), (0.5, 7, 3)])
def test_neural_ndcg_matches_neuralsort_plus_sinkhorn(
    temperature: float, iterations: int, k: int | None
) -> None:
    s, y, m = batch()
    got = neural_ndcg_loss(
        s, y, m, temperature=temperature, sinkhorn_iterations=iterations, k=k
    ).item()
    expected = mean_over_relevant(
        lambda sc, lab: neural_ndcg_by_loop(sc, lab, temperature, iterations, k)
    )
    assert got == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("scheme", LAMBDALOSS_SCHEMES)
def test_lambdaloss_matches_the_weighted_likelihood(scheme: str) -> None:
    s, y, m = batch()
    terms = [lambdaloss_terms(sc, lab, scheme, mu=3.0, sigma=1.5) for sc, lab in QUERIES]
    expected = sum(t for t, _ in terms) / sum(w for _, w in terms)
    got = lambdaloss(s, y, m, scheme=scheme, mu=3.0, sigma=1.5).item()
    assert got == pytest.approx(expected, rel=1e-12)


def test_lambdaloss_lambda_rank_is_the_lambda_loss_in_bits() -> None:
    s, y, m = batch()
    assert lambdaloss(s, y, m, scheme="lambda_rank").item() == pytest.approx(
        lambdarank_loss(s, y, m).item() / math.log(2.0), rel=1e-12
    )


def test_low_temperatures_give_the_true_ndcg() -> None:
    """As the relaxations harden, 1 - loss is the metrics' NDCG (same gains and discounts)."""
    queries = [([0.3, -1.2, 0.5, 2.0, 0.7], [2, 0, 1, 0, 1]), ([-0.5, 0.1, 1.1], [1, 0, 2])]
    s, y, m = batch(queries, width=6)
    for k in (None, 3):
        true = metric_padded("ndcg" if k is None else f"ndcg@{k}", s, y, m).mean()
        neural = neural_ndcg_loss(s, y, m, temperature=1e-3, k=k).item()
        assert 1.0 - neural == pytest.approx(true, abs=1e-9)
    approx = approx_ndcg_loss(s, y, m, temperature=1e-3).item()
    assert 1.0 - approx == pytest.approx(metric_padded("ndcg", s, y, m).mean(), abs=1e-9)


def test_neural_sort_rows_and_sinkhorn_columns_sum_to_one() -> None:
    s, _, m = batch()
    p = neural_sort(s, m, 0.7)
    n = m.sum(1)
    rows = torch.arange(s.shape[1]) < n[:, None]
    assert torch.allclose(p.sum(2), rows.to(p.dtype))  # a softmax per rank, none past n
    assert torch.equal(p.sum(1) > 0, m)  # padded documents get no probability
    q = sinkhorn(p, 200)
    assert torch.allclose(q.sum(1), m.to(q.dtype)) and torch.allclose(q.sum(2), rows.to(q.dtype))


# -------------------------------------------------------------------- conventions at the edges
ALL = {
    "listmle": lambda s, y, m: listmle_loss(s, y, m, ties="document_order"),
    "approx_ndcg": approx_ndcg_loss,
    "neural_ndcg": lambda s, y, m: neural_ndcg_loss(s, y, m, sinkhorn_iterations=5),
    **{f"lambdaloss-{x}": partial(lambdaloss, scheme=x) for x in LAMBDALOSS_SCHEMES},
}


@pytest.mark.parametrize("name", ALL)
def test_no_relevant_document_and_one_document_give_a_zero_loss_that_trains(name: str) -> None:
    for queries in ([([1.5, 0.2, -0.8], [0, 0, 0])], [([0.4], [2])], [([0.4], [0])]):
        s, y, m = batch(queries, width=4)
        s.requires_grad_(True)
        loss = ALL[name](s, y, m)
        loss.backward()  # still a valid training step
        assert loss.item() == pytest.approx(0.0, abs=1e-12)
        assert torch.all(s.grad == 0)


@pytest.mark.parametrize("name", ALL)
def test_gradcheck(name: str) -> None:
    gen = torch.Generator().manual_seed(1)
    queries = [
        (torch.randn(6, generator=gen).tolist(), [2, 0, 1, 0, 1, 1]),
        (torch.randn(3, generator=gen).tolist(), [1, 0, 2]),
        ([0.4], [2]),
    ]
    s, y, m = batch(queries, width=7)
    s.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: ALL[name](x, y, m), (s,))


def test_kinds_costs_and_configs() -> None:
    conf = Path(__file__).resolve().parents[1] / "conf" / "loss"
    for name, fn in (
        ("listmle", listmle_loss),
        ("approx_ndcg", approx_ndcg_loss),
        ("neural_ndcg", neural_ndcg_loss),
        ("lambdaloss", lambdaloss),
    ):
        info = loss_info(fn)
        assert info is not None and info.kind == "list" and info.name == name
        assert info.cost_power == (1 if name == "listmle" else 2)
        node = yaml.safe_load((conf / f"{name}.yaml").read_text())
        assert node["name"] == name
        bound, _ = resolve_loss(node, "list")  # every parameter of the config is one of fn's
        assert bound.func is fn
        assert resolve_loss(name, "list")[0] is fn  # a built-in option, by short name


@pytest.mark.parametrize(
    ("fn", "params", "message"),
    [
        (
            listmle_loss,
            {"ties": "first"},
            "loss.ties='first' is not one of [random, document_order]",
        ),
        (approx_ndcg_loss, {"temperature": 0}, "loss.temperature=0 must be a number > 0"),
        (neural_ndcg_loss, {"temperature": -1.0}, "loss.temperature=-1.0 must be a number > 0"),
        (
            neural_ndcg_loss,
            {"sinkhorn_iterations": 2.5},
            "loss.sinkhorn_iterations=2.5 must be an integer >= 0",
        ),
        (neural_ndcg_loss, {"k": 0}, "loss.k=0 must be an integer >= 1 or null"),
        (
            lambdaloss,
            {"scheme": "ndcg_loss3"},
            "loss.scheme='ndcg_loss3' is not one of [ndcg_loss1, ndcg_loss2, ndcg_loss2pp, "
            "lambda_rank]",
        ),
        (lambdaloss, {"mu": -1}, "loss.mu=-1 must be a number >= 0"),
        (lambdaloss, {"sigma": "x"}, "loss.sigma='x' must be a number > 0"),
    ],
)
def test_bad_parameters_are_one_sentence_naming_the_key(fn, params, message) -> None:
    s, y, m = batch()
    with pytest.raises(UserError) as err:
        fn(s, y, m, **params)
    assert str(err.value) == message


# ----------------------------------------------------------------------------------- properties
@st.composite
def one_query(draw: st.DrawFn) -> tuple[list[float], list[int]]:
    n = draw(st.integers(1, 7))
    scores = draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n, unique=True))
    labels = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    return scores, labels


@settings(max_examples=40, deadline=None)
@given(query=one_query(), seed=st.integers(0, 2**16))
def test_documents_order_within_a_query_does_not_matter(query, seed: int) -> None:
    """Distinct scores (and, for ListMLE, distinct labels) leave no tie to the input order."""
    scores, labels = query
    perm = np.random.default_rng(seed).permutation(len(scores)).tolist()
    distinct = list(range(len(scores)))  # ListMLE: its permutation needs untied labels
    for name, fn in ALL.items():
        labs = distinct if name == "listmle" else labels
        a = fn(*batch([(scores, labs)]))
        b = fn(*batch([([scores[i] for i in perm], [labs[i] for i in perm])]))
        assert a.item() == pytest.approx(b.item(), rel=1e-9, abs=1e-12), name


@settings(max_examples=40, deadline=None)
@given(query=one_query(), data=st.data())
def test_padding_anywhere_plays_no_role(query, data: st.DataObject) -> None:
    scores, labels = query
    n_pad = data.draw(st.integers(1, 4))
    where = sorted(data.draw(st.lists(st.integers(0, len(scores)), min_size=n_pad, max_size=n_pad)))
    s, y, m = batch([(scores, labels)], width=len(scores))
    cols_s, cols_y, cols_m = list(s[0]), list(y[0]), list(m[0])
    for offset, at in enumerate(where):  # insert padding columns with garbage in them
        cols_s.insert(at + offset, torch.tensor(data.draw(st.floats(-9, 9)), dtype=torch.float64))
        cols_y.insert(at + offset, torch.tensor(data.draw(st.integers(0, 4))))
        cols_m.insert(at + offset, torch.tensor(False))
    padded = (torch.stack(cols_s)[None], torch.stack(cols_y)[None], torch.stack(cols_m)[None])
    for name, fn in ALL.items():
        assert fn(*padded).item() == pytest.approx(fn(s, y, m).item(), rel=1e-9, abs=1e-12), name


# ---------------------------------------------------------------------------------- training
@pytest.mark.parametrize("loss", ["listmle", "approx_ndcg", "neural_ndcg", "lambdaloss"])
def test_trains_listnet_star_through_the_cli(loss: str, tmp_path, cli) -> None:
    result = cli(
        "model=listnet_star",
        f"loss={loss}",
        "dataset.n_train=300",
        "dataset.n_vali=100",
        "dataset.n_test=100",
        "dataset.n_features=8",
        "dataset.docs_per_query=20",
        "model.hidden_sizes=[8]",
        "model.epochs=2",
        "tracking=none",
        "threads=1",
        "trainer.enable_progress_bar=false",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "test" in result.stdout and "ndcg@10" in result.stdout
    (results,) = tmp_path.glob("outputs/*/*/results.json")
    report = json.loads(results.read_text())
    assert report["config"]["loss"]["name"] == loss
    assert math.isfinite(report["objective"])


def test_a_bad_value_stops_the_run_with_one_sentence(tmp_path, cli) -> None:
    result = cli(
        "model=listnet_star",
        "loss=lambdaloss",
        "loss.scheme=ndcg",
        "dataset.n_train=100",
        "dataset.n_vali=50",
        "dataset.n_test=50",
        "dataset.docs_per_query=20",
        "model.epochs=1",
        "tracking=none",
        "threads=1",
        "trainer.enable_progress_bar=false",
        cwd=tmp_path,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "ltr-bench: error: loss.scheme='ndcg' is not one of [ndcg_loss1, ndcg_loss2, "
        "ndcg_loss2pp, lambda_rank]"
    ]
