"""Binary cache for parsed data files: write once, memory-map afterwards.

Layout under the cache root (``cache_dir`` argument > ``$LTR_CACHE`` > ``~/.cache/ltr_bench``;
never the data directory, which may be read-only or shared)::

    <root>/<namespace>/<key>/{features,labels,qid,offsets[,docids]}.npy + meta.json
    <root>/hashes/<hash of the file's real path>.json     (stat memo, see file_sha256)

Keying choice: an entry is keyed by the **sha256 of the file content** plus the parse options,
so a copied or moved file hits the same entry and an edited file never hits a stale one. To keep
later loads from re-reading a large file, the content hash is memoised per file under
``hashes/``, valid while the file's (size, mtime_ns, inode) are unchanged - the rule make and git
use. Hashing itself runs in 1 MiB chunks at ~1.5 GB/s (hashlib/OpenSSL), i.e. well under a
second per GB against ~40 s for parsing a GB of LETOR text; set ``LTR_CACHE_VERIFY=1`` to
re-hash on every load regardless of the memo.

Every entry's ``meta.json`` records the shape, dtype and CRC-32 of each array; a load checks them
before handing the arrays out (a zeroed or reversed ``features.npy``, an emptied ``labels.npy``, an
edited ``offsets.npy`` all fail), warns naming the entry (:class:`CacheWarning`) and treats it as a
miss, so the caller parses again and the new entry replaces the broken one.

Entries are written into a temporary directory next to their final place and renamed in one
step, so parallel processes never see (or corrupt) a half-written entry: the loser of a race
discards its copy and uses the winner's. ``LTR_CACHE=off`` disables caching.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
import warnings
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.config.cache_root import CACHE_ENV as CACHE_ENV
from ltr_bench.config.cache_root import OFF_VALUES as _OFF
from ltr_bench.config.cache_root import resolve_cache_dir as resolve_cache_dir

VERIFY_ENV = "LTR_CACHE_VERIFY"
_CHUNK = 1 << 20


def sha256_file(path: str | os.PathLike) -> str:
    """sha256 hex digest of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def file_sha256(path: str | os.PathLike, cache_root: Path | None = None) -> str:
    """Content hash of ``path``, memoised under ``cache_root/hashes`` by (size, mtime_ns, inode)."""
    path = Path(path).resolve()
    if cache_root is None:
        return sha256_file(path)
    st = path.stat()
    stamp = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}
    memo = cache_root / "hashes" / (hashlib.sha256(str(path).encode()).hexdigest()[:32] + ".json")
    verify = os.environ.get(VERIFY_ENV, "").strip().lower() not in ("", *_OFF)
    if not verify:
        try:
            rec = json.loads(memo.read_text())
            if rec.get("path") == str(path) and all(rec.get(k) == v for k, v in stamp.items()):
                return str(rec["sha256"])
        except (OSError, ValueError, KeyError):
            pass
    digest = sha256_file(path)
    _write_text_atomic(memo, json.dumps({"path": str(path), **stamp, "sha256": digest}))
    return digest


def options_key(options: Mapping[str, Any]) -> str:
    """A short stable hash of parse options (JSON with sorted keys)."""
    blob = json.dumps(dict(options), sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:12]


