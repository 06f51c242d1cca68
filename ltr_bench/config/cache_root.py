"""Where ltr_bench caches what it can rebuild: parsed data files, transforms, an empty MLflow store.

One root for every cache (``cache_dir`` argument > ``$LTR_CACHE`` > ``$XDG_CACHE_HOME/ltr_bench``
> ``~/.cache/ltr_bench``); ``LTR_CACHE=off`` switches caching off. A module of its own so that any
layer (data, tracking) can ask without importing the other.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "LTR_CACHE"
OFF_VALUES = {"off", "none", "0", "false", "no"}


def resolve_cache_dir(cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The cache root: the argument, else ``$LTR_CACHE``, else ``~/.cache/ltr_bench``.

    Returns None when caching is switched off (``"off"``/``"none"``/``"0"``).
    """
    value = os.fspath(cache_dir) if cache_dir is not None else os.environ.get(CACHE_ENV, "")
    if value.strip().lower() in OFF_VALUES and value.strip():
        return None
    if not value.strip():
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        return Path(base).expanduser() / "ltr_bench"
    return Path(value).expanduser()
