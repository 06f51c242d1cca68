"""Shared cache of preprocessed splits: fit the transform of a split once, reuse it everywhere.

Every trial of a sweep cuts the same inner folds (``protocol.split_seed``), so without this cache
each trial refits the quantile transform on each inner fold and re-transforms its features. An
entry holds, for one (input data, preprocessing config) pair, the fitted preprocessing object and
the preprocessed parts (train / vali / test), and is reused by every later trial, refit and worker
process on the machine.

Layout, beside the parse cache (:mod:`ltr_bench.data.cache`, same root: ``dataset.cache_dir`` >
``$LTR_CACHE`` > ``~/.cache/ltr_bench``)::

    <root>/prepared/<key>/{train,vali,test}.{features,labels,qid,offsets[,docids]}.npy
                          preprocessing.<array>.npy (the fitted arrays)  meta.json

Key: sha256 over the **content of the input parts** (features, labels, query structure) and
the preprocessing config (JSON, sorted keys), so a
different dataset version, split, seed or option can never hit a stale entry, and identical inputs
hit the same entry whichever protocol or process produced them. Arrays are read back
memory-mapped (copy-on-write: shared through the page cache between parallel workers, and a
consumer's write never reaches the file). ``meta.json``
stores the preprocessing's options (JSON; nothing is pickled, so an entry is data, never code)
and the sha256 of every array; an entry whose arrays do not match (edited, truncated) is reported
with a warning and recomputed. As for the parse cache's source files, a verification is memoised in
``verified.json`` by the files' (size, mtime_ns, inode), so a hit does not re-hash gigabytes;
``LTR_CACHE_VERIFY=1`` re-hashes on every load. Writes are atomic (:class:`ArrayCache`). ``LTR_CACHE=off`` turns
this cache off with the parse cache; ``LTR_TRANSFORM_CACHE=off`` turns off only this one.

Data with no parse cache (generated data) is not written to disk: :func:`remembered_preprocessing`
keeps its last entries in the process instead (same key), so a sweep worker's later trials reuse
the inner folds its first trial preprocessed.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import warnings
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.data.cache import VERIFY_ENV, ArrayCache, resolve_cache_dir
from ltr_bench.data.queryset import QuerySet

NAMESPACE = "prepared"
ENV = "LTR_TRANSFORM_CACHE"
FORMAT = 2  # 2: the fitted preprocessing as options + arrays (1 pickled it)
_FIELDS = ("features", "labels", "qid", "offsets", "docids")
_OFF = {"off", "none", "0", "false", "no"}
VERIFIED = "verified.json"

Parts = Sequence[tuple[str, QuerySet | None]]
Computed = tuple[list[QuerySet | None], Any]


def entry_key(config: Mapping[str, Any], parts: Parts) -> str:
    """The entry key of ``parts`` (role, input data) preprocessed with ``config``."""
    h = hashlib.sha256()
    h.update(
        json.dumps({"format": FORMAT, "config": dict(config)}, sort_keys=True, default=str).encode()
    )
    for role, data in parts:
        h.update(f"|{role}:".encode())
        if data is None:
            h.update(b"-")
            continue
        for arr in (data.features, data.labels, data.qid, data.offsets):
            h.update(f"{arr.dtype.str}{arr.shape}".encode())
            h.update(np.ascontiguousarray(arr).data.cast("B"))  # no copy of a C-order array
    return h.hexdigest()[:32]


def enabled() -> bool:
    """False when ``$LTR_TRANSFORM_CACHE`` is off/none/0/false/no."""
    return os.environ.get(ENV, "").strip().lower() not in _OFF


def array_sha256(arr: np.ndarray) -> str:
    """sha256 of an array's bytes (C order); reads a memory map without copying it."""
    return hashlib.sha256(np.ascontiguousarray(arr).data.cast("B")).hexdigest()


