"""The learning-curve PNG of a fold run (ltr_bench.runner.plots)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ltr_bench.runner.plots import plot_learning_curve

HISTORY = [
    {"epoch": e, "train_loss": 1.0 / (e + 1), "vali_ndcg@10": 0.5 + e / 50, "lr": 0.01}
    for e in range(6)
]


def _pyplot_png(path: Path) -> None:
    """The same figure drawn through pyplot, as the function did before it used the object API."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    epochs = [r["epoch"] for r in HISTORY]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    colors = iter(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    handles = ax.plot(
        epochs,
        [r["train_loss"] for r in HISTORY],
        marker="o",
        ms=3,
        color=next(colors),
        label="train_loss",
    )
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax2 = ax.twinx()
    handles += ax2.plot(
        epochs,
        [r["vali_ndcg@10"] for r in HISTORY],
        marker="s",
        ms=3,
        ls="--",
        color=next(colors),
        label="vali_ndcg@10",
    )
    ax2.set_ylabel("validation metric")
    ax.legend(handles, [str(h.get_label()) for h in handles], loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def test_the_png_is_the_one_pyplot_draws(tmp_path: Path) -> None:
    assert plot_learning_curve(HISTORY, tmp_path / "curve.png")
    _pyplot_png(tmp_path / "pyplot.png")
    assert (tmp_path / "curve.png").read_bytes() == (tmp_path / "pyplot.png").read_bytes()


def test_nothing_to_plot_writes_nothing(tmp_path: Path) -> None:
    assert not plot_learning_curve([{"epoch": 0, "lr": 0.1}], tmp_path / "none.png")
    assert not (tmp_path / "none.png").exists()


def test_drawing_imports_no_pyplot(tmp_path: Path) -> None:
    code = (
        "import sys; from pathlib import Path\n"
        "from ltr_bench.runner.plots import plot_learning_curve\n"
        f"assert plot_learning_curve([{{'epoch': 0, 'train_loss': 1.0}}], Path({str(tmp_path / 'c.png')!r}))\n"
        "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
