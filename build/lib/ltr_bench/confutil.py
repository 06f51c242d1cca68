"""Config values as plain Python: Hydra hands constructors OmegaConf nodes (``_recursive_: false``,
experiment specs); code that stores or compares them wants lists and dicts."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf


def plain(value: Any) -> Any:
    """OmegaConf containers as plain (resolved) Python containers; other values unchanged."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value
