"""5-fold MQ2008 results of the neural rankers under the papers' protocol (no sweep).

Each ranker is built from its real config (Hydra compose of ``conf/``: ``model=<name>`` plus any
overrides), trained on each predefined fold's train split with early stopping on vali, and
evaluated once on test with the papers' evaluation (``eval=paper``: features quantile-transformed
to a normal with sd 1/3 fitted on train, vali/test labels binarised at >= 1, queries without a
relevant document left out). Prints NDCG@10 and MAP per fold and mean (SE).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mq2008_folds.py                # all models
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/mq2008_folds.py direct_ranker \\
        --override model.dropout=0.0 --seeds 0 1 2

Needs the data in $LTR_DATA or <repo>/../shared/data/letor.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from ltr_bench.metrics import evaluate

CONF = Path(__file__).resolve().parents[1] / "conf"
MODELS = ("direct_ranker", "ranknet", "listnet", "listnet_star", "lambdarank", "ranksvm")


def run_model(model: str, overrides: list[str], seed: int) -> list[tuple[float, float, float]]:
    """(NDCG@10, MAP, fit seconds) per fold for one model config."""
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        cfg = compose(
            config_name="config",
            overrides=[
                f"model={model}",
                "dataset=mq2008",
                "eval=paper",
                f"seed={seed}",
                "trainer.enable_progress_bar=false",
                *overrides,
            ],
        )
    dataset = instantiate(cfg.dataset)
    names = list(cfg.eval.metrics.names)
    out = []
    for i in range(dataset.n_folds):
        fold = dataset.load_fold(i)
        pre = instantiate(cfg.eval.preprocessing)
        train, vali, test = pre.fit_apply(fold.train, (fold.vali, "vali"), (fold.test, "test"))
        ranker = instantiate(cfg.model)
        start = time.perf_counter()
        ranker.fit(train, vali)
        seconds = time.perf_counter() - start
        res = evaluate(
            ranker.score(test),
            test,
            names=names,
            relevance_threshold=cfg.eval.metrics.relevance_threshold,
            no_relevant=cfg.eval.metrics.no_relevant,
        )
        out.append((res.means["ndcg@10"], res.means["map"], seconds))
    return out


def mean_se(values: np.ndarray) -> str:
    se = values.std(ddof=1) / np.sqrt(len(values)) if len(values) > 1 else float("nan")
    return f"{values.mean():.4f}({se:.4f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("models", nargs="*", default=list(MODELS))
    parser.add_argument("--override", action="append", default=[], help="Hydra override")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"{'model':14s} {'seed':>4s}  {'NDCG@10 folds 1-5':38s} {'mean(SE)':15s} "
        f"{'MAP folds 1-5':38s} {'mean(SE)':15s} fit s"
    )
    for model in args.models:
        for seed in args.seeds:
            rows = np.array(run_model(model, args.override, seed))
            ndcg, ap, secs = rows[:, 0], rows[:, 1], rows[:, 2]

            def fmt(v: np.ndarray) -> str:
                return " ".join(f"{x:.4f}" for x in v)

            print(
                f"{model:14s} {seed:4d}  {fmt(ndcg):38s} {mean_se(ndcg):15s} "
                f"{fmt(ap):38s} {mean_se(ap):15s} {secs.sum():.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
