"""The datasets an experiment reads, and the sha256 of their files: what the results key holds
of the data instead of its paths (a moved data folder keeps the key, an edited file changes it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltr_bench.experiments.results_key import LOCATION_OVERRIDES, override_key


@dataclass(frozen=True)
class DataSelection:
    """A dataset config and the ``dataset.*`` overrides that say where its files are."""

    config: str
    overrides: tuple[str, ...] = ()


def _strings(data: Any) -> Iterable[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, Mapping):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, (list, tuple)):
        for value in data:
            yield from _strings(value)


def datasets_read(spec: Mapping[str, Any], overrides: Sequence[str] = ()) -> list[DataSelection]:
    """The datasets an experiment invocation reads: the spec's ``datasets`` list and every
    ``dataset=<config>`` override in its spec or on its command line, each with the location
    overrides (``dataset.path=...``, ``dataset.root=...``) given with them."""
    found: list[str] = [str(d) for d in (spec.get("datasets") or [])]
    location: list[str] = []
    for text in [*_strings(spec), *overrides]:
        key = override_key(text) if "=" in text else ""
        if key == "dataset":
            found.append(text.split("=", 1)[1].strip())
        elif key in LOCATION_OVERRIDES:
            location.append(text.lstrip("+~"))
    names = list(dict.fromkeys(found))
    return [DataSelection(n, tuple(dict.fromkeys(location))) for n in names]


def data_fingerprints(
    selections: Sequence[DataSelection], memo: dict[DataSelection, Any] | None = None
) -> dict[str, Any]:
    """Per dataset config the sha256 of each file it reads (relative to its folder, through the
    data cache's memo), ``{"generated": ...}`` for data made from parameters, ``None`` for a
    dataset absent here. ``memo``: fingerprints already taken by the caller (filled in)."""
    memo = {} if memo is None else memo
    for sel in selections:
        if sel not in memo:
            memo[sel] = _fingerprint(sel)
    return {sel.config: memo[sel] for sel in selections}


def _fingerprint(sel: DataSelection) -> Any:
    """One dataset's file digests (see :func:`data_fingerprints`)."""
    from hydra.utils import instantiate

    from ltr_bench.data.cache import file_sha256, resolve_cache_dir
    from ltr_bench.experiments.run_configs import compose_run_config

    cfg = compose_run_config([f"dataset={sel.config}", *sel.overrides])
    try:
        data = instantiate(cfg.dataset, _convert_="all")
    except Exception:  # noqa: BLE001 - Hydra wraps the data layer's UserError
        return None
    base = getattr(data, "path", None)
    if base is None:
        return {"generated": str(data.describe())}
    cache = resolve_cache_dir(getattr(data, "cache_dir", None))
    files = sorted(Path(base).glob("Fold*/*.txt"))
    return {p.relative_to(base).as_posix(): file_sha256(p, cache) for p in files}
