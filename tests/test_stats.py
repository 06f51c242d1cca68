"""Tests of ltr_bench.stats against hand-computed values, scipy and scikit-posthocs."""

from __future__ import annotations

import math
import re
from itertools import product

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from ltr_bench.stats import (
    MISSING,
    average_ranks,
    bayesian_correlated_ttest,
    cd_groups,
    corrected_resampled_ttest,
    critical_difference,
    format_mean_se,
    friedman_nemenyi,
    holm,
    mean_se,
    nemenyi_q_alpha,
    paired_randomization_test,
    paired_ttest,
    pairwise_bayesian_ttests,
    pairwise_corrected_ttests,
    per_query_comparison,
    win_tie_loss,
)

# ----------------------------------------------------------------------------- format_mean_se


@pytest.mark.parametrize(
    ("mean", "se", "expected"),
    [
        (0.7200, 0.0121, "0.720(12)"),  # the papers' example
        (0.72, 0.00707, "0.7200(71)"),
        (0.1234, 0.00349, "0.1234(35)"),
        (0.5, 0.0125, "0.500(13)"),  # half-up, not float noise (12.4999...) or half-even
        (0.72, 0.0996, "0.72(10)"),  # rounding carries into a new digit: one decimal fewer
        (67.3, 6.2, "67.3(62)"),  # SE between 1 and 10: still two significant digits
        (196.4, 14.2, "196(14)"),  # SE >= 10: mean in whole units, SE in full
        (2215.0, 351.0, "2215(351)"),  # as in the paper's Table 3 (never round the mean to tens)
        (0.72, 0.0, "0.720(0)"),  # SE = 0
        (0.4000000000000001, 3.9e-17, "0.400(0)"),  # float noise of identical values is SE = 0
        (0.72, math.nan, "0.720"),  # a single fold: no SE
        (math.nan, 0.01, MISSING),
        (-0.031, 0.0042, "-0.0310(42)"),
    ],
)
def test_format_mean_se_examples(mean, se, expected):
    assert format_mean_se(mean, se) == expected


@pytest.mark.parametrize(
    ("mean", "se", "expected"),
    [
        (67.2, 6.1, "67(6)"),
        (103.2, 1.1, "103(1)"),
        (1046.0, 23.0, "1046(23)"),
        (0.157, 0.003, "0.157(3)"),
    ],
)
def test_format_mean_se_one_digit_reproduces_paper_table3(mean, se, expected):
    assert format_mean_se(mean, se, digits=1) == expected


def test_format_mean_se_rejects_negative_se():
    with pytest.raises(ValueError):
        format_mean_se(0.5, -0.1)


_NOTATION = re.compile(r"^(-?\d+(?:\.(\d+))?)\((\d+)\)$")


@settings(max_examples=300, deadline=None)
@given(
    mean=st.floats(-1e4, 1e4, allow_nan=False),
    se=st.floats(1e-6, 1e4, allow_nan=False),
)
def test_format_mean_se_round_trips(mean, se):
    """Parsing the text back gives the mean to half a unit of the last digit and the SE to two
    significant digits (or in full units when SE >= 10)."""
    assume(se > 1e-10 * abs(mean))  # below that the SE counts as float noise (shown as (0))
    text = format_mean_se(mean, se)
    m = _NOTATION.match(text)
    assert m, text
    decimals = len(m.group(2) or "")
    unit = 10.0**-decimals
    assert abs(float(m.group(1)) - mean) <= 0.5 * unit * (1 + 1e-9) + 1e-9
    se_units = int(m.group(3))
    assert abs(se_units * unit - se) <= 0.5 * unit * (1 + 1e-9) + 1e-12
    if decimals > 0:
        assert 10 <= se_units <= 99  # exactly two significant digits
    else:
        assert se >= 9.95 and se_units >= 10


def test_mean_se_by_hand():
    assert mean_se([1.0, 2.0, 3.0]) == pytest.approx((2.0, 1.0 / math.sqrt(3.0), 3))
    m, se, n = mean_se([0.5, math.nan])
    assert (m, n) == (0.5, 1) and math.isnan(se)
    m, se, n = mean_se([])
    assert n == 0 and math.isnan(m) and math.isnan(se)


# ----------------------------------------------------------------------------- corrected t-test


