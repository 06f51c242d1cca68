"""DirectRanker speed on an MSLR-WEB10K-shaped synthetic fold, against LightGBM lambdarank.

Data: the papers' synthetic generator (Sect. 4.5) shaped like one MSLR-WEB10K fold -- 723k
training documents x 136 features, ~120 documents per query, 5 label grades with MSLR's label
frequencies and label noise, plus a vali and a test set of 240k documents each. Prints:

* preprocessing time (quantile transform to normal/3, fitted on train, applied to all three);
* DirectRanker with its default config (``conf/model/direct_ranker.yaml``): training time per
  epoch, pairs/s, validation time per epoch, epochs run, the full fit (early stopping on vali
  NDCG@10), and scoring documents/s;
* the full default training including preprocessing (target < 30 s on 2 cores);
* LightGBM ``lambdarank`` (100 trees, same threads) fit time on the same data, and the ratio;
* the papers' TensorFlow throughput (~32k pairs/s) as the reference for pairs/s.

    .venv/bin/python benchmarks/bench_direct_ranker.py [--threads 2] [--n-train 723000]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

MSLR_LABEL_FREQ = [0.52, 0.32, 0.13, 0.02, 0.01]  # MSLR-WEB10K grades 0..4, rounded
TF_PAIRS_PER_S = 32_000  # the papers' TensorFlow DirectRanker on this shape


def mslr_shaped_splits(n_train: int = 723_000, n_eval: int = 240_000) -> tuple[Any, Any, Any]:
    """Train, vali and test parts shaped like one MSLR-WEB10K fold (136 features, ~120 documents
    per query, MSLR's label frequencies), from the papers' generator with seed 0."""
    from ltr_bench.data import make_synthetic_splits

    train, vali, test = make_synthetic_splits(
        n_train=n_train,
        n_vali=n_eval,
        n_test=n_eval,
        n_features=136,
        n_classes=5,
        sigma=0.75,
        docs_per_query=120,
        class_probs=MSLR_LABEL_FREQ,
        seed=0,
    )
    assert vali is not None
    return train, vali, test


def lightgbm_fit(train: Any, threads: int = 2, trees: int = 100) -> tuple[Any, float]:
    """LightGBM lambdarank fitted on ``train`` and the fit's seconds: with the default sizes, the
    machine's yardstick (``benchmarks/bench_suite_time.py`` prints it beside the suite's time)."""
    import lightgbm as lgb

    model = lgb.LGBMRanker(
        objective="lambdarank", n_estimators=trees, num_threads=threads, verbose=-1, random_state=0
    )
    start = time.perf_counter()
    model.fit(train.features, train.labels, group=train.query_lengths)
    return model, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--n-train", type=int, default=723_000)
    parser.add_argument("--n-eval", type=int, default=240_000)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--skip-lightgbm", action="store_true")
    args = parser.parse_args()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(args.threads))

    import torch
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from ltr_bench.data import Preprocessing
    from ltr_bench.metrics import evaluate

    torch.set_num_threads(args.threads)
    print(f"threads: {args.threads} (torch {torch.get_num_threads()})")

    start = time.perf_counter()
    train, vali, test = mslr_shaped_splits(args.n_train, args.n_eval)
    print(
        f"data: train {train.n_docs} docs / {train.n_queries} queries x {train.n_features} "
        f"features, vali {vali.n_docs}, test {test.n_docs} (generated in "
        f"{time.perf_counter() - start:.1f} s, not counted)"
    )

    # ---------------------------------------------------------------- preprocessing
    start = time.perf_counter()
    pre = Preprocessing(feature_transform="quantile_normal", threads=args.threads)
    train_p, vali_p, test_p = pre.fit_apply(train, (vali, "vali"), (test, "test"))
    t_pre = time.perf_counter() - start
    print(f"preprocessing (quantile -> normal/3, fit on train, apply to 3 sets): {t_pre:.1f} s")

    # ---------------------------------------------------------------- DirectRanker
    conf = Path(__file__).resolve().parents[1] / "conf"
    with initialize_config_dir(config_dir=str(conf), version_base=None):
        cfg = compose(
            config_name="config",
            overrides=["model=direct_ranker", "trainer.enable_progress_bar=false"],
        )
    ranker = instantiate(cfg.model)
    start = time.perf_counter()
    ranker.fit(train_p, vali_p)
    t_fit = time.perf_counter() - start
    hist = ranker.history
    pairs = ranker.module_.pairs_per_epoch
    train_s = np.array([h["time_train_s"] for h in hist])
    vali_s = np.array([h["time_epoch_s"] - h["time_train_s"] for h in hist])
    print(
        f"DirectRanker default config: {ranker.hidden_sizes} {ranker.activation['name']}, "
        f"batch {ranker.batch_size}, {pairs} pairs/epoch"
    )
    print(
        f"  training per epoch: {np.median(train_s):.2f} s (median of {len(hist)} epochs) "
        f"-> {pairs / np.median(train_s):,.0f} pairs/s "
        f"({pairs / np.median(train_s) / TF_PAIRS_PER_S:.1f}x the papers' TF 32k pairs/s)"
    )
    print(f"  validation per epoch ({vali_p.n_docs} docs): {np.median(vali_s):.2f} s")
    print(
        f"  full fit: {t_fit:.1f} s, {len(hist)} epochs (best epoch {ranker.best_epoch_}, "
        f"vali NDCG@10 {max(h['vali_ndcg@10'] for h in hist):.4f})"
    )
    start = time.perf_counter()
    scores = ranker.score(test_p)
    t_score = time.perf_counter() - start
    print(
        f"  scoring: {test_p.n_docs / t_score:,.0f} documents/s ({t_score:.2f} s for "
        f"{test_p.n_docs}); test NDCG@10 "
        f"{evaluate(scores, test_p, names=('ndcg@10',)).means['ndcg@10']:.4f}"
    )
    total = t_pre + t_fit
    print(f"full default training incl. preprocessing: {total:.1f} s (target < 30 s)")

    # ---------------------------------------------------------------- LightGBM baseline
    if args.skip_lightgbm:
        return
    model, t_lgb = lightgbm_fit(train, args.threads, args.trees)
    lgb_ndcg = evaluate(model.predict(test.features), test, names=("ndcg@10",)).means["ndcg@10"]
    print(
        f"LightGBM lambdarank ({args.trees} trees) fit: {t_lgb:.1f} s, test NDCG@10 {lgb_ndcg:.4f}"
    )
    print(
        f"ratio DirectRanker full training (incl. preprocessing) / LightGBM fit: "
        f"{total / t_lgb:.2f}"
    )


if __name__ == "__main__":
    main()
