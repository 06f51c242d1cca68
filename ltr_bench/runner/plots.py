"""The learning-curve figure of a fold run."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def plot_learning_curve(history: Sequence[Mapping[str, Any]], path: Path) -> bool:
    """Per-epoch training loss (left axis) and validation metrics (right axis) as a PNG.

    Other per-epoch values (learning rate, ...) are left out. Returns False if there is nothing
    to plot. Drawn with matplotlib's object API on an Agg canvas, the same PNG as pyplot's:
    a run whose libraries do not import pyplot (Lightning's torchmetrics does) is spared it.
    """
    step_keys = ("epoch", "round", "iteration", "step")
    epochs = [next((r[k] for k in step_keys if k in r), i) for i, r in enumerate(history)]
    keys_ = list(
        dict.fromkeys(
            k
            for r in history
            for k, v in r.items()
            if isinstance(v, (int, float)) and k not in step_keys
        )
    )
    losses = [k for k in keys_ if "loss" in k]
    valis = [k for k in keys_ if k.startswith(("vali", "val_")) and "loss" not in k]
    if not losses and not valis:
        return False
    from matplotlib import rcParams
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    series = {k: [float(r.get(k, math.nan)) for r in history] for k in losses + valis}
    fig = Figure(figsize=(6, 3.5))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    colors = iter(rcParams["axes.prop_cycle"].by_key()["color"])
    handles = []
    for k in losses:
        handles += ax.plot(epochs, series[k], marker="o", ms=3, color=next(colors), label=k)
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss" if losses else "")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if valis:
        ax2 = ax.twinx() if losses else ax
        for k in valis:
            handles += ax2.plot(
                epochs, series[k], marker="s", ms=3, ls="--", color=next(colors), label=k
            )
        ax2.set_ylabel("validation metric")
    ax.legend(handles, [str(h.get_label()) for h in handles], loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True
