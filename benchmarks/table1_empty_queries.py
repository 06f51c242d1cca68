"""A Table 1 run's test metrics re-averaged as the authors' published scripts average them.

``eval=paper`` (the papers' text) leaves test queries without a relevant document out of the
mean; the authors' scripts keep them with NDCG and AP 0 (docs/concepts/configuration.md, "eval"). That second mean needs
no re-training: such a query contributes 0, so the mean over all test queries is exactly

    ours x (test queries kept / all test queries of the fold or split)

per refit (outer fold or hold-out split); the per-model mean(SE) is then taken over those. "All
test queries" is counted from the data: ``FoldK/test.txt`` for ``letor_folds``; for hold-out
splits, the dataset's queries minus the split's training part (``round(train_fraction x Q)``).
The authors' scripts also drop queries with fewer than 10 documents; this script does not.

    .venv/bin/python benchmarks/table1_empty_queries.py <table1 output folder> [--metrics ndcg@10 map]
"""

from __future__ import annotations

import argparse
import json
from functools import cache
from pathlib import Path

import numpy as np

from ltr_bench.data.datasets import LetorFolds
from ltr_bench.data.letor import load_letor
from ltr_bench.data.splits import holdout_splits
from ltr_bench.stats import format_mean_se, mean_se


def _dataset(spec: dict) -> LetorFolds:
    args = {k: v for k, v in spec.items() if k != "_target_"}
    return LetorFolds(**args)


@cache
def _n_test_queries(spec_json: str, fold: int | None, train_fraction: float | None) -> int:
    """All test queries of a LETOR fold (``fold``) or of a hold-out split of every query."""
    ds = _dataset(json.loads(spec_json))
    if fold is not None:
        return load_letor(
            ds.path / f"Fold{fold}" / "test.txt", ds.n_features, cache_dir=ds.cache_dir
        ).n_queries
    return len(holdout_splits(ds.load_all().n_queries, 1, float(train_fraction))[0][1])


def rescaled(
    result: dict, metrics: list[str]
) -> tuple[dict[str, float], dict[str, float], int, int]:
    """(ours, with empty queries at 0, kept, all) for one refit's ``results.json``."""
    config, fold = result["config"], result["folds"][0]
    protocol = config["protocol"]
    holdout = protocol["_target_"].endswith("HoldOut")
    spec = {k: v for k, v in config["dataset"].items() if k != "fold"}
    total = _n_test_queries(
        json.dumps(spec, sort_keys=True),
        None if holdout else int(config["dataset"]["fold"]),
        float(protocol["train_fraction"]) if holdout else None,
    )
    kept = int(fold["n_test_queries"])
    ours = {m: float(fold["metrics"]["test"][m]) for m in metrics}
    return ours, {m: v * kept / total for m, v in ours.items()}, kept, total


def _mean_se(values: list[float]) -> str:
    mean, se, _ = mean_se(values)
    return format_mean_se(mean, se)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("out", type=Path, help="the table1 experiment's output folder")
    ap.add_argument("--metrics", nargs="+", default=["ndcg@10", "map"])
    args = ap.parse_args()
    sweeps = sorted(
        {p.parents[3] for p in args.out.glob("sweeps/*/*/*/refit/*/seed0/results.json")}
    )
    if not sweeps:
        raise SystemExit(
            f"no sweeps/<variant>/<dataset>/<model>/refit/*/seed0/results.json under {args.out}"
        )
    head = "  ".join(f"{m + ' ours':>14}{m + ' empty=0':>16}" for m in args.metrics)
    print(f"{'variant':<16}{'dataset':<10}{'model':<14}{'n':>3}{'kept/all':>10}  {head}")
    for sweep in sweeps:
        variant, dataset, model = sweep.relative_to(args.out / "sweeps").parts
        rows = [
            rescaled(json.loads(p.read_text()), args.metrics)
            for p in sorted(sweep.glob("refit/*/seed0/results.json"))
        ]
        share = np.mean([kept / total for _, _, kept, total in rows])
        cells = "  ".join(
            f"{_mean_se([r[0][m] for r in rows]):>14}{_mean_se([r[1][m] for r in rows]):>16}"
            for m in args.metrics
        )
        print(f"{variant:<16}{dataset:<10}{model:<14}{len(rows):>3}{share:>10.3f}  {cells}")


if __name__ == "__main__":
    main()
