"""Results bundles: one ledger invocation's tables and provenance, kept in the repository.

A bundle is the folder ``<bundles_dir>/<scale>/<invocation>-<key[:12]>/`` (``bundles_dir``:
``experiment.bundles_dir``, ``docs/results/bundles`` at full scale) holding

- the invocation's CSV tables (the top-level ``*.csv`` its experiment wrote, each under
  :data:`MAX_FILE_BYTES`; never models, data or figures),
- ``provenance.json``: the invocation (name, experiment, scale, seed, overrides, the resolved
  spec), its results key and ``inputs``, the readable record the key hashes (the deciding
  options, overrides and the sha256 of every data file: :mod:`~ltr_bench.experiments.results_key`),
  the command, the git commit, when it started and its wall time, the machine and each table's
  size and sha256,
- ``claims.md``: the verdicts of the claims that read the invocation, as a generated page.

The ledger looks for a bundle made with the invocation's inputs before anything else (before the
MLflow store, before running), so a fresh clone re-judges every claim from the committed bundles
without training; a bundle of the same invocation made with other inputs is stale, never used,
and the ledger names the inputs that differ. A bundle is verified before use: a folder whose
``provenance.json`` is unreadable, whose recorded key does not match its folder or its recorded
inputs, whose table differs from its sha256 or which holds a file of another kind stops the ledger
with one sentence naming the file.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltr_bench.errors import UserError
from ltr_bench.experiments.results_key import differences, results_key

FORMAT = 2
PROVENANCE = "provenance.json"
PAGE = "claims.md"
#: A bundle stays small: no file over 1 MB, and only tables and text.
MAX_FILE_BYTES = 1_000_000
SUFFIXES = (".csv", ".md", ".json")
REQUIRED = (
    "format",
    "name",
    "experiment",
    "scale",
    "seed",
    "key",
    "inputs",
    "command",
    "overrides",
    "forwarded",
    "spec",
    "git_commit",
    "started",
    "wall_s",
    "machine",
    "files",
)
REKEY = "python -m ltr_bench.experiments.ledger.rekey"


@dataclass(frozen=True)
class Bundle:
    """A verified bundle: its folder and its ``provenance.json``."""

    path: Path
    record: dict[str, Any]

    def shown(self) -> str:
        """The folder as a reader finds it: relative to the current directory when inside it."""
        try:
            return self.path.resolve().relative_to(Path.cwd().resolve()).as_posix()
        except ValueError:
            return str(self.path)

    def summary(self) -> str:
        """``bundle <folder>, <start, UTC>, <minutes> min, commit <10 hex digits>``."""
        parts = [f"bundle {self.shown()}", str(self.record["started"])]
        minutes = float(self.record["wall_s"]) / 60
        parts.append(f"{minutes:.0f} min" if minutes >= 1 else f"{minutes * 60:.0f} s")
        commit = str(self.record.get("git_commit") or "")
        if commit and commit != "unknown":
            parts.append(f"commit {commit[:10]}")
        return ", ".join(parts)


def configured_folder(value: Any, cwd: Path) -> Path | None:
    """A folder setting (``experiment.bundles_dir``, ``experiment.work_dir``) as a path (relative:
    to the directory ltr-bench started in); None when it is null."""
    if value is None or str(value).strip() in ("", "None", "null"):
        return None
    path = Path(str(value)).expanduser()
    return path if path.is_absolute() else cwd / path


def folder(root: Path, scale: str, name: str, key: str) -> Path:
    return root / scale / f"{name}-{key[:12]}"


def _fail(path: Path, problem: str) -> UserError:
    return UserError(
        f"results bundle {path}: {problem}; restore the bundle from git "
        f"(git checkout -- {path.parent}) or delete its folder to measure it again"
    )


def load_record(where: Path) -> dict[str, Any]:
    """The checked ``provenance.json`` of the bundle folder ``where``: every field there, of its
    type, its key the hash of its recorded inputs and its folder named after both; else a
    :class:`UserError` naming the file."""
    prov = where / PROVENANCE
    try:
        record = json.loads(prov.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _fail(prov, "the file is missing") from None
    except (OSError, ValueError) as exc:
        raise _fail(prov, f"not readable as JSON ({exc})") from None
    if not isinstance(record, dict) or any(k not in record for k in REQUIRED):
        missing = [k for k in REQUIRED if not isinstance(record, dict) or k not in record]
        if isinstance(record, dict) and record.get("format") == 1:
            raise _fail(prov, f"format 1 predates the results key; re-key it with `{REKEY}`")
        raise _fail(prov, f"fields {missing} are missing")
    types: dict[str, type | tuple[type, ...]] = {
        "files": dict,
        "spec": dict,
        "inputs": dict,
        "forwarded": list,
        "overrides": list,
        "machine": dict,
        "seed": int,
        "wall_s": (int, float),
    }
    wrong = [k for k, t in types.items() if not isinstance(record[k], t)]
    if not wrong:
        wrong = [name for name, f in record["files"].items() if not isinstance(f, dict)]
    if wrong:
        raise _fail(prov, f"fields {wrong} have the wrong type")
    if record["format"] != FORMAT:
        raise _fail(prov, f"format {record['format']} is not this ledger's format {FORMAT}")
    name, scale, key = str(record["name"]), str(record["scale"]), str(record["key"])
    if (where.name, where.parent.name) != (f"{name}-{key[:12]}", scale):
        raise _fail(
            prov,
            f"it records invocation {name} (scale={scale}, key {key}), not the one its folder "
            f"{where.parent.name}/{where.name} names",
        )
    recomputed = results_key(record["inputs"])
    if recomputed != key:
        raise _fail(prov, f"its recorded inputs give key {recomputed}, not the recorded {key}")
    return record


def read_bundle(root: Path, scale: str, name: str, key: str) -> Bundle | None:
    """The verified bundle of this invocation and key, None when there is none; a bundle that is
    corrupt or does not match its key raises :class:`UserError` naming the file."""
    where = folder(root, scale, name, key)
    if not where.is_dir():
        return None
    record = load_record(where)
    _check_files(where, record)
    return Bundle(where, record)


@dataclass(frozen=True)
class Lookup:
    """What the bundles of a scale hold for an invocation: the bundle made with the same inputs
    (verified), else why each bundle of the invocation's name is stale."""

    bundle: Bundle | None
    stale: tuple[str, ...] = ()


