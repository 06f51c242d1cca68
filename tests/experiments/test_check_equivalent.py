"""The ledger's ``equivalent`` check: the Bayesian correlated t-test between one model and others
on per-split rows paired by split, against a direct computation of the Student posterior."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sst

from ltr_bench.experiments import checks
from ltr_bench.experiments.checks import CheckError

SPLITS = [f"mq2008/holdout{i}" for i in range(6)]
BASE = np.array([0.70, 0.74, 0.68, 0.72, 0.75, 0.71])
NEAR = BASE + np.array([0.006, -0.004, 0.008, 0.001, -0.005, 0.004])  # within 0.01 throughout
FAR = BASE - 0.05 + np.array([0.004, -0.003, 0.001, 0.002, -0.004, 0.0])


def _rows() -> pd.DataFrame:
    """refits.csv-like rows, two seeds per split for model A (averaged), shuffled."""
    frames = [
        pd.DataFrame({"model": "A", "fold": SPLITS, "seed": 0, "ndcg": BASE - 0.001}),
        pd.DataFrame({"model": "A", "fold": SPLITS, "seed": 1, "ndcg": BASE + 0.001}),
        pd.DataFrame({"model": "B", "fold": SPLITS, "seed": 0, "ndcg": NEAR}),
        pd.DataFrame({"model": "C", "fold": SPLITS, "seed": 0, "ndcg": FAR}),
    ]
    return pd.concat(frames).sample(frac=1.0, random_state=0).reset_index(drop=True)


def _p_within(d: np.ndarray, ratio: float, rope: float) -> float:
    """P(|mean difference| <= rope) of the Student posterior (Corani & Benavoli 2015)."""
    n = d.size
    scale = math.sqrt((1 / n + ratio) * d.var(ddof=1))
    t = sst.t(n - 1, loc=d.mean(), scale=scale)
    return float(t.cdf(rope) - t.cdf(-rope))


def test_equivalence_is_the_posterior_mass_within_the_rope_per_pair_of_splits() -> None:
    tables = {"refits.csv": _rows()}
    args = dict(file="refits.csv", column="ndcg", by="model", a="A", test_train_ratio=0.25)
    near = checks.equivalent(tables, others=["B"], **args)
    expected = _p_within(BASE - NEAR, 0.25, 0.01)
    assert near.holds is True and 0.5 < expected < 0.999
    assert near.ours.startswith(f"B: P(within ±0.01) {expected:.2f}, P(A better) ")
    assert f"(A − B {(BASE - NEAR).mean():+.4f}, 6 splits)" in near.ours
    both = checks.equivalent(tables, others=["B", "C"], **args)
    far = f"C: P(within ±0.01) {_p_within(BASE - FAR, 0.25, 0.01):.2f}, P(A better) 1.00, "
    assert both.holds is False and far in both.ours
    strict = checks.equivalent(tables, others=["B"], at_least=0.999, **args)
    assert strict.holds is False


def test_equivalence_needs_the_columns_and_paired_rows() -> None:
    tables = {"refits.csv": _rows()}
    args = dict(file="refits.csv", by="model", a="A", test_train_ratio=0.25)
    assert checks.equivalent(tables, column="ndcg", others=["D"], **args).holds is None
    with pytest.raises(CheckError, match="no column 'map'"):
        checks.equivalent(tables, column="map", others=["B"], **args)
    listed = checks.equivalent(tables, column=["ndcg", "ndcg"], others=["B"], **args)
    assert listed.holds is True and listed.ours.startswith("ndcg: B: P(within ±0.01) ")