def test_corrected_ttest_by_hand():
    """d = a - b = 0.01..0.05: mean 0.03, var 0.00025, n_test/n_train = 1/3.

    t = 0.03 / sqrt((1/5 + 1/3) * 0.00025) = 3*sqrt(3)/2; with 4 df the two-sided p is
    1 - u(3 - u^2)/2 for u = t / sqrt(t^2 + 4) = sqrt(27/43), i.e. 1 - (51/43) sqrt(27/43).
    """
    b = np.array([0.5, 0.5, 0.5, 0.5, 0.5])
    a = b + np.array([0.01, 0.02, 0.03, 0.04, 0.05])
    res = corrected_resampled_ttest(a, b, n_train=300, n_test=100)
    assert res.t == pytest.approx(3 * math.sqrt(3) / 2, rel=1e-9)
    assert res.p == pytest.approx(1 - 51 / 43 * math.sqrt(27 / 43), rel=1e-9)
    assert res.df == 4 and res.n == 5
    assert res.mean_diff == pytest.approx(0.03)
    swapped = corrected_resampled_ttest(b, a, n_train=300, n_test=100)
    assert swapped.t == pytest.approx(-res.t) and swapped.p == pytest.approx(res.p)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=15).filter(
        lambda xs: np.var([a - b for a, b in xs]) > 1e-6
    )
)
def test_corrected_ttest_without_correction_equals_ttest_rel(pairs):
    a, b = np.array(pairs).T
    ours = corrected_resampled_ttest(a, b, n_train=1, n_test=0)
    ref = sst.ttest_rel(a, b)
    assert ours.t == pytest.approx(float(ref.statistic), rel=1e-9, abs=1e-12)
    assert ours.p == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-12)


def test_corrected_ttest_per_split_sizes_average_the_ratio():
    rng = np.random.default_rng(3)
    a, b = rng.random(6), rng.random(6)
    n_train = np.array([100, 200, 100, 200, 100, 200])
    n_test = np.array([50, 50, 50, 50, 50, 50])  # ratios 0.5 / 0.25: mean 0.375
    per_split = corrected_resampled_ttest(a, b, n_train=n_train, n_test=n_test)
    scalar = corrected_resampled_ttest(a, b, n_train=1.0, n_test=0.375)
    assert per_split.p == pytest.approx(scalar.p)
    naive = corrected_resampled_ttest(a, b, n_train=1.0, n_test=0.0)
    assert (
        abs(per_split.t) < abs(naive.t) and per_split.p > naive.p
    )  # the correction is conservative


def test_corrected_ttest_zero_variance():
    a = np.array([0.5, 0.6, 0.7])
    assert corrected_resampled_ttest(a, a, n_train=3, n_test=1).p == 1.0
    res = corrected_resampled_ttest(a + 0.1, a, n_train=3, n_test=1)
    assert res.p == 0.0 and res.t == math.inf


@pytest.mark.parametrize(
    ("a", "b"), [([0.1, 0.2], [0.1]), ([0.1], [0.2]), ([0.1, math.nan], [0.2, 0.3])]
)
def test_corrected_ttest_rejects_bad_input(a, b):
    with pytest.raises(ValueError):
        corrected_resampled_ttest(a, b, n_train=2, n_test=1)


def test_pairwise_ttests_use_common_folds():
    scores = pd.DataFrame(
        [
            [0.51, 0.52, 0.53, 0.54, 0.55],
            [0.5, 0.5, 0.5, 0.5, 0.5],
            [0.4, math.nan, math.nan, math.nan, 0.3],
        ],
        index=["a", "b", "c"],
    )
    pvals, diffs = pairwise_corrected_ttests(scores, 1 / 3)
    assert pvals.loc["a", "b"] == pytest.approx(1 - 51 / 43 * math.sqrt(27 / 43), rel=1e-6)
    assert pvals.loc["a", "b"] == pvals.loc["b", "a"]
    assert diffs.loc["a", "b"] == pytest.approx(0.03) and diffs.loc["b", "a"] == pytest.approx(
        -0.03
    )
    # c has 2 folds in common with a (folds 0 and 4): d = [0.11, 0.25]
    d = np.array([0.11, 0.25])
    t = d.mean() / math.sqrt((1 / 2 + 1 / 3) * d.var(ddof=1))
    assert pvals.loc["a", "c"] == pytest.approx(2 * sst.t.sf(t, 1))
    assert math.isnan(pvals.loc["a", "a"])
    # per-fold ratios: only the folds in common are averaged
    ratio = pd.Series([1.0, 0.0, 0.0, 0.0, 1.0], index=scores.columns)
    pv2, _ = pairwise_corrected_ttests(scores, ratio)
    t2 = d.mean() / math.sqrt((1 / 2 + 1.0) * d.var(ddof=1))
    assert pv2.loc["a", "c"] == pytest.approx(2 * sst.t.sf(t2, 1))


