"""ltr_bench.models.lightning_fit: what the neural rankers' fit puts around Lightning's Trainer."""

from __future__ import annotations

from typing import Any

import lightning as L
import pytest
from lightning.fabric.utilities import registry

from ltr_bench.models.lightning_fit import remember_callback_factories


class _Mark(L.Callback):
    """A callback an installed package's factory would add to every Trainer."""


def test_callback_factories_are_looked_up_once_and_called_for_every_trainer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lookups: list[dict[str, Any]] = []

    class EntryPoint:
        name = "mark"

        def load(self) -> Any:
            return lambda: [_Mark()]

    def entry_points(**selection: Any) -> list[Any]:
        lookups.append(selection)
        return (
            [EntryPoint()]
            if selection.get("group") == "lightning.pytorch.callbacks_factory"
            else []
        )

    monkeypatch.setattr(registry, "entry_points", entry_points)  # Lightning's module global
    remember_callback_factories()
    remember_callback_factories()  # idempotent: wrapped once
    trainers = [
        L.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False)
        for _ in range(3)
    ]
    marks = [[c for c in t.callbacks if isinstance(c, _Mark)] for t in trainers]
    assert [len(m) for m in marks] == [1, 1, 1]  # every Trainer gets the factory's callback
    assert len({id(m[0]) for m in marks}) == 3  # ... a new one each time
    assert lookups == [{"group": "lightning.pytorch.callbacks_factory"}]  # looked up once
