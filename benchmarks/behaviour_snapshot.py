"""Record what a fixed set of runs computes, so a refactoring can be shown to change nothing.

The set: every model on MQ2008 Fold1, a 4-trial DirectRanker sweep on that fold and its refit,
and `ltr-bench-predict` on Fold1's test file with the DirectRanker run's model. The snapshot keeps
every number those commands report (metrics at full float precision, the sweep's trial values and
chosen parameters, a SHA-256 of the prediction files) and drops what differs from run to run
(times, run ids, paths).

Two snapshots are the same when every number agrees to an absolute 1e-9 (NaN equals NaN) and
everything else (names, hashes, counts) is equal. The committed snapshot,
`benchmarks/behaviour_snapshot.json`, is what the working tree must compute; a deliberate change
of numbers re-baselines it in the commit that makes the change, and says why.

    python benchmarks/behaviour_snapshot.py --check                  # the tree vs the committed one
    python benchmarks/behaviour_snapshot.py --out benchmarks/behaviour_snapshot.json  # re-baseline
    python benchmarks/behaviour_snapshot.py --compare before.json after.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

MODELS = [
    "direct_ranker",
    "ranknet",
    "listnet",
    "listnet_star",
    "lambdarank",
    "lambdamart",
    "adarank",
    "sortnet",
    "ranksvm",
    "attention_ranker",
    "dasalc",
]
BIN = Path(sys.executable).parent
COMMITTED = Path(__file__).with_suffix(".json")
#: numbers of two snapshots are the same when they differ by at most this much (absolute)
TOLERANCE = 1e-9


def _run(args: list[str], cwd: Path) -> str:
    """Run a console script in `cwd`; fail loudly with its output."""
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def _numbers(results: dict) -> dict:
    """The part of a results.json that a refactoring must not change."""
    folds = [
        {k: fold[k] for k in ("name", "metrics", "n_train_queries", "n_test_queries")}
        for fold in results["folds"]
    ]
    return {
        "objective": results["objective"],
        "mean": results["mean"],
        "se": results["se"],
        "folds": folds,
    }


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(work: Path, data_root: Path) -> dict:
    """Run the fixed set in `work` (a scratch folder with its own MLflow store)."""
    common = ["dataset=mq2008", "dataset.fold=1", f"dataset.root={data_root}"]
    out: dict = {"runs": {}}
    model_uri = None
    for model in MODELS:
        run_dir = work / "runs" / model
        _run([str(BIN / "ltr-bench"), f"model={model}", *common, f"hydra.run.dir={run_dir}"], work)
        results = json.loads((run_dir / "results.json").read_text())
        out["runs"][model] = _numbers(results)
        if model == "direct_ranker":
            model_uri = results["folds"][0]["model_uri"]
        print(f"{model}: test ndcg@10 {results['mean']['test']['ndcg@10']:.6f}", flush=True)
    sweep_dir = work / "sweep"
    _run(
        [
            str(BIN / "ltr-bench"),
            "-m",
            "search=direct_ranker",
            *common,
            "hydra.sweeper.n_trials=4",
            "hydra.sweeper.reevaluate.top_k=2",
            f"hydra.sweep.dir={sweep_dir}",
        ],
        work,
    )
    opt = (sweep_dir / "optimization_results.yaml").read_text()
    out["sweep"] = {"optimization_results": _sweep_summary(opt)}
    refit_dir = work / "refit"
    _run([str(BIN / "ltr-bench"), f"refit_best={sweep_dir}", f"hydra.run.dir={refit_dir}"], work)
    out["refit"] = _numbers(json.loads((refit_dir / "results.json").read_text()))
    print(f"sweep + refit: test ndcg@10 {out['refit']['mean']['test']['ndcg@10']:.6f}", flush=True)
    pred_dir = work / "predict"
    _run(
        [
            str(BIN / "ltr-bench-predict"),
            str(model_uri),
            str(data_root / "MQ2008" / "Fold1" / "test.txt"),
            "--out",
            str(pred_dir),
        ],
        work,
    )
    out["predict"] = {p.name: _sha256(p) for p in sorted(pred_dir.iterdir())}
    return out


def _sweep_summary(text: str) -> dict:
    """The sweep's optimization_results.yaml without the study's names and paths (they hold the
    data root and the scratch folder)."""
    summary = yaml.safe_load(text)
    for key in ("study_name", "storage", "dashboard", "artifacts_dir"):
        summary.pop(key, None)
    return summary


def _load(path: Path) -> dict:
    snap = json.loads(path.read_text())
    sweep = snap.get("sweep", {})
    if "optimization_results.yaml" in sweep:  # older snapshots kept the summary as YAML text
        sweep["optimization_results"] = _sweep_summary(sweep.pop("optimization_results.yaml"))
    return snap


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _scratch(text: str) -> str:
    """``text`` with a snapshot's scratch folder (a temporary directory) written as ``<work>``."""
    return re.sub(r"/tmp/tmp[^/]+", "<work>", text)


def compare(a: Path, b: Path) -> int:
    """Print where two snapshots differ; exit status 0 when they are the same (numbers to an
    absolute :data:`TOLERANCE`, NaN equal to NaN, all else equal)."""
    left, right = _load(a), _load(b)
    diffs: list[str] = []
    largest, n_inexact = 0.0, 0

    def walk(x: object, y: object, where: str) -> None:
        nonlocal largest, n_inexact
        if isinstance(x, dict) and isinstance(y, dict):
            for key in sorted(set(x) | set(y)):
                walk(x.get(key), y.get(key), f"{where}/{key}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{where}[{i}]")
        elif isinstance(x, str) and isinstance(y, str):
            if _scratch(x) != _scratch(y):
                diffs.append(f"{where}: {x!r} != {y!r}")
        elif _is_number(x) and _is_number(y):
            if x == y or (math.isnan(x) and math.isnan(y)):
                return
            gap = abs(x - y)
            if not gap <= TOLERANCE:  # also NaN against a number
                diffs.append(f"{where}: {x!r} != {y!r}")
                return
            largest, n_inexact = max(largest, gap), n_inexact + 1
        elif x != y:
            diffs.append(f"{where}: {x!r} != {y!r}")

    walk(left, right, "")
    for line in diffs:
        print(line)
    print(
        f"{n_inexact} numbers differ within {TOLERANCE:g}, the largest by {largest:.3g}; "
        + ("the same" if not diffs else f"{len(diffs)} differences")
    )
    return 0 if not diffs else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="write the snapshot here")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("A", "B"))
    parser.add_argument(
        "--check",
        nargs="?",
        const=COMMITTED,
        type=Path,
        metavar="SNAPSHOT",
        help=f"take a snapshot and compare it with SNAPSHOT (default {COMMITTED.name})",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("LTR_DATA", Path(__file__).parents[2] / "shared/data/letor")),
        help="the LETOR data root (default: $LTR_DATA or ../shared/data/letor)",
    )
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if not args.out and not args.check:
        parser.error("give --out, --check or --compare")
    with tempfile.TemporaryDirectory() as tmp:
        env_threads = {"OMP_NUM_THREADS": "1"}
        os.environ.update(env_threads)
        result = snapshot(Path(tmp), args.data.resolve())
        out = args.out or Path(tmp) / "snapshot.json"
        out.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
        print(f"snapshot: {out}")
        return compare(args.check, out) if args.check else 0


if __name__ == "__main__":
    sys.exit(main())
