"""Re-key results bundles whose key changed while what decides their results did not.

The key hashes the deciding inputs (:mod:`~ltr_bench.experiments.results_key`). When the key
itself changes -- an option moved between classes, a new field of the record -- a committed
bundle's folder and recorded key no longer match, though its tables are as valid as before. This
command recomputes each bundle's inputs from its recorded spec, overrides, seed and data digests,
compares them input by input with what the ledger would run now, and re-keys only a bundle whose
deciding inputs are all equal (its folder renamed, ``provenance.json`` rewritten, the old key
kept under ``previous_keys``). A bundle with any deciding difference is left as it is and named
with the difference: it is stale, and only running it again makes it current.

    python -m ltr_bench.experiments.ledger.rekey [--bundles docs/results/bundles] [--scale full]
        [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ltr_bench.config.util import plain
from ltr_bench.errors import UserError
from ltr_bench.experiments.ledger.bundles import FORMAT, PAGE, PROVENANCE, folder
from ltr_bench.experiments.ledger.spec import RunSpec, run_spec_config


def current_inputs(scale: str, seed: int = 0) -> dict[str, dict[str, Any]]:
    """Per ledger invocation (a run, or a part of one) the inputs it would run with now."""
    from ltr_bench.experiments.common import compose_run_config, invocation_inputs, scaled_spec
    from ltr_bench.experiments.ledger.spec import validate_ledger

    ledger = validate_ledger(scaled_spec(compose_run_config(["experiment=claims"]), scale), scale)
    memo: dict[Any, Any] = {}
    return {
        name: invocation_inputs(str(spec.name), scale, seed, spec, [], memo)
        for name, spec in ledger.specs.items()
    }


def recorded_inputs(record: dict[str, Any]) -> dict[str, Any]:
    """The deciding inputs of a bundle as the key classifies them now, from what it recorded: its
    resolved spec (classified by its experiment's current driver), overrides, seed and the
    sha256 of its data files."""
    from ltr_bench.experiments.common import compose_run_config
    from ltr_bench.experiments.fingerprints import datasets_read
    from ltr_bench.experiments.results_key import classes_of, results_inputs

    spec, forwarded = record["spec"], [str(o) for o in record["forwarded"]]
    driver = compose_run_config([f"experiment={record['experiment']}"]).experiment
    classes = classes_of({"_target_": driver._target_})
    digests: dict[str, Any] = {}
    for sel in datasets_read(spec, forwarded):
        if "inputs" in record:
            digests[sel.config] = record["inputs"]["data"][sel.config]
        else:  # format 1: {dataset: {folder, sha256: {file: digest}}}
            digests[sel.config] = record["data"][sel.config]["sha256"]
    return results_inputs(
        str(spec["name"]),
        str(record["scale"]),
        int(record["seed"]),
        spec,
        forwarded,
        digests,
        classes,
    )


def spec_changes(then: dict[str, Any], now_spec: dict[str, Any]) -> list[str]:
    """The options of a recorded spec that differ from the current one, with their classes: what
    re-keying leaves behind (execution and presentation options only, else it refuses)."""
    from ltr_bench.experiments.results_key import classes_of, leaf_paths

    classes = classes_of(now_spec)

    def at(data: Any, path: str) -> Any:
        for part in path.split("."):
            if not isinstance(data, dict) or part not in data:
                return "<absent>"
            data = data[part]
        return data

    paths = sorted(set(leaf_paths(then)) | set(leaf_paths(now_spec)))
    return [
        f"{p} ({classes.of(p) or 'unclassified'}): {at(then, p)!r} then, {at(now_spec, p)!r} now"
        for p in paths
        if at(then, p) != at(now_spec, p)
    ]


def rekey(root: Path, scale: str, dry_run: bool = False) -> list[str]:
    """Re-key every bundle of ``root/scale`` whose deciding inputs equal the ledger's; returns one
    line per bundle saying what was done (or why not)."""
    from ltr_bench.experiments.results_key import differences, results_key

    now = current_inputs(scale)
    lines = []
    for where in sorted(p for p in (root / scale).iterdir() if p.is_dir()):
        prov = where / PROVENANCE
        record = json.loads(prov.read_text(encoding="utf-8"))
        name = str(record["name"])
        if name not in now:
            lines.append(f"{where.name}: no invocation {name} in the ledger; left as it is")
            continue
        then = recorded_inputs(record)
        changed = differences(then, now[name])
        if changed:
            lines.append(f"{where.name}: stale, left as it is: {'; '.join(changed)}")
            continue
        key = results_key(then)
        if key == record["key"] and record.get("format") == FORMAT:
            lines.append(f"{where.name}: key {key} already current")
            continue
        run = RunSpec(name, str(record["experiment"]), tuple(record["overrides"]))
        current_spec = plain(run_spec_config(run, scale, 0, []))
        left = spec_changes(record["spec"], current_spec)
        target = folder(root, scale, name, key)
        lines.append(
            f"{where.name} -> {target.name}: key {record['key']} -> {key}; the deciding inputs "
            f"are equal; options that differ: {'; '.join(left) or 'none'}"
        )
        if dry_run:
            continue
        old = record["key"]
        record.update(
            format=FORMAT,
            key=key,
            inputs=then,
            previous_keys=[*record.get("previous_keys", []), old],
        )
        record.pop("data", None)
        prov.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        page = where / PAGE
        if page.is_file():
            page.write_text(page.read_text(encoding="utf-8").replace(old, key), encoding="utf-8")
        if target != where:
            os.replace(where, target)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ltr_bench.experiments.ledger.rekey",
        description="Re-key results bundles whose deciding inputs are unchanged.",
    )
    parser.add_argument("--bundles", default="docs/results/bundles", help="the bundles folder")
    parser.add_argument("--scale", default="full", help="the scale whose bundles to re-key")
    parser.add_argument("--dry-run", action="store_true", help="say what would change, only")
    args = parser.parse_args(argv)
    root = Path(args.bundles)
    if not (root / args.scale).is_dir():
        raise SystemExit(f"rekey: no folder {root / args.scale}")
    try:
        for line in rekey(root, args.scale, args.dry_run):
            print(line, flush=True)
    except UserError as exc:
        raise SystemExit(f"rekey: {exc}") from None
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