# ----------------------------------------------------------------------------- Friedman / Nemenyi


@pytest.mark.parametrize(
    ("k", "q05", "q10"),
    [
        (2, 1.960, 1.645),
        (3, 2.343, 2.052),
        (4, 2.569, 2.291),
        (5, 2.728, 2.459),
        (6, 2.850, 2.589),
        (7, 2.949, 2.693),
        (8, 3.031, 2.780),
        (9, 3.102, 2.855),
        (10, 3.164, 2.920),
    ],
)
def test_q_alpha_matches_demsar_table(k, q05, q10):
    assert nemenyi_q_alpha(k, 0.05) == pytest.approx(q05, abs=1e-3)
    assert nemenyi_q_alpha(k, 0.10) == pytest.approx(q10, abs=1e-3)


def test_critical_difference_by_hand():
    # Demsar (2006), Sect. 3.2.2 example: k = 4, N = 14 -> CD = 2.569 * sqrt(20/84) = 1.25
    assert critical_difference(4, 14) == pytest.approx(1.2536, abs=1e-3)
    assert critical_difference(3, 5) == pytest.approx(2.3437 * math.sqrt(0.4), abs=1e-4)


def test_friedman_strict_order_by_hand():
    """Three models, always ranked 1, 2, 3 on five folds: chi2 = 12N/(k(k+1)) sum R^2 - 3N(k+1)
    = 5 * 14 - 60 = 10, and with 2 df p = exp(-10/2)."""
    scores = pd.DataFrame(
        [[0.9, 0.8, 0.7, 0.9, 0.8], [0.5, 0.6, 0.5, 0.6, 0.5], [0.1, 0.2, 0.3, 0.1, 0.2]],
        index=["best", "mid", "worst"],
    )
    res = friedman_nemenyi(scores)
    assert res.statistic == pytest.approx(10.0)
    assert res.p == pytest.approx(math.exp(-5.0))
    assert list(res.avg_ranks.index) == ["best", "mid", "worst"]
    assert list(res.avg_ranks) == [1.0, 2.0, 3.0]
    assert res.cd == pytest.approx(critical_difference(3, 5))
    # Nemenyi: q = dR / sqrt(k(k+1)/(6N)); p = P(studentized range > q sqrt 2)
    se = math.sqrt(3 * 4 / 30)
    for a, b, dr in [("best", "mid", 1), ("best", "worst", 2), ("mid", "worst", 1)]:
        expected = sst.studentized_range.sf(dr / se * math.sqrt(2), 3, np.inf)
        assert res.nemenyi_p.loc[a, b] == pytest.approx(expected, rel=1e-6)
    assert res.significant_pairs() == [
        ("best", "worst", pytest.approx(res.nemenyi_p.loc["best", "worst"]))
    ]
    assert res.groups() == [("best", "mid"), ("mid", "worst")]


def test_friedman_against_scipy_and_posthocs_on_random_data():
    import scikit_posthocs as sp

    rng = np.random.default_rng(0)
    values = rng.random((4, 8))
    scores = pd.DataFrame(values, index=list("abcd"))
    res = friedman_nemenyi(scores)
    ref = sst.friedmanchisquare(*values)
    assert res.statistic == pytest.approx(ref.statistic) and res.p == pytest.approx(ref.pvalue)
    ref_nem = sp.posthoc_nemenyi_friedman(values.T)
    assert np.allclose(res.nemenyi_p.loc[list("abcd"), list("abcd")].to_numpy(), ref_nem.to_numpy())
    # hand formula without ties
    ranks = average_ranks(scores)
    k, n = values.shape
    chi2 = 12 * n / (k * (k + 1)) * (ranks**2).sum() - 3 * n * (k + 1)
    assert res.statistic == pytest.approx(chi2)
    # the CD and the Nemenyi p-values agree on significance
    for a in "abcd":
        for b in "abcd":
            if a != b:
                far = abs(ranks[a] - ranks[b]) > res.cd
                assert far == (res.nemenyi_p.loc[a, b] < res.alpha)


def test_friedman_drops_incomplete_folds_and_handles_two_models():
    scores = pd.DataFrame([[0.9, 0.8, math.nan, 0.7], [0.1, 0.2, 0.3, 0.75]], index=["a", "b"])
    res = friedman_nemenyi(scores)
    assert res.n_blocks == 3 and res.n_models == 2
    assert math.isnan(res.statistic)  # scipy's Friedman needs 3 models
    assert res.avg_ranks["a"] == pytest.approx(4 / 3)
    assert res.cd == pytest.approx(1.95996 * math.sqrt(2 * 3 / 18), rel=1e-5)
    with pytest.raises(ValueError):
        friedman_nemenyi(scores.iloc[:1])


