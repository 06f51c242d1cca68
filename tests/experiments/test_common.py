"""Experiment specs: scale values over the file's, interpolations after the merge; sources."""

from __future__ import annotations

import numpy as np
import pytest

from ltr_bench.data.synthetic import make_synthetic
from ltr_bench.errors import UserError
from ltr_bench.experiments.common import compose_run_config, scaled_spec
from ltr_bench.experiments.sources import SyntheticSource, keep_fraction_of_classes


def test_every_experiment_composes_at_both_scales() -> None:
    from pathlib import Path

    names = sorted(
        p.stem for p in (Path(__file__).parents[2] / "conf" / "experiment").glob("*.yaml")
    )
    for name in names:
        cfg = compose_run_config([f"experiment={name}"])
        for scale in ("quick", "full"):
            spec = scaled_spec(cfg, scale)
            assert spec.name == name and spec._target_.startswith("ltr_bench.experiments.")
    assert {
        "fig2a",
        "fig2b",
        "fig2c",
        "fig2d",
        "fig3",
        "fig5_size",
        "fig5_ratio",
        "table1",
        "table2",
        "table3",
    } <= set(names)


def test_scale_values_win_and_interpolations_see_them() -> None:
    cfg = compose_run_config(["experiment=table1"])
    quick = scaled_spec(compose_run_config(["experiment=table1", "scale=quick"]), "quick")
    full = scaled_spec(cfg, "full")
    assert f"hydra.sweeper.n_trials={quick.n_trials}" in quick.sweep_overrides
    assert f"hydra.sweeper.n_trials={full.n_trials}" in full.sweep_overrides
    assert quick.n_trials < full.n_trials
    assert quick.mlflow_experiment.endswith("_quick") and full.mlflow_experiment.endswith("_full")
    # Table 1 keeps two trials in flight (warm workers) at full scale; quick: one at a time
    assert list(full.launcher_overrides) == [
        "hydra/launcher=ltr_pool",
        f"hydra.launcher.n_jobs={full.n_jobs}",
        f"hydra.sweeper.n_jobs={full.n_jobs}",
    ]
    assert list(quick.launcher_overrides) == []
    # quick: every variant on two folds or splits (holdout_multi too: the ledger runs it on its own)
    assert set(quick.variants) == set(full.variants)
    for name, variant in quick.variants.items():
        assert {"dataset.fold=1,2", "protocol.split=range(0,2)"} & set(variant.overrides), name
    with pytest.raises(UserError, match="scale=huge"):
        scaled_spec(cfg, "huge")


def test_the_command_line_wins_over_the_scale_and_interpolations_see_it() -> None:
    """``experiment.n_trials=8`` at scale=quick: the sweep's own override must say 8 too (the
    value the spec's ``${experiment.n_trials}`` interpolates), not the scale's 1 with the spec's
    ``n_trials`` alone saying 8, which ran 1 trial under a page that said 8."""
    overrides = ["experiment.n_trials=8"]
    cfg = compose_run_config(["experiment=table1", "scale=quick", *overrides])
    spec = scaled_spec(cfg, "quick", overrides)
    assert spec.n_trials == 8
    assert "hydra.sweeper.n_trials=8" in spec.sweep_overrides
    assert scaled_spec(cfg, "quick").n_trials == 1  # without the command line: the scale's


def test_keep_fraction_subsamples_only_the_given_classes() -> None:
    data = make_synthetic(6000, n_features=3, n_classes=6, docs_per_query=100, seed=0)
    kept = keep_fraction_of_classes(data, [3, 4, 5], 0.1, np.random.default_rng(0))
    before, after = np.bincount(data.labels, minlength=6), np.bincount(kept.labels, minlength=6)
    assert after[:3].tolist() == before[:3].tolist()
    np.testing.assert_allclose(after[3:], np.round(0.1 * before[3:]), atol=1)
    assert kept.offsets[-1] == kept.n_docs and np.all(np.diff(kept.offsets) > 0)


def test_synthetic_source_repetitions_are_new_datasets() -> None:
    src = SyntheticSource(n_train=300, n_test=200, n_features=4, n_classes=3)
    (a, ta), (b, _) = src.load(0), src.load(1)
    assert a.n_docs == 300 and ta.n_docs == 200
    assert not np.allclose(a.features, b.features)
