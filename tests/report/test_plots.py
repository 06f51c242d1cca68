"""The figures carry the information they promise: names, p-values, arrows, colour bar, CD."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ltr_bench.report.plots import ARROW_COL, ARROW_ROW, cd_diagram, pvalue_heatmap
from ltr_bench.stats import friedman_nemenyi


def _texts(ax) -> dict[tuple[float, float], str]:
    return {t.get_position(): t.get_text() for t in ax.texts}


def test_pvalue_heatmap_marks_the_better_model(tmp_path):
    models = ["alpha", "beta", "gamma"]
    p = pd.DataFrame(
        [[math.nan, 0.01, 0.5], [0.01, math.nan, math.nan], [0.5, math.nan, math.nan]],
        index=models,
        columns=models,
    )
    diffs = pd.DataFrame(
        [[math.nan, 0.2, 0.1], [-0.2, math.nan, math.nan], [-0.1, math.nan, math.nan]],
        index=models,
        columns=models,
    )
    fig = pvalue_heatmap(p, diffs, "title")
    ax = fig.axes[0]
    texts = _texts(ax)
    # cell (row 0 alpha, column 1 beta): alpha is better -> arrow to the row
    assert texts[(1, 0)] == f"{ARROW_ROW} 0.010"
    assert texts[(0, 1)] == f"{ARROW_COL} 0.010"  # mirrored: the column (alpha) is better
    assert texts[(2, 0)] == "0.500" and texts[(1, 2)] == "–"
    assert [t.get_text() for t in ax.get_xticklabels()] == models
    assert [t.get_text() for t in ax.get_yticklabels()] == models
    assert len(fig.axes) == 2  # the colour bar
    assert "p-value" in fig.axes[1].get_ylabel()
    path = tmp_path / "p.png"
    fig.savefig(path)
    plt.close(fig)
    assert path.stat().st_size > 1000


def test_cd_diagram_shows_ranks_and_cd():
    scores = pd.DataFrame(
        [[0.9, 0.8, 0.7, 0.9, 0.8], [0.5, 0.6, 0.5, 0.6, 0.5], [0.1, 0.2, 0.3, 0.1, 0.2]],
        index=["best", "mid", "worst"],
    )
    fig = cd_diagram(friedman_nemenyi(scores), "cd")
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"CD = 1.48", "best (1.00)", "mid (2.00)", "worst (3.00)"} <= texts
    assert "Friedman p = 0.007" in fig.axes[0].get_title()
    assert {"1", "2", "3"} <= texts  # every rank labelled on a short axis
    plt.close(fig)


def test_cd_diagram_labels_every_other_rank_on_a_long_axis():
    rng = np.random.default_rng(0)
    scores = pd.DataFrame(rng.random((16, 5)), index=[f"m{i}" for i in range(16)])
    fig = cd_diagram(friedman_nemenyi(scores), "cd")
    ticks = {t.get_text() for t in fig.axes[0].texts if t.get_text().isdigit()}
    assert ticks == {str(r) for r in range(1, 17, 2)}
    plt.close(fig)