class ArrayCache:
    """A directory of named ``.npy`` array bundles, written atomically and read memory-mapped."""

    def __init__(self, root: Path, namespace: str) -> None:
        self.root = Path(root)
        self.dir = self.root / namespace

    def entry_dir(self, key: str) -> Path:
        return self.dir / key

    def load(
        self, key: str, verify: bool = True
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
        """The arrays (read-only memory maps) and meta of entry ``key``, or None on a miss.

        With ``verify`` every array's shape, dtype and CRC-32 are checked against the entry's
        ``meta.json``. A broken entry (unreadable array, mismatch) warns naming the entry
        (:class:`CacheWarning`) and counts as a miss, so the caller rebuilds and replaces it.
        """
        entry = self.entry_dir(key)
        try:
            meta = json.loads((entry / "meta.json").read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self._broken(entry, f"meta.json unreadable: {exc}")
            return None
        problem, arrays = _open_entry(entry, meta, verify)
        if problem is not None:
            self._broken(entry, problem)
            return None
        return arrays, meta

    def _broken(self, entry: Path, problem: str) -> None:
        warnings.warn(
            f"cache entry {entry} is broken ({problem}); parsing the file again and replacing it",
            CacheWarning,
            stacklevel=3,
        )
        return None

    def store(self, key: str, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> bool:
        """Write an entry atomically; returns False (with a warning) if the cache is unwritable."""
        final = self.entry_dir(key)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=self.dir))
        except OSError as exc:
            warnings.warn(
                f"cache dir {self.dir} is not writable ({exc}); not caching", stacklevel=3
            )
            return False
        try:
            for name, arr in arrays.items():
                np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
            full_meta = {
                **dict(meta),
                "arrays": list(arrays),
                "checksums": {name: array_checksum(a) for name, a in arrays.items()},
            }
            (tmp / "meta.json").write_text(json.dumps(full_meta, default=str))
            if final.exists() and not _entry_ok(final):  # a broken leftover: replace it
                shutil.rmtree(final, ignore_errors=True)
            os.rename(tmp, final)
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if _entry_ok(final):  # another process won the race: fine
                return True
            warnings.warn(f"could not write cache entry {final} ({exc}); not caching", stacklevel=3)
            return False
        return True


class CacheWarning(UserWarning):
    """A cache entry was broken (and is being rebuilt)."""


def array_checksum(arr: np.ndarray) -> dict[str, Any]:
    """Shape, dtype and CRC-32 of an array's bytes (C order): what an entry's meta records.

    CRC-32 (zlib) rather than a cryptographic hash: it guards against corruption (a zeroed,
    truncated or reordered array), not against an attacker, and keeps the verified reload of a
    large feature matrix cheap next to reading it.
    """
    a = np.ascontiguousarray(arr)
    crc = 0
    flat = a.reshape(-1).view(np.uint8) if a.size else np.zeros(0, np.uint8)
    for start in range(0, flat.size, 1 << 26):
        # numpy's stubs declare the buffer protocol for Python >= 3.12 only
        crc = zlib.crc32(flat[start : start + (1 << 26)], crc)  # type: ignore[arg-type]
    return {"shape": list(a.shape), "dtype": a.dtype.str, "crc32": crc}


def _open_entry(
    entry: Path, meta: Mapping[str, Any], verify: bool
) -> tuple[str | None, dict[str, np.ndarray]]:
    """``(problem or None, arrays)`` of an entry directory."""
    arrays: dict[str, np.ndarray] = {}
    try:
        names = list(meta["arrays"])
        sums = meta.get("checksums") or {}
        for name in names:
            arr = np.load(entry / f"{name}.npy", mmap_mode="r", allow_pickle=False)
            arrays[name] = arr
            if not verify:
                continue
            want = sums.get(name)
            if want is None:
                return f"{name}.npy has no checksum in meta.json", arrays
            got = array_checksum(arr)
            for field in ("shape", "dtype", "crc32"):
                if got[field] != want.get(field):
                    return f"{name}.npy: {field} {got[field]} != {want.get(field)}", arrays
    except (OSError, ValueError, KeyError, TypeError, EOFError) as exc:
        return f"unreadable: {type(exc).__name__}: {exc}", arrays
    return None, arrays


def _entry_ok(entry: Path) -> bool:
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return _open_entry(entry, meta, True)[0] is None


def _write_text_atomic(path: Path, text: str) -> None:
    """Best-effort atomic small-file write (temp file + os.replace); errors are ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(text)
        os.replace(tmp, path)
    except OSError:
        pass
