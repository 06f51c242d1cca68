"""Per-query comparisons of rankers on one split: randomization and paired t-tests, Holm's
adjustment, wins/ties/losses."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import stats as sst


def _paired(values_a: ArrayLike, values_b: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(values_a, dtype=float)
    b = np.asarray(values_b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"need two 1-d arrays of equal length, got {a.shape} and {b.shape}")
    keep = ~(np.isnan(a) | np.isnan(b))
    if keep.sum() < 2:
        raise ValueError(f"need at least 2 queries with both values, got {int(keep.sum())}")
    return a[keep], b[keep]


def paired_randomization_test(
    values_a: ArrayLike, values_b: ArrayLike, *, n_resamples: int = 9999, seed: int = 0
) -> float:
    """Two-sided paired randomization (sign-flip) test of ``mean(a - b) = 0`` over queries.

    Under the null each query's pair of values is exchangeable, so the sign of each difference is
    flipped at random; ``scipy.stats.permutation_test`` does it (exactly when ``2**n`` does not
    exceed ``n_resamples``). Queries where either value is NaN are left out. Returns the p-value.
    """
    a, b = _paired(values_a, values_b)
    res = sst.permutation_test(
        (a, b),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(res.pvalue)


def paired_ttest(values_a: ArrayLike, values_b: ArrayLike) -> float:
    """Two-sided paired t-test over queries (``scipy.stats.ttest_rel``); p = 1 for identical values."""
    a, b = _paired(values_a, values_b)
    if np.array_equal(a, b):
        return 1.0
    return float(sst.ttest_rel(a, b).pvalue)


def holm(pvalues: ArrayLike) -> np.ndarray:
    """Holm's (1979) step-down adjusted p-values (family-wise error control), in input order.

    ``p_(i)`` sorted ascending becomes ``max_{j<=i} min(1, (m - j + 1) p_(j))``; NaNs stay NaN and
    do not count towards ``m``.
    """
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = ~np.isnan(p)
    m = int(ok.sum())
    if m == 0:
        return out
    vals = p[ok]
    order = np.argsort(vals, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * vals[order]))
    back = np.empty(m)
    back[order] = adjusted
    out[ok] = back
    return out


def win_tie_loss(values: pd.DataFrame, baseline: str, tol: float = 0.0) -> pd.DataFrame:
    """Per-query wins, ties and losses of every model (columns of ``values``) against ``baseline``.

    ``values`` has one row per query and one column per model. A model wins a query when its value
    exceeds the baseline's by more than ``tol``, loses when it is below by more than ``tol``, else
    ties; queries where either value is NaN are not counted. Rows: the other models.
    """
    if baseline not in values.columns:
        raise ValueError(f"baseline {baseline!r} is not one of the models {list(values.columns)}")
    base = values[baseline].to_numpy(dtype=float)
    rows = {}
    for model in values.columns:
        if model == baseline:
            continue
        d = values[model].to_numpy(dtype=float) - base
        d = d[~np.isnan(d)]
        rows[model] = {
            "win": int((d > tol).sum()),
            "tie": int((np.abs(d) <= tol).sum()),
            "loss": int((d < -tol).sum()),
        }
    return pd.DataFrame.from_dict(rows, orient="index", columns=["win", "tie", "loss"])


def per_query_comparison(
    values: pd.DataFrame, *, n_resamples: int = 9999, seed: int = 0
) -> pd.DataFrame:
    """Randomization and paired t-test p-values for every pair of models, Holm-adjusted over pairs.

    ``values``: one row per query of one split, one column per model (e.g. NDCG@10 per query).
    Rows: one per pair ``(a, b)``, with ``mean_diff`` (a - b), ``p_randomization``,
    ``p_ttest`` and their Holm-adjusted versions ``p_randomization_holm``, ``p_ttest_holm``.
    """
    rows = []
    for a, b in combinations(values.columns, 2):
        x, y = values[a].to_numpy(dtype=float), values[b].to_numpy(dtype=float)
        keep = ~(np.isnan(x) | np.isnan(y))
        rows.append(
            {
                "a": a,
                "b": b,
                "n_queries": int(keep.sum()),
                "mean_diff": float(np.mean(x[keep] - y[keep])),
                "p_randomization": paired_randomization_test(
                    x, y, n_resamples=n_resamples, seed=seed
                ),
                "p_ttest": paired_ttest(x, y),
            }
        )
    out = pd.DataFrame(
        rows, columns=["a", "b", "n_queries", "mean_diff", "p_randomization", "p_ttest"]
    )
    out["p_randomization_holm"] = holm(out["p_randomization"])
    out["p_ttest_holm"] = holm(out["p_ttest"])
    return out
