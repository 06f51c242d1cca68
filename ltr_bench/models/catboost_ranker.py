"""CatBoost's ranking losses: oblivious gradient-boosted trees with YetiRank (the default),
YetiRankPairwise, PairLogit, PairLogitPairwise, QueryRMSE, QuerySoftMax, LambdaMart or
StochasticRank.

A seeded wrapper around :class:`catboost.CatBoostRanker`, built like
:class:`~ltr_bench.models.LambdaMART`: group ids from the QuerySet's query blocks, early stopping
on vali NDCG@k (exponential gain) keeping the best tree count, ``history`` with the per-tree vali
NDCG@k, and the trees saved in CatBoost's own binary model format (``.cbm``, no pickle). CatBoost
is an optional extra (``ltr_bench[gbdt]``) imported only when this model is built; it trains
silently and writes its ``catboost_info`` files into a temporary folder, never the working one.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.config.util import plain
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.base import Ranker
from ltr_bench.models.gbdt_support import asks_for_gpu, check_labels, require

# CatBoost's ranking losses (the name before any ":param=value" options).
LOSSES = (
    "YetiRank",
    "YetiRankPairwise",
    "PairLogit",
    "PairLogitPairwise",
    "QueryRMSE",
    "QuerySoftMax",
    "LambdaMart",
    "StochasticRank",
)
MODEL_FILE = "model.cbm"
NAME = "catboost"  # the model option, for messages


def _catboost() -> Any:
    return require("catboost", NAME)


class CatBoostRanker(Ranker):
    """Gradient-boosted oblivious trees with one of CatBoost's ranking losses.

    Args:
        loss_function: a CatBoost ranking loss, optionally with its options
            (``YetiRank``, ``LambdaMart:metric=NDCG``, ``YetiRank:top=10``, ...; see :data:`LOSSES`).
        iterations: maximum number of trees.
        learning_rate: shrinkage per tree.
        depth: depth of each (oblivious) tree.
        l2_leaf_reg: L2 penalty on leaf values.
        random_strength: the spread of the random noise added to split scores (seeded).
        early_stopping_rounds: stop when vali NDCG@``eval_at`` has not improved for this many
            trees and keep the best tree count; ``None`` trains all trees. Ignored without vali.
        eval_at: the cut-off k of the NDCG (gain 2^l - 1) used for early stopping and ``history``.
        thread_count: CatBoost threads (parallel sweeps keep this at 1).
        task_type: ``trainer.accelerator`` after ``ltr_bench.machine.accelerators.resolve`` mapped it
            with :meth:`device_for`: ``cuda``/``gpu`` train on the GPU, anything else on the CPU.
        extra_params: further CatBoost parameters passed verbatim (e.g. ``bootstrap_type``).
        name: the model config's name (kept for tracking, unused in training).
        seed: CatBoost's ``random_seed`` (YetiRank's permutations, feature borders, ...).
    """

    def __init__(
        self,
        *,
        loss_function: str = "YetiRank",
        iterations: int = 1000,
        learning_rate: float = 0.05,
        depth: int = 6,
        l2_leaf_reg: float = 3.0,
        random_strength: float = 1.0,
        early_stopping_rounds: int | None = 50,
        eval_at: int = 10,
        thread_count: int = 1,
        task_type: str = "cpu",
        extra_params: dict[str, Any] | None = None,
        name: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(seed=seed, name=name)
        if str(loss_function).split(":")[0] not in LOSSES:
            raise UserError(
                f"model.loss_function={loss_function} is not a CatBoost ranking loss; "
                f"choose one of {', '.join(LOSSES)} (options after a colon, e.g. YetiRank:top=10)"
            )
        if int(iterations) < 1:
            raise UserError(f"model.iterations must be >= 1, got {iterations}")
        if early_stopping_rounds is not None and int(early_stopping_rounds) < 1:
            raise UserError(
                f"model.early_stopping_rounds must be >= 1 or null, got {early_stopping_rounds}"
            )
        _catboost()  # a missing extra stops the run here, before any data is read
        self.loss_function = str(loss_function)
        self.iterations = int(iterations)
        self.learning_rate = float(learning_rate)
        self.depth = int(depth)
        self.l2_leaf_reg = float(l2_leaf_reg)
        self.random_strength = float(random_strength)
        self.early_stopping_rounds = (
            None if early_stopping_rounds is None else int(early_stopping_rounds)
        )
        self.eval_at = int(eval_at)
        self.thread_count = int(thread_count)
        self.task_type = "GPU" if asks_for_gpu(task_type) else "CPU"
        self.extra_params = dict(plain(extra_params) or {})
        self.model_: Any = None

    @classmethod
    def device_for(cls, accelerator: str) -> str:
        """``cuda`` when a GPU is asked for and CatBoost finds a CUDA device, else cpu."""
        if not asks_for_gpu(accelerator):
            return "cpu"
        from catboost.utils import get_gpu_device_count

        _catboost()
        return "cuda" if get_gpu_device_count() > 0 else "cpu"

    # ------------------------------------------------------------------ fit / score
    def fit(
        self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None
    ) -> CatBoostRanker:
        """Grow up to ``iterations`` trees; with ``vali``, stop early on its NDCG@k and keep
        the best tree count. ``logger`` is ignored; ``history`` carries the curves."""
        cb = _catboost()
        check_labels(train, "train", NAME)
        has_vali = vali is not None and vali.n_queries > 0
        eval_metric = f"NDCG:top={self.eval_at};type=Exp"
        with tempfile.TemporaryDirectory(prefix="ltr_bench_catboost_") as train_dir:
            self.model_ = cb.CatBoostRanker(
                loss_function=self.loss_function,
                iterations=self.iterations,
                learning_rate=self.learning_rate,
                depth=self.depth,
                l2_leaf_reg=self.l2_leaf_reg,
                random_strength=self.random_strength,
                eval_metric=eval_metric,
                random_seed=self.seed,
                thread_count=self.thread_count,
                task_type=self.task_type,
                train_dir=train_dir,
                verbose=False,
                **self.extra_params,
            )
            eval_set = None
            if has_vali:
                assert vali is not None
                check_labels(vali, "vali", NAME)
                eval_set = cb.Pool(vali.features, vali.labels, group_id=vali.query_index())
            try:
                self.model_.fit(
                    cb.Pool(train.features, train.labels, group_id=train.query_index()),
                    eval_set=eval_set,
                    early_stopping_rounds=self.early_stopping_rounds if has_vali else None,
                    use_best_model=has_vali and self.early_stopping_rounds is not None,
                )
            except cb.CatBoostError as exc:
                reason = (str(exc).strip().splitlines() or ["no reason given"])[0]
                raise UserError(
                    f"CatBoost cannot train model.loss_function={self.loss_function} on "
                    f"task_type {self.task_type} ({reason.rstrip('.')}); change model.loss_function "
                    "or model.extra_params"
                ) from None
        self.history = _history(self.model_.get_evals_result(), eval_metric, self.eval_at)
        return self

    def score(self, data: QuerySet) -> np.ndarray:
        """Raw scores of the kept trees (the best tree count when early stopping fired)."""
        if self.model_ is None:
            raise RuntimeError("CatBoostRanker.score called before fit")
        if data.n_docs == 0:
            return np.zeros(0, dtype=np.float64)
        scores = self.model_.predict(data.features, thread_count=self.thread_count)
        return np.asarray(scores, dtype=np.float64)

    @property
    def n_trees_(self) -> int:
        """Number of trees used for scoring."""
        return 0 if self.model_ is None else int(self.model_.tree_count_)

    @property
    def best_iteration_(self) -> int | None:
        """Trees kept by early stopping (None: it did not run)."""
        best = None if self.model_ is None else self.model_.get_best_iteration()
        return None if best is None else int(best) + 1

    # ------------------------------------------------------------------ saved model
    def save_params(self, folder: Path) -> dict[str, Any]:
        """CatBoost's binary model (``model.cbm``) of the trees used for scoring."""
        if self.model_ is None:
            raise RuntimeError("CatBoostRanker.save_params called before fit")
        self.model_.save_model(str(Path(folder) / MODEL_FILE), format="cbm")
        return {
            "model_file": MODEL_FILE,
            "n_trees": self.n_trees_,
            "loss_function": self.loss_function,
        }

    def load_params(self, folder: Path, n_features: int) -> None:
        """The trees from their ``.cbm`` model, scored like the fitted ones."""
        model = _catboost().CatBoostRanker()
        model.load_model(str(Path(folder) / MODEL_FILE), format="cbm")
        found = len(model.feature_names_ or [])
        if found != int(n_features):
            raise UserError(
                f"{Path(folder) / MODEL_FILE} has {found} features, the saved model says {n_features}"
            )
        self.model_ = model


def _history(
    evals: dict[str, dict[str, list[float]]], eval_metric: str, k: int
) -> list[dict[str, float]]:
    """One record per tree: ``{"round": t, "vali_ndcg@k": .., "train_loss": ..}`` (CatBoost
    computes the training loss per tree only for some losses)."""
    series: dict[str, list[float]] = {}
    vali = evals.get("validation", {})
    if eval_metric in vali:
        series[f"vali_ndcg@{k}"] = list(vali[eval_metric])
    learn = {m: v for m, v in evals.get("learn", {}).items() if m != eval_metric}
    if len(learn) == 1:
        series["train_loss"] = list(next(iter(learn.values())))
    n = max((len(v) for v in series.values()), default=0)
    return [
        {"round": t + 1, **{key: float(v[t]) for key, v in series.items() if t < len(v)}}
        for t in range(n)
    ]
