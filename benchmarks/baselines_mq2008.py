"""SortNet, LambdaMART and AdaRank on the five MQ2008 folds with the papers' protocol.

Protocol (RankNet revisited, Sect. 4.4): features mapped to a normal distribution with standard
deviation 1/3 (quantile transform fitted on the fold's training part), training and validation with
the graded labels, test labels binarised at >= 1 and test queries without a relevant document left
out. Prints NDCG@10 and MAP per fold and the mean with its standard error.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/baselines_mq2008.py [--models adarank,sortnet]

Options: --models (default all three), --folds (default 1,2,3,4,5), --seed (default 0).

The data folder is $LTR_DATA/MQ2008 (default: <repo>/../shared/data/letor/MQ2008).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from ltr_bench.data.queryset import QuerySet
from ltr_bench.metrics import evaluate
from ltr_bench.models import AdaRank, LambdaMART, SortNet

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("LTR_DATA", REPO.parent / "shared" / "data" / "letor")) / "MQ2008"

# Each ranker with its default configuration (conf/model/*.yaml).
MODELS = {
    "adarank": lambda seed: AdaRank(seed=seed),
    "lambdamart": lambda seed: LambdaMART(seed=seed),
    "sortnet": lambda seed: SortNet(seed=seed),
}


def load(path: Path) -> QuerySet:
    """Read one LETOR file (the data layer's loader when present, else scikit-learn's parser)."""
    try:
        from ltr_bench.data.letor import load_letor
    except ImportError:
        from sklearn.datasets import load_svmlight_file

        x, y, qid = load_svmlight_file(str(path), n_features=46, query_id=True)
        return QuerySet.from_arrays(x.toarray(), y, qid, require_contiguous=True)
    return load_letor(path, n_features=46)


def normal_thirds(train: QuerySet, *others: QuerySet) -> list[QuerySet]:
    """Quantile-normal/3 features fitted on ``train`` (the papers' preprocessing)."""
    try:
        from ltr_bench.data.transforms import QuantileNormal
    except ImportError:  # the data layer's transform is sklearn's, made faster
        from sklearn.preprocessing import QuantileTransformer

        qt = QuantileTransformer(output_distribution="normal", n_quantiles=1000, random_state=0)
        qt.fit(train.features)
        return [d.with_features(qt.transform(d.features) / 3.0) for d in (train, *others)]
    transform = QuantileNormal(scale=1.0 / 3.0).fit(train)
    return [transform.transform(d) for d in (train, *others)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--folds", default="1,2,3,4,5")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if not DATA.is_dir():
        raise SystemExit(f"MQ2008 not found at {DATA} (set LTR_DATA)")
    folds = [int(f) for f in args.folds.split(",")]
    names = args.models.split(",")
    results = {name: [] for name in names}
    for fold in folds:
        d = DATA / f"Fold{fold}"
        parts = (load(d / f"{split}.txt") for split in ("train", "vali", "test"))
        train, vali, test = normal_thirds(*parts)
        test = test.with_labels((test.labels >= 1).astype(np.int32))
        for name in names:
            start = time.perf_counter()
            model = MODELS[name](args.seed).fit(train, vali)
            fit_s = time.perf_counter() - start
            means = evaluate(model.score(test), test, names=("ndcg@10", "map")).means
            results[name].append((means["ndcg@10"], means["map"], fit_s))
            print(
                f"Fold{fold} {name:10s} NDCG@10 {means['ndcg@10']:.4f}  MAP {means['map']:.4f}"
                f"  fit {fit_s:6.1f} s",
                flush=True,
            )
    print("\nmodel       NDCG@10 mean(SE)    MAP mean(SE)      fit s/fold")
    for name, rows in results.items():
        arr = np.asarray(rows)
        mean = arr.mean(axis=0)
        se = arr.std(axis=0, ddof=1) / np.sqrt(len(arr)) if len(arr) > 1 else np.zeros(3)
        print(
            f"{name:10s}  {mean[0]:.3f} ({se[0]:.3f})     {mean[1]:.3f} ({se[1]:.3f})"
            f"     {mean[2]:.1f}"
        )


if __name__ == "__main__":
    main()