def cached_preprocessing(
    config: Mapping[str, Any],
    parts: Parts,
    compute: Callable[[], Computed],
    cache_dir: str | os.PathLike | None = None,
) -> tuple[list[QuerySet | None], Any, str]:
    """``compute()`` -> (preprocessed parts in the order of ``parts``, fitted preprocessing), read
    from the cache when an entry for (``config``, ``parts``) exists and verifies, else computed and
    stored. Returns ``(parts, preprocessing, status)`` with status ``hit``, ``miss`` or ``off``."""
    root = resolve_cache_dir(cache_dir) if enabled() else None
    if root is None:
        out, pre = compute()
        return out, pre, "off"
    cache = ArrayCache(root, NAMESPACE)
    key = entry_key(config, parts)
    loaded = _load(cache, key, [r for r, _ in parts])
    if loaded is not None:
        return loaded[0], loaded[1], "hit"
    out, pre = compute()
    _store(cache, key, [r for r, _ in parts], out, pre, config)
    return out, pre, "miss"


#: bytes of preprocessed data :func:`remembered_preprocessing` keeps per process, at most
MEMORY_BYTES = 256 << 20
_remembered: OrderedDict[str, Computed] = OrderedDict()


def remembered_preprocessing(
    config: Mapping[str, Any], parts: Parts, compute: Callable[[], Computed]
) -> tuple[list[QuerySet | None], Any, str]:
    """:func:`cached_preprocessing` for data without a cache folder, kept in this process: its
    most recent entries, :data:`MEMORY_BYTES` in all (larger inputs are computed each time).
    Every caller gets its own copies, so one that writes into its arrays changes no other's."""
    if not enabled() or sum(_nbytes(data) for _, data in parts) > MEMORY_BYTES:
        out, pre = compute()
        return out, pre, "off"
    key = entry_key(config, parts)
    if key in _remembered:
        _remembered.move_to_end(key)
        return _copies(_remembered[key]) + ("hit",)
    computed = compute()
    _remembered[key] = _copies(computed)
    while sum(_nbytes(q) for out, _ in _remembered.values() for q in out) > MEMORY_BYTES:
        _remembered.popitem(last=False)  # the oldest first; the newest, if alone too large
    return computed[0], computed[1], "miss"


def _copies(computed: Computed) -> tuple[list[QuerySet | None], Any]:
    out, pre = computed
    return [None if q is None else _copy(q) for q in out], copy.deepcopy(pre)


def _copy(data: QuerySet) -> QuerySet:
    return QuerySet(
        data.features.copy(),
        data.labels.copy(),
        data.qid.copy(),
        data.offsets.copy(),
        None if data.docids is None else data.docids.copy(),
        copy.deepcopy(data.source),
    )


def _nbytes(data: QuerySet | None) -> int:
    if data is None:
        return 0
    return sum(a.nbytes for a in (getattr(data, n) for n in _FIELDS) if a is not None)


# ------------------------------------------------------------------ entries
def _store(
    cache: ArrayCache,
    key: str,
    roles: list[str],
    out: list[QuerySet | None],
    pre: Any,
    config: Mapping[str, Any],
) -> bool:
    arrays: dict[str, np.ndarray] = {}
    sources: dict[str, Any] = {}
    for role, data in zip(roles, out):
        if data is None:
            continue
        for name in _FIELDS:
            arr = getattr(data, name)
            if arr is None:
                continue
            if arr.dtype.kind == "O":  # object arrays cannot be memory-mapped: do not cache
                return False
            arrays[f"{role}.{name}"] = arr
        sources[role] = data.source
    state = getattr(pre, "state", None)
    if not callable(state):  # a preprocessing that cannot describe itself is simply not cached
        return False
    pre_options, pre_arrays = state()
    arrays.update({f"preprocessing.{name}": arr for name, arr in pre_arrays.items()})
    meta = {
        "format": FORMAT,
        "roles": roles,
        "present": [r for r, d in zip(roles, out) if d is not None],
        "sources": sources,
        "config": dict(config),
        "preprocessing": {
            "class": f"{type(pre).__module__}.{type(pre).__qualname__}",
            "options": pre_options,
        },
        "sha256": {name: array_sha256(arr) for name, arr in arrays.items()},
    }
    if not cache.store(key, arrays, meta):
        return False
    _remember_verified(cache.entry_dir(key))  # just written from these very arrays
    return True


