"""Unit tests of the table layouts, renderers and per-dataset tests on small in-memory frames."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pandas as pd
import pytest

from ltr_bench import tracking_keys as tk
from ltr_bench.report import tables
from ltr_bench.report.significance import compare, fold_ratio

NDCG = tk.metric_key("test", "ndcg@10")
MAP = tk.metric_key("test", "map")


def _frame(rows):
    cols = ["protocol", "eval", "dataset", "model", "fold", NDCG, MAP]
    cols += [tk.TIME_READ, tk.TIME_FIT, "n_train", "n_test"]
    return pd.DataFrame(rows, columns=cols)


@pytest.fixture()
def two_settings() -> pd.DataFrame:
    rows = []
    for protocol, shift in (("letor_folds", 0.0), ("holdout", 0.1)):
        for fold in range(3):
            key = [protocol, "paper", "mq2008"]
            rows.append(key + ["a", fold, 0.5 + shift + fold / 100, 0.4, 1.0, 2.0, 300, 100])
            # b is better on letor_folds, worse on holdout
            rows.append(key + ["b", fold, 0.6 - 2 * shift, 0.3 + fold / 100, 1.0, 3.0, 300, 100])
    return _frame(rows)


def test_best_is_marked_within_each_setting(two_settings):
    t = tables.table1(two_settings, ["ndcg@10", "map"])
    assert t.index == [
        ("holdout/paper", "a"),
        ("holdout/paper", "b"),
        ("letor_folds/paper", "a"),
        ("letor_folds/paper", "b"),
    ]
    assert t.columns == [("mq2008", "NDCG@10"), ("mq2008", "MAP")]
    # holdout: a = 0.61.., b = 0.4; letor_folds: a = 0.51, b = 0.6; MAP: a 0.4 > b 0.31 in both
    assert t.best.tolist() == [[True, True], [False, False], [False, True], [True, False]]
    md = tables.to_markdown(t)
    assert md.splitlines()[0] == "| Setting | Model | mq2008 NDCG@10 | mq2008 MAP |"
    assert "| letor_folds/paper | b | **0.600(0)** | 0.3100(58) |" in md


def test_renderers_agree(two_settings):
    t = tables.table1(two_settings, ["ndcg@10", "map"])
    rows = list(csv.DictReader(io.StringIO(tables.to_csv(t))))
    tex = tables.to_latex(t)
    md = tables.to_markdown(t)
    for i, row in enumerate(rows):
        for j, name in enumerate(t.column_names()):
            cell = t.cell(i, j)
            assert row[name] == cell
            assert row[f"{name} best"] == str(bool(t.best[i, j]))
            assert float(row[f"{name} mean"]) == pytest.approx(t.mean[i, j])
            assert (f"**{cell}**" if t.best[i, j] else f" {cell} ") in md
            assert (f"\\textbf{{{cell}}}" if t.best[i, j] else f" {cell} ") in tex
    assert tex.count("\\midrule") == 2  # below the header and between the two settings
    assert "\\midrule\nletor\\_folds/paper & a" in tex


def test_single_model_column_is_not_marked_and_missing_is_dash():
    f = _frame(
        [
            ["single", "graded", "d1", "a", 0, 0.5, math.nan, 1.0, 1.0, 10, 5],
            ["single", "graded", "d2", "b", 0, 0.7, 0.2, 1.0, 1.0, 10, 5],
        ]
    )
    t = tables.table1(f, ["ndcg@10", "map"])
    assert not t.best.any()  # one value per column: nothing to compare
    assert t.frame().loc[("single/graded", "a"), "d1 MAP"] == "–"
    assert t.frame().loc[("single/graded", "a"), "d2 NDCG@10"] == "–"
    assert t.frame().loc[("single/graded", "b"), "d2 NDCG@10"] == "0.700"  # one fold: no SE
    assert (
        tables.to_markdown(t).splitlines()[0]
        == "| Model | d1 NDCG@10 | d1 MAP | d2 NDCG@10 | d2 MAP |"
    )


def test_latex_escape():
    assert tables.latex_escape("a_b & 50% #1") == r"a\_b \& 50\% \#1"


def test_table3_without_times_has_a_note():
    f = _frame([["single", "paper", "d", "a", 0, 0.5, 0.5, 1.0, 1.0, 10, 5]]).drop(
        columns=[tk.TIME_READ, tk.TIME_FIT]
    )
    t = tables.table3(f)
    assert t.index == [] and t.notes


def test_fold_ratio_from_params_and_fallback():
    f = _frame([["p", "e", "d", m, k, 0.5, 0.5, 1, 1, 300, 100] for m in "ab" for k in range(4)])
    ratio, note = fold_ratio(f)
    assert note is None and np.allclose(ratio, 1 / 3)
    f.loc[f["fold"] == 2, ["n_train", "n_test"]] = math.nan
    ratio, note = fold_ratio(f)
    assert ratio[2] == pytest.approx(1 / 3) and "1/(k-1)" in note  # k = 4 folds


def test_compare_skips_with_fewer_than_two_models(two_settings):
    only_a = two_settings[two_settings["model"] == "a"]
    comps = compare(only_a, ["ndcg@10"])
    assert len(comps) == 2  # two settings, one dataset, one metric
    for c in comps:
        assert c.pvalues is None and c.friedman is None
        assert any("tests skipped" in n for n in c.notes)
    comps = compare(two_settings, ["ndcg@10"])
    assert all(c.pvalues is not None for c in comps)
    assert comps[0].slug == "holdout_paper_mq2008_ndcg_at_10"


def test_table3_states_its_hardware_and_never_averages_across_machines():
    laptop, cluster = "laptop CPU, 4 threads, on cpu", "cluster CPU, 32 threads, on cpu"
    rows = [["p", "e", "d", "a", k, 0.5, 0.5, 1.0, 10.0, 300, 100] for k in range(4)]
    one = _frame(rows).assign(hardware=laptop)
    t = tables.table3(one)
    assert t.caption.endswith("on " + laptop) and t.notes == [
        f"Run times (Table 3) come from one machine: {laptop}."
    ]
    assert {labels[2] for labels in t.index} == {laptop} and "Hardware" in tables.to_csv(t)
    # folds 2, 3 on another machine: their own rows, each mean over its own folds only
    two = one.assign(hardware=[laptop, laptop, cluster, cluster])
    two.loc[two["hardware"] == cluster, tk.TIME_FIT] = 1.0
    t = tables.table3(two)
    fit = {labels[2]: t.mean[i, 0] for i, labels in enumerate(t.index) if "Train" in labels[3]}
    assert fit == {laptop: 10.0, cluster: 1.0}
    assert "2 different machines" in t.notes[0] and "never averaged" in t.notes[0]
    assert "| Hardware |" in tables.to_markdown(t).splitlines()[0]


def test_times_of_a_fold_whose_seeds_ran_on_different_hardware_are_left_out():
    from ltr_bench.report.collect import mean_over_seeds

    rows = [["p", "e", "d", "a", 0, 0.5, 0.5, 1.0, t, 300, 100] for t in (10.0, 1.0)]
    rows += [["p", "e", "d", "a", 1, 0.5, 0.5, 1.0, t, 300, 100] for t in (10.0, 12.0)]
    f = _frame(rows).assign(
        seed=["0", "1", "0", "1"],
        hardware=["laptop", "cluster", "laptop", "laptop"],
        run_id=list("wxyz"),
        start_time=0,
        end_time=0,
    )
    notes: list[str] = []
    out = mean_over_seeds(f, notes).set_index("fold")
    assert math.isnan(out.loc[0, tk.TIME_FIT]) and out.loc[1, tk.TIME_FIT] == 11.0
    assert out.loc[0, NDCG] == 0.5 and out.loc[0, "hardware"] == "cluster + laptop"
    assert any("seeds ran on different hardware" in n and "fold 0" in n for n in notes)