def test_lower_is_better_flips_ranks():
    scores = pd.DataFrame([[1.0, 2.0], [3.0, 4.0]], index=["fast", "slow"])
    assert list(average_ranks(scores, higher_is_better=False)) == [1.0, 2.0]
    assert list(average_ranks(scores)) == [2.0, 1.0]


def test_cd_groups():
    ranks = pd.Series({"a": 1.0, "b": 1.5, "c": 2.4, "d": 4.0})
    assert cd_groups(ranks, 1.0) == [("a", "b"), ("b", "c")]
    assert cd_groups(ranks, 3.0) == [("a", "b", "c", "d")]
    assert cd_groups(ranks, 0.1) == []


# ----------------------------------------------------------------------------- Bayesian / per-query


fold_scores = st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=3, max_size=15)


@settings(max_examples=60, deadline=None)
@given(data=st.data(), k=st.integers(3, 10), rope=st.sampled_from([0.0, 0.005, 0.01, 0.05]))
def test_bayesian_ttest_equals_baycomp_for_kfold(data, k, rope):
    """Independent implementation: baycomp (Benavoli et al.'s own package) on k-fold CV scores."""
    baycomp = pytest.importorskip("baycomp")
    a = np.array(data.draw(st.lists(st.floats(0.3, 0.9), min_size=k, max_size=k)))
    b = np.array(data.draw(st.lists(st.floats(0.3, 0.9), min_size=k, max_size=k)))
    assume(np.var(a - b, ddof=1) > 1e-10)
    r = bayesian_correlated_ttest(a, b, test_train_ratio=1 / (k - 1), rope=rope)
    expected = baycomp.CorrelatedTTest.probs(a, b, rope=rope, runs=1)
    if rope == 0:  # baycomp returns (left, right) without a rope
        expected = (expected[0], 0.0, expected[1])
    assert (r.p_a_better, r.p_equivalent, r.p_b_better) == pytest.approx(expected, abs=1e-9)
    assert r.p_a_better + r.p_equivalent + r.p_b_better == pytest.approx(1.0)


def test_bayesian_ttest_hand_worked():
    # d = [0.01, 0, 0.02, -0.01, 0.02]: mean 0.008, var 0.00017, 5 folds -> ratio 1/4
    a = np.array([0.72, 0.70, 0.74, 0.69, 0.73])
    b = np.array([0.71, 0.70, 0.72, 0.70, 0.71])
    r = bayesian_correlated_ttest(a, b, test_train_ratio=0.25, rope=0.01)
    scale = math.sqrt((1 / 5 + 0.25) * 0.00017)
    assert r.scale == pytest.approx(scale)
    assert r.p_b_better == pytest.approx(sst.t.cdf((-0.01 - 0.008) / scale, 4))
    assert r.p_a_better == pytest.approx(sst.t.sf((0.01 - 0.008) / scale, 4))
    # A wide rope makes the two practically equivalent; swapping A and B swaps the tails
    assert bayesian_correlated_ttest(a, b, test_train_ratio=0.25, rope=1.0).p_equivalent > 0.999
    swapped = bayesian_correlated_ttest(b, a, test_train_ratio=0.25, rope=0.01)
    assert (swapped.p_a_better, swapped.p_b_better) == pytest.approx((r.p_b_better, r.p_a_better))


def test_bayesian_ttest_zero_variance_is_a_point_mass():
    a = np.array([0.7, 0.8, 0.6])
    assert bayesian_correlated_ttest(a, a, test_train_ratio=0.25).p_equivalent == 1.0
    r = bayesian_correlated_ttest(a + 0.05, a, test_train_ratio=0.25, rope=0.01)
    assert (r.p_a_better, r.p_equivalent, r.p_b_better) == (1.0, 0.0, 0.0)


