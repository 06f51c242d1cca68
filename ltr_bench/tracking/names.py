"""How a name becomes an MLflow key, and MLflow's limits on keys and values.

Every module that writes params, tags or metrics shortens and sanitises through here, so a key
means the same thing wherever it is logged.
"""

from __future__ import annotations

from ltr_bench import tracking_keys as keys

MAX_PARAM_LEN = 6000  # MLflow's limit on a param value
MAX_TAG_LEN = 8000
MAX_KEY_LEN = 250


def sanitize_key(key: str) -> str:
    """An MLflow-safe metric/param key: ``@`` -> ``_at_``, other odd characters -> ``_``."""
    key = key.replace("@", "_at_")
    out = "".join(c if (c.isalnum() or c in "_-./ ") else "_" for c in key)
    return out[:MAX_KEY_LEN]


def curve_key(key: str) -> str:
    """MLflow key of a per-epoch value a ranker names ``vali_ndcg@10`` -> ``curve/vali_ndcg_at_10``.

    Learning curves live under their own prefix, so they never sit beside (or share a key with)
    the final ``vali/ndcg_at_10`` of a fold.
    """
    return keys.curve_key(sanitize_key(key))
