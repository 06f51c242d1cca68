"""XGBoost's learning-to-rank objectives: gradient-boosted trees with ``rank:ndcg`` (LambdaMART),
``rank:pairwise`` (RankNet's pairwise loss) or ``rank:map``.

A seeded wrapper around :class:`xgboost.XGBRanker` (histogram trees), built like
:class:`~ltr_bench.models.LambdaMART`: query groups from the QuerySet's query blocks, early
stopping on vali NDCG@k, ``history`` with the per-tree NDCG@k on train and vali, and the trees
used for scoring saved as XGBoost's JSON model. XGBoost is an optional extra (``ltr_bench[gbdt]``)
imported only when this model is built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.config.util import plain
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.base import Ranker
from ltr_bench.models.gbdt_support import asks_for_gpu, check_labels, require

OBJECTIVES = ("rank:ndcg", "rank:pairwise", "rank:map")
MODEL_FILE = "model.json"
NAME = "xgboost"  # the model option, for messages


def _xgboost() -> Any:
    return require("xgboost", NAME)


class XGBoostRanker(Ranker):
    """Gradient-boosted trees with one of XGBoost's ranking objectives.

    Args:
        objective: ``rank:ndcg`` (LambdaMART's NDCG-weighted lambdas), ``rank:pairwise``
            (pairwise logistic loss) or ``rank:map`` (MAP-weighted lambdas on labels binarised at
            ``relevance_threshold``: XGBoost's MAP takes binary labels only).
        n_estimators: maximum number of trees (boosting rounds).
        max_depth: maximum tree depth.
        learning_rate: shrinkage per tree.
        min_child_weight: minimum sum of hessians in a leaf.
        subsample, colsample_bytree: row and feature fractions per tree (below 1 the seed matters).
        reg_lambda: L2 penalty on leaf weights.
        early_stopping_rounds: stop when vali NDCG@``eval_at`` has not improved for this many
            trees and keep the best tree count; ``None`` trains all trees. Ignored without vali.
        eval_at: the cut-off k of the NDCG used for early stopping and ``history``.
        relevance_threshold: ``rank:map`` only: labels >= this are relevant.
        n_jobs: XGBoost threads (parallel sweeps keep this at 1).
        device: ``trainer.accelerator`` after ``ltr_bench.machine.accelerators.resolve`` mapped it with
            :meth:`device_for`: ``cuda`` trains on the GPU, anything else on the CPU.
        extra_params: further XGBoost parameters passed verbatim (e.g. ``lambdarank_pair_method``).
        name: the model config's name (kept for tracking, unused in training).
        seed: XGBoost's ``random_state`` (row/feature sampling, pair sampling).
    """

    def __init__(
        self,
        *,
        objective: str = "rank:ndcg",
        n_estimators: int = 500,
        max_depth: int = 4,
        learning_rate: float = 0.05,
        min_child_weight: float = 1.0,
        subsample: float = 1.0,
        colsample_bytree: float = 1.0,
        reg_lambda: float = 1.0,
        early_stopping_rounds: int | None = 30,
        eval_at: int = 10,
        relevance_threshold: int = 1,
        n_jobs: int = 1,
        device: str = "cpu",
        extra_params: dict[str, Any] | None = None,
        name: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(seed=seed, name=name)
        if objective not in OBJECTIVES:
            raise UserError(
                f"model.objective={objective} is not an XGBoost ranking objective; "
                f"choose one of {', '.join(OBJECTIVES)}"
            )
        if int(n_estimators) < 1:
            raise UserError(f"model.n_estimators must be >= 1, got {n_estimators}")
        if early_stopping_rounds is not None and int(early_stopping_rounds) < 1:
            raise UserError(
                f"model.early_stopping_rounds must be >= 1 or null, got {early_stopping_rounds}"
            )
        _xgboost()  # a missing extra stops the run here, before any data is read
        self.objective = objective
        self.n_estimators = int(n_estimators)
        self.max_depth = int(max_depth)
        self.learning_rate = float(learning_rate)
        self.min_child_weight = float(min_child_weight)
        self.subsample = float(subsample)
        self.colsample_bytree = float(colsample_bytree)
        self.reg_lambda = float(reg_lambda)
        self.early_stopping_rounds = (
            None if early_stopping_rounds is None else int(early_stopping_rounds)
        )
        self.eval_at = int(eval_at)
        self.relevance_threshold = int(relevance_threshold)
        self.n_jobs = int(n_jobs)
        self.device = "cuda" if asks_for_gpu(device) else "cpu"
        self.extra_params = dict(plain(extra_params) or {})
        self.booster_: Any = None
        self.best_iteration_: int | None = None

    @classmethod
    def device_for(cls, accelerator: str) -> str:
        """``cuda`` when a GPU is asked for and this XGBoost was built with CUDA, else cpu (the
        ``xgboost-cpu`` wheel of the ``gbdt`` extra has no CUDA: it says so and runs on the CPU)."""
        if not asks_for_gpu(accelerator):
            return "cpu"
        return "cuda" if _xgboost().build_info().get("USE_CUDA") else "cpu"

    # ------------------------------------------------------------------ fit / score
    def _labels(self, data: QuerySet, split: str) -> np.ndarray:
        check_labels(data, split, NAME)
        if self.objective == "rank:map":
            return (data.labels >= self.relevance_threshold).astype(np.int32)
        return data.labels

    def fit(
        self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None
    ) -> XGBoostRanker:
        """Grow up to ``n_estimators`` trees; with ``vali``, stop early on its NDCG@k.

        ``logger`` is ignored (no Lightning trainer); ``history`` carries the curves.
        """
        xgb = _xgboost()
        sets = [("train", train)]
        if vali is not None and vali.n_queries:
            sets.append(("vali", vali))
        model = xgb.XGBRanker(
            objective=self.objective,
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            min_child_weight=self.min_child_weight,
            subsample=self.subsample,
            colsample_bytree=self.colsample_bytree,
            reg_lambda=self.reg_lambda,
            tree_method="hist",
            device=self.device,
            n_jobs=self.n_jobs,
            random_state=self.seed,
            eval_metric=f"ndcg@{self.eval_at}",
            early_stopping_rounds=self.early_stopping_rounds if len(sets) > 1 else None,
            **self.extra_params,
        )
        model.fit(
            train.features,
            self._labels(train, "train"),
            qid=train.query_index(),
            eval_set=[(d.features, self._labels(d, split)) for split, d in sets],
            eval_qid=[d.query_index() for _, d in sets],
            verbose=False,
        )
        booster = model.get_booster()
        best = getattr(model, "best_iteration", None) if len(sets) > 1 else None
        self.best_iteration_ = None if best is None else int(best) + 1
        # Keep only the trees that score (XGBoost grows early_stopping_rounds past the best).
        self.booster_ = booster[: self.best_iteration_] if self.best_iteration_ else booster
        self.booster_.set_param({"device": "cpu", "nthread": self.n_jobs})
        evals = model.evals_result()
        self.history = _history(
            {split: evals[f"validation_{i}"] for i, (split, _) in enumerate(sets)}, self.eval_at
        )
        return self

    def score(self, data: QuerySet) -> np.ndarray:
        """Scores of the kept trees (the best tree count when early stopping fired)."""
        if self.booster_ is None:
            raise RuntimeError("XGBoostRanker.score called before fit")
        if data.n_docs == 0:
            return np.zeros(0, dtype=np.float64)
        matrix = _xgboost().DMatrix(data.features, nthread=self.n_jobs)
        return np.asarray(self.booster_.predict(matrix), dtype=np.float64)

    @property
    def n_trees_(self) -> int:
        """Number of trees used for scoring."""
        return 0 if self.booster_ is None else int(self.booster_.num_boosted_rounds())

    # ------------------------------------------------------------------ saved model
    def save_params(self, folder: Path) -> dict[str, Any]:
        """XGBoost's JSON model (``model.json``) of the trees used for scoring."""
        if self.booster_ is None:
            raise RuntimeError("XGBoostRanker.save_params called before fit")
        self.booster_.save_model(str(Path(folder) / MODEL_FILE))
        return {"model_file": MODEL_FILE, "n_trees": self.n_trees_, "objective": self.objective}

    def load_params(self, folder: Path, n_features: int) -> None:
        """The trees from their JSON model, scored like the fitted ones."""
        booster = _xgboost().Booster()
        booster.load_model(str(Path(folder) / MODEL_FILE))
        if booster.num_features() != int(n_features):
            raise UserError(
                f"{Path(folder) / MODEL_FILE} has {booster.num_features()} features, "
                f"the saved model says {n_features}"
            )
        booster.set_param({"device": "cpu", "nthread": self.n_jobs})
        self.booster_ = booster
        self.best_iteration_ = None


def _history(evals: dict[str, dict[str, list[float]]], k: int) -> list[dict[str, float]]:
    """One record per tree: ``{"round": t, "train_ndcg@k": .., "vali_ndcg@k": ..}``."""
    series = {f"{split}_ndcg@{k}": v[f"ndcg@{k}"] for split, v in evals.items() if f"ndcg@{k}" in v}
    n = max((len(v) for v in series.values()), default=0)
    return [
        {"round": t + 1, **{key: float(v[t]) for key, v in series.items() if t < len(v)}}
        for t in range(n)
    ]
