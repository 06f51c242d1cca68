"""Statistics for comparing rankers over folds / splits, as in the papers' Sect. 4.4 and 5.1.

- :func:`corrected_resampled_ttest`: Nadeau & Bengio (2003) corrected resampled t-test for two
  models scored on the same n train/test splits. The splits share training data, so the naive
  paired t-test underestimates the variance; the correction replaces ``1/n`` by
  ``1/n + n_test/n_train``.
- :func:`friedman_nemenyi`: Friedman test over a models x folds matrix, the Nemenyi post-hoc
  test (scikit-posthocs), average ranks and Demsar's (2006) critical difference.
- :func:`format_mean_se`: the papers' ``0.720(12)`` notation for mean and standard error.
- :func:`bayesian_correlated_ttest` (beyond the papers): Corani & Benavoli's (2015) Bayesian
  correlated t-test with a region of practical equivalence (ROPE): the probabilities that A is
  better, that A and B are practically equivalent, that B is better.
- :func:`paired_randomization_test`, :func:`paired_ttest`, :func:`holm` and
  :func:`win_tie_loss`: per-query comparisons of two rankers on one split.

Matrices of scores are ``pandas.DataFrame`` objects with one row per model and one column per
fold (or split); higher scores are better unless stated otherwise. One module per test family:
notation, ttest, friedman, bayes, per_query; import them from here (each is imported on first use).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ltr_bench.lazy_exports import lazy_dir, lazy_getattr

if TYPE_CHECKING:
    from ltr_bench.stats.bayes import (
        BayesResult,
        bayesian_correlated_ttest,
        pairwise_bayesian_ttests,
    )
    from ltr_bench.stats.friedman import (
        FriedmanResult,
        average_ranks,
        cd_groups,
        critical_difference,
        friedman_nemenyi,
        nemenyi_q_alpha,
    )
    from ltr_bench.stats.notation import (
        MISSING,
        format_mean_se,
        mean_se,
    )
    from ltr_bench.stats.per_query import (
        holm,
        paired_randomization_test,
        paired_ttest,
        per_query_comparison,
        win_tie_loss,
    )
    from ltr_bench.stats.ttest import (
        TTestResult,
        corrected_resampled_ttest,
        pairwise_corrected_ttests,
    )

#: Public name -> the module that defines it (imported on first use).
_MODULES = {
    "BayesResult": "bayes",
    "bayesian_correlated_ttest": "bayes",
    "pairwise_bayesian_ttests": "bayes",
    "FriedmanResult": "friedman",
    "average_ranks": "friedman",
    "cd_groups": "friedman",
    "critical_difference": "friedman",
    "friedman_nemenyi": "friedman",
    "nemenyi_q_alpha": "friedman",
    "MISSING": "notation",
    "format_mean_se": "notation",
    "mean_se": "notation",
    "holm": "per_query",
    "paired_randomization_test": "per_query",
    "paired_ttest": "per_query",
    "per_query_comparison": "per_query",
    "win_tie_loss": "per_query",
    "TTestResult": "ttest",
    "corrected_resampled_ttest": "ttest",
    "pairwise_corrected_ttests": "ttest",
}

__all__ = [
    "BayesResult",
    "bayesian_correlated_ttest",
    "pairwise_bayesian_ttests",
    "FriedmanResult",
    "average_ranks",
    "cd_groups",
    "critical_difference",
    "friedman_nemenyi",
    "nemenyi_q_alpha",
    "MISSING",
    "format_mean_se",
    "mean_se",
    "holm",
    "paired_randomization_test",
    "paired_ttest",
    "per_query_comparison",
    "win_tie_loss",
    "TTestResult",
    "corrected_resampled_ttest",
    "pairwise_corrected_ttests",
]

__getattr__ = lazy_getattr(__name__, globals(), _MODULES)
__dir__ = lazy_dir(globals(), _MODULES)
