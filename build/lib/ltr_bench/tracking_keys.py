"""Names shared by everything that writes to or reads from MLflow.

MLflow metric keys may not contain ``@``, so ``ndcg@10`` on the test split is logged as
``test/ndcg_at_10``. The tracking layer writes with these helpers and the report reads with them,
so the two can never drift apart.
"""

from __future__ import annotations

# Tags set on every run (values are strings).
TAG_ROLE = "ltr.role"  # "protocol" (parent), "fold" (one outer fold/split), "sweep", "trial"
TAG_MODEL = "ltr.model"  # the model config's name, e.g. "direct_ranker"
TAG_DATASET = "ltr.dataset"  # the dataset config's name, e.g. "mq2008"
TAG_PROTOCOL = "ltr.protocol"  # "single", "letor_folds", "holdout"
TAG_EVAL = "ltr.eval"  # "paper" or "graded"
TAG_FOLD = "ltr.fold"  # outer fold / split index, 0-based, on "fold" runs
TAG_FINGERPRINT = "ltr.dataset_fingerprint"
TAG_SEED = "ltr.seed"
TAG_VERSION = "ltr.version"
TAG_GIT_COMMIT = "ltr.git_commit"

ROLE_PROTOCOL = "protocol"
ROLE_FOLD = "fold"
ROLE_SWEEP = "sweep"
ROLE_TRIAL = "trial"

# Per-fold sizes, logged as params, needed by the corrected resampled t-test (n_test / n_train).
PARAM_N_TRAIN_QUERIES = "data.n_train_queries"
PARAM_N_TEST_QUERIES = "data.n_test_queries"

# Run times in seconds, logged as metrics on "fold" runs (and their sums on the parent).
TIME_READ = "time_read_s"
TIME_FIT = "time_fit_s"
TIME_EVAL = "time_eval_s"


def metric_key(split: str, name: str) -> str:
    """MLflow key for a metric on a split: ``("test", "ndcg@10") -> "test/ndcg_at_10"``."""
    return f"{split}/{name.replace('@', '_at_')}"


def metric_name(key: str) -> tuple[str, str]:
    """Inverse of :func:`metric_key`: ``"test/ndcg_at_10" -> ("test", "ndcg@10")``."""
    split, _, name = key.partition("/")
    return split, name.replace("_at_", "@")
