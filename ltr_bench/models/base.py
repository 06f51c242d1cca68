"""The contract every ranker follows.

A ranker is built from its config by ``hydra.utils.instantiate`` (keyword arguments only, one of
them ``seed``), learns with ``fit(train, vali)`` and scores with ``score(data)`` (higher = more
relevant). Protocols, sweeps and reports rely on nothing else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ltr_bench.data.queryset import QuerySet


class Ranker(ABC):
    """Base class of all rankers.

    Attributes:
        history: per-epoch (or per-round) records filled by ``fit``, e.g.
            ``{"epoch": 3, "train_loss": 0.41, "vali_ndcg@10": 0.71}``; used for learning-curve
            plots and logged to MLflow. Empty for rankers without epochs.
    """

    history: list[dict[str, float]]
    #: Whether ``fit`` uses the Lightning ``logger`` it is given: a tracked run builds one (which
    #: imports Lightning, seconds) only for a ranker that does; the others get ``None``.
    takes_lightning_logger: ClassVar[bool] = False

    def __init__(self, seed: int = 0, name: str | None = None) -> None:
        """``name`` is the model config's option name, kept for tracking, unused in training."""
        self.seed = int(seed)
        self.name = name
        self.history = []

    @classmethod
    def device_for(cls, accelerator: str) -> str:
        """The device this ranker trains on when the run is granted ``accelerator``.

        A ranker without a GPU path (this default) trains on the CPU whatever was asked for;
        ``ltr_bench.machine.accelerators.resolve`` then says so in one line.
        """
        return "cpu"

    @abstractmethod
    def fit(self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None) -> Ranker:
        """Learn from ``train``; ``vali`` (optional) drives early stopping.

        ``logger`` is an optional Lightning logger (e.g. ``MLFlowLogger``) that neural rankers pass
        to their ``Trainer``; a run passes one only to rankers with ``takes_lightning_logger``.
        """

    @abstractmethod
    def score(self, data: QuerySet) -> np.ndarray:
        """``[N]`` float scores for the documents of ``data`` (higher = more relevant)."""

    # A saved model (ltr_bench.saved_model) holds the learned parameters only, never data.
    def save_params(self, folder: Path) -> dict[str, Any] | None:
        """Write the learned parameters (and nothing else) into the existing ``folder``, for a
        saved model; return JSON-able facts about them (shown in its pipeline.json) or None.

        A ranker that implements this also implements :meth:`load_params`. Runs of a ranker
        without them log no model (a warning says so); see docs/guides/own-model.md.
        """
        raise NotImplementedError(
            f"{type(self).__name__} does not implement save_params/load_params, so no model is saved"
        )

    def load_params(self, folder: Path, n_features: int) -> None:
        """Restore what :meth:`save_params` wrote into ``folder`` on a ranker built from the same
        config (unfitted), for data with ``n_features`` columns; afterwards :meth:`score` works."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load_params")