def test_pairwise_bayesian_ttests_covers_every_pair_on_common_folds():
    scores = pd.DataFrame(
        [[0.7, 0.72, 0.71, np.nan], [0.6, 0.61, 0.65, 0.6], [0.7, 0.73, 0.70, 0.7]],
        index=["x", "y", "z"],
        columns=["F1", "F2", "F3", "F4"],
    )
    table = pairwise_bayesian_ttests(scores, 0.25, rope=0.01)
    assert list(zip(table.a, table.b)) == [("x", "y"), ("x", "z"), ("y", "z")]
    xy = bayesian_correlated_ttest(
        scores.loc["x", ["F1", "F2", "F3"]],
        scores.loc["y", ["F1", "F2", "F3"]],
        test_train_ratio=0.25,
        rope=0.01,
    )
    assert table.iloc[0]["p_a_better"] == pytest.approx(xy.p_a_better)
    assert table.iloc[0]["n"] == 3


def _exact_sign_flip_p(a: np.ndarray, b: np.ndarray) -> float:
    """Every one of the 2**n sign patterns, by enumeration (the definition of the exact test).
    Statistics within a relative 100 machine epsilons of the observed one count as ties, as
    ``scipy.stats.permutation_test`` counts them (an absolute tolerance disagrees with it on
    differences that small, e.g. a query whose two values differ by 1e-12)."""
    d = a - b
    observed = abs(d.mean())
    stats_ = [abs((np.array(signs) * d).mean()) for signs in product([1, -1], repeat=d.size)]
    ties = observed * 100 * np.finfo(float).eps
    return float(np.mean(np.array(stats_) >= observed - ties))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=2, max_size=9))
@example(pairs=[(0.0, 0.5), (0.0, 1e-12)])  # a difference of 1e-12 is not a tie
def test_randomization_test_is_exact_for_small_n(pairs):
    a, b = (np.array(v) for v in zip(*pairs))
    assume(not np.allclose(a, b))
    # scipy counts a resampled statistic as a tie within 100 machine epsilons of the observed one,
    # relative to it; a mean that nearly cancels (a tiny statistic from large differences) is
    # rounded by more than that, so scipy and any reference may count the observed sign pattern
    # itself differently: such inputs say nothing about the test.
    d = a - b
    assume(100 * abs(d.mean()) > d.size * np.abs(d).max())
    assert paired_randomization_test(a, b) == pytest.approx(_exact_sign_flip_p(a, b), abs=1e-9)


def test_randomization_test_large_n_detects_a_shift_and_not_noise():
    rng = np.random.default_rng(3)
    a = rng.random(400)
    assert paired_randomization_test(a + 0.05 + rng.normal(0, 0.1, 400), a, n_resamples=2000) < 0.01
    assert paired_randomization_test(a + rng.normal(0, 0.1, 400), a, n_resamples=2000) > 0.01


def test_paired_ttest_equals_scipy_and_drops_nan_queries():
    a = np.array([0.5, 0.7, np.nan, 0.9, 0.4, 0.8])
    b = np.array([0.4, 0.7, 0.3, 0.6, 0.45, 0.5])
    keep = ~np.isnan(a)
    assert paired_ttest(a, b) == pytest.approx(sst.ttest_rel(a[keep], b[keep]).pvalue)
    assert paired_ttest(b, b) == 1.0


def test_holm_hand_worked_and_statsmodels():
    # sorted 0.01, 0.03, 0.04 (m = 3): 0.03, max(0.03, 0.06), max(0.06, 0.04) -> in input order
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert np.isnan(holm([0.2, np.nan])[1]) and holm([0.2, np.nan])[0] == pytest.approx(0.2)
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    p = np.random.default_rng(0).random(12) ** 3
    assert holm(p) == pytest.approx(multitest.multipletests(p, method="holm")[1])


def test_win_tie_loss_counts_against_the_baseline():
    values = pd.DataFrame(
        {"base": [0.5, 0.5, 0.5, np.nan], "m": [0.6, 0.5, 0.495, 0.9], "n": [0.1, 0.2, 0.5, 0.3]}
    )
    table = win_tie_loss(values, "base", tol=0.01)
    assert table.loc["m"].tolist() == [1, 2, 0]
    assert table.loc["n"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="baseline"):
        win_tie_loss(values, "nope")


def test_per_query_comparison_holm_adjusts_over_pairs():
    rng = np.random.default_rng(1)
    base = rng.random(60)
    values = pd.DataFrame({"a": base + 0.1, "b": base, "c": base + rng.normal(0, 0.05, 60)})
    table = per_query_comparison(values, n_resamples=999)
    assert len(table) == 3
    assert table["p_ttest_holm"].tolist() == pytest.approx(holm(table["p_ttest"]).tolist())
    ab = table[(table.a == "a") & (table.b == "b")].iloc[0]
    assert ab["mean_diff"] == pytest.approx(0.1) and ab["p_randomization_holm"] < 0.01
