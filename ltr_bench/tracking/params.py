"""A run's params: its config's choices (the policy is in :mod:`ltr_bench.tracking_keys`).

:func:`run_params` logs the chosen option of each config group and only the values that differ
from the option's file, which it re-reads from ``conf/<group>/<option>.yaml`` (the running Hydra
app's config sources, else the tree beside the package). :func:`flatten_config` is the plain
``{"a.b.c": "value"}`` view of a whole config.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.config.util import META_KEYS
from ltr_bench.tracking.names import MAX_PARAM_LEN, sanitize_key

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # ltr_bench/


def flatten_config(cfg: DictConfig | Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """The resolved config as flat ``{"a.b.c": "value"}`` strings (lists as JSON), ``hydra`` left out."""
    if isinstance(cfg, DictConfig):
        data = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=False)
    else:
        data = dict(cfg)
    out: dict[str, str] = {}

    def walk(node: Any, path: str) -> None:
        if isinstance(node, Mapping) and node:
            for k, v in node.items():
                if not path and k == "hydra":
                    continue
                walk(v, f"{path}.{k}" if path else str(k))
        else:
            text = node if isinstance(node, str) else json.dumps(node, default=str)
            out[sanitize_key(path)] = text[:MAX_PARAM_LEN]

    walk(data, prefix)
    return out


def run_params(cfg: DictConfig, choices: Mapping[str, str] | None = None) -> dict[str, str]:
    """The run's choices as MLflow params (the policy is in :mod:`ltr_bench.tracking_keys`).

    - ``model``, ``loss``, ... : the chosen option of each group (``keys.CHOICE_GROUPS``);
    - every value of the hyperparameter groups (``model.dropout``, ``optimizer.lr``, ...), so
      models of one family share one key set;
    - ``seed``, ``objective.metric``, ``objective.split``;
    - in the other groups (dataset, protocol, eval, trainer) only values that differ from the
      chosen option's file (``dataset.fold=1``): the option's name stands for the rest.

    Each value once: a value that only refers to another key (``model.loss: ${loss}``,
    ``model.seed: ${seed}``) is left out, and so are config metadata (``_target_``, ``name``)
    and machine facts (``keys.MACHINE_KEYS``, logged by :func:`machine_tags`).
    """
    raw = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(raw, dict)
    choices = dict(choices or {})
    out: dict[str, str] = {}
    for group in keys.CHOICE_GROUPS:
        node = cfg.get(group)
        name = node.get("name") if isinstance(node, DictConfig) else node
        name = name if name is not None else choices.get(group)
        if name is not None:
            out[group] = str(name)
    for key in keys.TOP_LEVEL_PARAMS:
        _walk_params(cfg, raw.get(key), key, out, reference=_ALL)
    for group in keys.CHOICE_GROUPS:
        if not isinstance(raw.get(group), dict):
            continue
        reference: Any = _ALL
        if group not in keys.HYPERPARAMETER_GROUPS:
            if group not in out:  # a group without a name key, outside a Hydra job
                option = _closest_option(group, raw[group])
                if option is not None:
                    out[group] = option
            found = _option_file(group, out.get(group))
            reference = _ALL if found is None else found
        _walk_params(cfg, raw[group], group, out, reference)
    return out


def _walk_params(
    cfg: DictConfig, node: Any, path: str, out: dict[str, str], reference: Any, depth: int = 0
) -> None:
    """Leaves of the unresolved ``node`` at ``path`` -> resolved param strings (see run_params)."""
    if node is None and depth == 0:
        return
    if isinstance(node, dict) and node:
        for k, v in node.items():
            if k in META_KEYS and (depth == 0 or k.startswith("_")):
                continue
            ref = (
                reference.get(k, _MISSING)
                if isinstance(reference, dict)
                else (_ALL if reference is _ALL else _MISSING)
            )
            _walk_params(cfg, v, f"{path}.{k}", out, ref, depth + 1)
        return
    if path in keys.MACHINE_KEYS or _refers_to_node(node):
        return
    if reference is not _ALL and reference is not _MISSING and reference == node:
        return  # the chosen option's own value: its name stands for it
    value = OmegaConf.select(cfg, path, throw_on_resolution_failure=False)
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    out[sanitize_key(path)] = text[:MAX_PARAM_LEN]


_MISSING = object()  # no such key in the option's file: the value is logged
_ALL = object()  # no reference at all (hyperparameter groups): every value is logged


def _refers_to_node(value: Any) -> bool:
    """``${a.b}`` (another key's value, logged there) but not ``${oc.env:X}`` (a resolver)."""
    return isinstance(value, str) and re.fullmatch(r"\$\{[\w.\[\]]+\}", value) is not None


def _option_file(group: str, option: str | None) -> dict[str, Any] | None:
    """The raw content of ``conf/<group>/<option>.yaml`` (None when not found: every value is
    then logged). Looked up in the running Hydra app's config sources, else beside the package."""
    if not option:
        return None
    for root in _config_roots():
        path = root / group / f"{option}.yaml"
        if path.is_file():
            data = _option_content(path)
            if isinstance(data, dict):
                data = {k: v for k, v in data.items() if k != "defaults"}
                return cast(dict[str, Any], data)
    return None


def _option_content(path: Path) -> Any:
    """The raw content of an option file, read once per process and version of the file (a
    sweep's jobs log the same options); callers only read it."""
    stat = path.stat()
    return _read_option(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=256)
def _read_option(path: str, mtime_ns: int, size: int) -> Any:
    return OmegaConf.to_container(OmegaConf.load(path), resolve=False)


def _closest_option(group: str, node: dict[str, Any]) -> str | None:
    """The option of ``group`` whose file has the most values in common with ``node``."""
    best, best_score = None, 0
    for root in _config_roots():
        for path in sorted((root / group).glob("*.yaml")) if (root / group).is_dir() else []:
            data = _option_content(path)
            if isinstance(data, dict):
                score = sum(1 for k, v in node.items() if data.get(k, _MISSING) == v)
                if score > best_score:
                    best, best_score = path.stem, score
        if best is not None:
            return best
    return best


def _config_roots() -> list[Path]:
    """Folders holding ``<group>/<option>.yaml``: the running Hydra app's, then the package's."""
    roots: list[Path] = []
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            sources: Any = HydraConfig.get().runtime.config_sources  # config nodes, not dataclasses
            for source in sources:
                if str(source.get("schema")) == "file" and source.get("provider") == "main":
                    roots.append(Path(str(source.get("path"))))
    except Exception:  # noqa: BLE001 - fall back to the package's own tree
        pass
    roots += [_PACKAGE_DIR / "conf", _PACKAGE_DIR.parent / "conf"]
    return roots
