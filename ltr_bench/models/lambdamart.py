"""LambdaMART: gradient-boosted trees with LightGBM's ``lambdarank`` objective.

A thin, seeded wrapper around :class:`lightgbm.LGBMRanker`: query groups come from
``QuerySet.query_lengths``, early stopping watches NDCG@10 on the validation queries, and
``history`` holds LightGBM's per-tree NDCG@10 on train and vali.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.config.util import plain
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.base import Ranker


class LambdaMART(Ranker):
    """LambdaMART via LightGBM (``objective="lambdarank"``).

    Args:
        n_estimators: maximum number of trees (boosting rounds).
        num_leaves: maximum leaves per tree.
        max_depth: maximum tree depth (``-1`` = unlimited).
        learning_rate: shrinkage per tree.
        min_child_samples: minimum documents per leaf.
        early_stopping_rounds: stop when vali NDCG@``eval_at`` has not improved for this many
            trees and keep the best tree count; ``None`` trains all trees. Ignored without vali.
        eval_at: the cut-off k of the NDCG used for early stopping and ``history``.
        n_jobs: LightGBM threads (parallel sweeps keep this at 1).
        device_type: LightGBM's device: ``cpu``, ``gpu`` (OpenCL) or ``cuda``; the config passes
            ``trainer.accelerator`` after ``ltr_bench.machine.accelerators.resolve`` mapped it to what
            this LightGBM build supports (see :meth:`device_for`).
        extra_params: further LightGBM parameters passed verbatim (e.g. ``subsample``).
        name: the model config's name (kept for tracking, unused in training).
        seed: seeds LightGBM; with ``deterministic=True`` the same data gives the same model.
    """

    def __init__(
        self,
        *,
        n_estimators: int = 100,
        num_leaves: int = 15,
        max_depth: int = 4,
        learning_rate: float = 0.05,
        min_child_samples: int = 20,
        early_stopping_rounds: int | None = 30,
        eval_at: int = 10,
        n_jobs: int = 1,
        device_type: str = "cpu",
        extra_params: dict[str, Any] | None = None,
        name: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(seed=seed, name=name)
        if int(n_estimators) < 1:
            raise UserError(f"model.n_estimators must be >= 1, got {n_estimators}")
        if early_stopping_rounds is not None and int(early_stopping_rounds) < 1:
            raise UserError(
                f"model.early_stopping_rounds must be >= 1 or null, got {early_stopping_rounds}"
            )
        self.n_estimators = int(n_estimators)
        self.num_leaves = int(num_leaves)
        self.max_depth = int(max_depth)
        self.learning_rate = float(learning_rate)
        self.min_child_samples = int(min_child_samples)
        self.early_stopping_rounds = (
            None if early_stopping_rounds is None else int(early_stopping_rounds)
        )
        self.eval_at = int(eval_at)
        self.n_jobs = int(n_jobs)
        self.device_type = str(device_type) if str(device_type) in ("gpu", "cuda") else "cpu"
        self.extra_params = dict(plain(extra_params) or {})
        self.model_: Any = None
        self.best_iteration_: int | None = None

    @classmethod
    def device_for(cls, accelerator: str) -> str:
        """``cuda`` or ``gpu`` when a GPU is asked for and LightGBM was built with it, else cpu."""
        from ltr_bench.machine.accelerators import lightgbm_device

        return lightgbm_device(accelerator)

    # ------------------------------------------------------------------ fit / score
    def fit(
        self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None
    ) -> LambdaMART:
        """Grow up to ``n_estimators`` trees; with ``vali``, stop early on its NDCG@k.

        ``logger`` is ignored (no Lightning trainer); ``history`` carries the curves.
        """
        import lightgbm as lgb

        max_label = _check_labels(train, "train")
        if vali is not None and vali.n_docs:
            max_label = max(max_label, _check_labels(vali, "vali"))
        # Exponential gain 2^l - 1 as in the papers' NDCG; LightGBM needs labels < len(label_gain).
        label_gain = [float(2**g - 1) for g in range(max_label + 1)]
        self.model_ = lgb.LGBMRanker(
            objective="lambdarank",
            n_estimators=self.n_estimators,
            num_leaves=self.num_leaves,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            min_child_samples=self.min_child_samples,
            n_jobs=self.n_jobs,
            device_type=self.device_type,
            random_state=self.seed,
            deterministic=True,
            force_row_wise=True,
            label_gain=label_gain,
            verbose=-1,
            **self.extra_params,
        )
        evals: dict[str, dict[str, list[float]]] = {}
        eval_set = [(train.features, train.labels)]
        eval_group = [train.query_lengths]
        eval_names = ["train"]
        callbacks = [lgb.record_evaluation(evals)]
        if vali is not None and vali.n_queries:
            eval_set.append((vali.features, vali.labels))
            eval_group.append(vali.query_lengths)
            eval_names.append("vali")
            if self.early_stopping_rounds is not None:
                callbacks.append(
                    lgb.early_stopping(
                        self.early_stopping_rounds, first_metric_only=True, verbose=False
                    )
                )
        self.model_.fit(
            train.features,
            train.labels,
            group=train.query_lengths,
            **_eval_sets(eval_set),
            eval_group=eval_group,
            eval_names=eval_names,
            eval_at=[self.eval_at],
            callbacks=callbacks,
        )
        best = getattr(self.model_, "best_iteration_", None)
        self.best_iteration_ = int(best) if best else None
        self.history = _history_from_evals(evals, self.eval_at)
        return self

    def score(self, data: QuerySet) -> np.ndarray:
        """Scores of the fitted ensemble (the best tree count when early stopping fired)."""
        if self.model_ is None:
            raise RuntimeError("LambdaMART.score called before fit")
        if data.n_docs == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(self.model_.predict(data.features), dtype=np.float64)

    # ------------------------------------------------------------------ saved model
    def save_params(self, folder: Path) -> dict[str, Any]:
        """LightGBM's model text (``model.txt``) of the trees used for scoring (the best
        iteration when early stopping fired)."""
        if self.model_ is None:
            raise RuntimeError("LambdaMART.save_params called before fit")
        booster = self.model_.booster_
        text = booster.model_to_string(num_iteration=self.best_iteration_ or -1)
        (Path(folder) / MODEL_TEXT_FILE).write_text(text)
        return {"model_text": MODEL_TEXT_FILE, "n_trees": self.n_trees_}

    def load_params(self, folder: Path, n_features: int) -> None:
        """The ensemble from its model text, scored like the fitted one."""
        import lightgbm as lgb

        booster = lgb.Booster(model_str=(Path(folder) / MODEL_TEXT_FILE).read_text())
        if booster.num_feature() != int(n_features):
            raise UserError(
                f"{Path(folder) / MODEL_TEXT_FILE} has {booster.num_feature()} features, "
                f"the saved model says {n_features}"
            )
        self.model_ = _LoadedBooster(booster)
        self.best_iteration_ = None

    @property
    def n_trees_(self) -> int:
        """Number of trees used for scoring."""
        if self.model_ is None:
            return 0
        return self.best_iteration_ or self.model_.booster_.num_trees()


def _eval_sets(eval_set: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """Evaluation sets in the keyword form this LightGBM version expects (4.7 renamed them)."""
    import inspect

    import lightgbm as lgb

    if "eval_X" in inspect.signature(lgb.LGBMRanker.fit).parameters:
        return {"eval_X": tuple(x for x, _ in eval_set), "eval_y": tuple(y for _, y in eval_set)}
    return {"eval_set": eval_set}


def _check_labels(data: QuerySet, name: str) -> int:
    """Max label of ``data``; LightGBM's lambdarank needs non-negative integer grades."""
    if data.n_docs == 0:
        return 0
    lo, hi = int(data.labels.min()), int(data.labels.max())
    if lo < 0:
        raise UserError(f"{name} labels must be >= 0 for LambdaMART, found {lo}")
    if hi > 30:
        raise UserError(f"{name} labels go up to {hi}; LambdaMART's 2^l - 1 gain supports <= 30")
    return hi


def _history_from_evals(evals: dict[str, dict[str, list[float]]], k: int) -> list[dict[str, float]]:
    """One record per tree: ``{"round": t, "train_ndcg@k": .., "vali_ndcg@k": ..}``."""
    series = {
        f"{name}_ndcg@{k}": values[f"ndcg@{k}"]
        for name, values in evals.items()
        if f"ndcg@{k}" in values
    }
    n = max((len(v) for v in series.values()), default=0)
    return [
        {"round": t + 1, **{key: float(v[t]) for key, v in series.items() if t < len(v)}}
        for t in range(n)
    ]


MODEL_TEXT_FILE = "model.txt"


class _LoadedBooster:
    """A Booster read from model text in the place of a fitted ``LGBMRanker``."""

    def __init__(self, booster: Any) -> None:
        self.booster_ = booster

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self.booster_.predict(features)