def _load(
    cache: ArrayCache, key: str, roles: list[str]
) -> tuple[list[QuerySet | None], Any] | None:
    entry = cache.entry_dir(key)
    if not entry.is_dir():
        return None
    got = _open(entry)
    problem = None
    if got is None:
        problem = "unreadable"
    else:
        arrays, meta = got
        sums = meta.get("sha256")
        if meta.get("format") != FORMAT or meta.get("roles") != roles or not isinstance(sums, dict):
            problem = "incomplete"
        else:
            if not _verified_before(entry):
                bad = [n for n in meta["arrays"] if sums.get(n) != array_sha256(arrays[n])]
                if bad:
                    problem = f"checksum mismatch in {', '.join(bad)}"
                else:
                    _remember_verified(entry)
    if problem is None:
        try:
            pre = _preprocessing(arrays, meta)
            out = [
                _queryset(arrays, role, meta) if role in meta["present"] else None for role in roles
            ]
            return out, pre
        except Exception as exc:  # noqa: BLE001 - anything odd in an entry means: recompute
            problem = f"undecodable ({exc.__class__.__name__})"
    warnings.warn(f"preprocessing cache entry {entry} is {problem}; recomputing it", stacklevel=3)
    shutil.rmtree(entry, ignore_errors=True)
    return None


def _open(entry: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """An entry's arrays, memory-mapped copy-on-write (writable to NumPy and torch, which warns on
    read-only arrays, while the file and the shared page cache stay untouched), and its meta."""
    try:
        meta = json.loads((entry / "meta.json").read_text())
        arrays = {
            n: np.load(entry / f"{n}.npy", mmap_mode="c", allow_pickle=False)
            for n in meta["arrays"]
        }
    except (OSError, ValueError, KeyError):
        return None
    return arrays, meta


def _stamps(entry: Path) -> dict[str, list[int]]:
    """(size, mtime_ns, inode) of every file of an entry but the memo itself."""
    out = {}
    for f in sorted(entry.iterdir()):
        if f.name != VERIFIED and not f.name.startswith("."):
            st = f.stat()
            out[f.name] = [st.st_size, st.st_mtime_ns, st.st_ino]
    return out


def _verified_before(entry: Path) -> bool:
    """True when the entry's checksums were verified and no file changed since (the rule the
    parse cache uses for its source files; ``LTR_CACHE_VERIFY=1`` re-hashes every time)."""
    if os.environ.get(VERIFY_ENV, "").strip().lower() not in ("", *_OFF):
        return False
    try:
        return json.loads((entry / VERIFIED).read_text()) == _stamps(entry)
    except (OSError, ValueError):
        return False


def _remember_verified(entry: Path) -> None:
    try:
        tmp = entry / f".{VERIFIED}.{os.getpid()}"
        tmp.write_text(json.dumps(_stamps(entry)))
        os.replace(tmp, entry / VERIFIED)
    except OSError:
        pass


def _preprocessing(arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> Any:
    """The fitted preprocessing of an entry, rebuilt from its options and arrays."""
    from ltr_bench.data.transforms import Preprocessing

    spec = meta["preprocessing"]
    if spec.get("class") != f"{Preprocessing.__module__}.{Preprocessing.__qualname__}":
        raise ValueError(f"unknown preprocessing class {spec.get('class')!r}")
    prefix = "preprocessing."
    fitted = {n[len(prefix) :]: np.asarray(a) for n, a in arrays.items() if n.startswith(prefix)}
    return Preprocessing.from_state(spec["options"], fitted)


def _queryset(arrays: Mapping[str, np.ndarray], role: str, meta: Mapping[str, Any]) -> QuerySet:
    return QuerySet(
        arrays[f"{role}.features"],
        arrays[f"{role}.labels"],
        arrays[f"{role}.qid"],
        arrays[f"{role}.offsets"],
        arrays.get(f"{role}.docids"),
        dict(meta.get("sources", {}).get(role) or {}),
    )


__all__ = ["cached_preprocessing", "remembered_preprocessing", "entry_key", "NAMESPACE", "ENV"]