def find_bundle(root: Path, scale: str, name: str, inputs: dict[str, Any]) -> Lookup:
    """The bundle of ``root/scale`` made with ``inputs`` (of this invocation's name first, else
    of another name: a part two runs share), compared input by input, so that a dataset absent
    here is matched by the rest; else the differences of the bundles of this name. A stale bundle
    is never used."""
    base = root / scale
    found = (
        sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))
        if (base.is_dir())
        else []
    )
    records = [(p, load_record(p)) for p in found]
    same = [(p, r) for p, r in records if not differences(r["inputs"], inputs)]
    same.sort(key=lambda pr: pr[1]["name"] != name)
    if same:
        where, record = same[0]
        _check_files(where, record)
        return Lookup(Bundle(where, record))
    stale = tuple(
        f"bundle {p.name} is stale: made with " + "; ".join(differences(r["inputs"], inputs))
        for p, r in records
        if r["name"] == name
    )
    return Lookup(None, stale)


def _check_files(where: Path, record: dict[str, Any]) -> None:
    from ltr_bench.data.cache import sha256_file

    files = record["files"]
    for entry in sorted(where.iterdir()):
        if entry.name in (PROVENANCE, PAGE):
            continue
        if entry.name not in files:
            raise _fail(entry, f"not listed in {PROVENANCE} (a bundle holds only its tables)")
    for name, facts in files.items():
        path = where / name
        if not path.is_file():
            raise _fail(path, f"the table is missing ({PROVENANCE} lists it)")
        if sha256_file(path) != facts.get("sha256"):
            raise _fail(path, f"the table differs from its sha256 in {PROVENANCE}")


def machine_facts() -> dict[str, Any]:
    """The machine without importing torch: OS, CPU, cores, memory, package versions."""
    import platform

    from ltr_bench.machine import facts as machine

    memory = machine.memory_bytes()
    return {
        "os": f"{platform.system()} {platform.release()}",
        "cpu_model": machine.cpu_model(),
        "cpus_logical": os.cpu_count() or 0,
        "cpus_physical": machine.physical_cores() or 0,
        "memory_gib": round(memory / 2**30, 1) if memory else 0,
        "versions": machine.package_versions(),
    }


def write_bundle(
    root: Path,
    record: dict[str, Any],
    tables: dict[str, Path],
) -> Bundle:
    """Copy ``tables`` (name -> local CSV file) and write ``provenance.json`` (``record`` plus
    the tables' sizes and sha256) into the invocation's bundle folder, in one rename: an
    interrupted write leaves no half bundle. A table over :data:`MAX_FILE_BYTES` is left out and
    listed under ``left_out``."""
    from ltr_bench.data.cache import sha256_file

    where = folder(root, str(record["scale"]), str(record["name"]), str(record["key"]))
    tmp = where.parent / f".{where.name}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    files: dict[str, Any] = {}
    left_out: dict[str, int] = {}
    for name, src in sorted(tables.items()):
        size = src.stat().st_size
        if not name.endswith(".csv") or size > MAX_FILE_BYTES:
            left_out[name] = size
            continue
        shutil.copyfile(src, tmp / name)
        files[name] = {"bytes": size, "sha256": sha256_file(tmp / name)}
    full = {"format": FORMAT, **record, "files": files, "left_out": left_out}
    (tmp / PROVENANCE).write_text(
        json.dumps(full, indent=1, sort_keys=True, default=str) + "\n", encoding="utf-8"
    )
    if where.exists():  # outputs are never overwritten (the ledger read every bundle first)
        shutil.rmtree(tmp)
        raise UserError(f"results bundle {where} appeared while its invocation ran; keep one")
    os.replace(tmp, where)
    return Bundle(where, full)


def write_page(bundle: Bundle, body: str) -> Path:
    """``claims.md`` of the bundle: a generated page, its provenance, then ``body``."""
    from ltr_bench.provenance import GENERATED_MARK, machine_paths_out

    r = bundle.record
    m = r["machine"]
    machine = f"{m.get('cpus_logical')} cores, {m.get('cpu_model')}, {m.get('os')}" + (
        f" ({m['note']})" if m.get("note") else ""
    )
    data = (
        ", ".join(
            f"{ds} ({len(f)} files, sha256 in provenance.json)" if isinstance(f, dict) else ds
            for ds, f in r["inputs"]["data"].items()
        )
        or "generated from the spec's parameters and the seed"
    )
    rows = [
        ("command", f"`{machine_paths_out(str(r['command']))}`"),
        ("git commit", f"`{r['git_commit']}`"),
        ("machine", machine),
        ("date", str(r["started"])),
        ("wall time", f"{float(r['wall_s']):.1f} s"),
        ("invocation key", f"`{r['key']}`"),
        ("measured by", str(r.get("source", ""))),
        ("data", data),
        ("tables", ", ".join(f"`{n}`" for n in r["files"]) or "none"),
    ]
    table = "| | |\n| --- | --- |\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    text = (
        f"{GENERATED_MARK}\n# Bundle {r['name']} (scale={r['scale']})\n\n{table}\n\n"
        f"{body.rstrip()}\n"
    )
    page = bundle.path / PAGE
    page.write_text(text, encoding="utf-8")
    return page
