"""Sect. 5.3 classification from the peaks of r(d_n, d_n+1): boundaries, classes, thresholds."""

from __future__ import annotations

import numpy as np

from ltr_bench.experiments.neighbours import (
    classes_from_boundaries,
    classes_from_thresholds,
    find_boundaries,
    oracle_classes,
)


def test_the_highest_peaks_are_the_class_boundaries() -> None:
    rng = np.random.default_rng(0)
    r = rng.uniform(0, 0.05, size=99)
    r[[29, 69]] = [0.6, 0.4]  # class changes after positions 29 and 69
    r[50] = 0.2  # a smaller peak inside a class
    assert find_boundaries(r, 3, distance=5).tolist() == [29, 69]
    assert find_boundaries(r, 2, distance=5).tolist() == [29]


def test_classes_from_boundaries_put_the_highest_class_first() -> None:
    pred = classes_from_boundaries(10, np.array([2, 6]), 3)
    assert pred.tolist() == [2, 2, 2, 1, 1, 1, 1, 0, 0, 0]


def test_thresholds_classify_scores_like_the_sorted_list() -> None:
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.0])
    thresholds = np.array([0.5, 3.5])  # between positions 4|5 and 1|2
    assert classes_from_thresholds(scores, thresholds, 3).tolist() == [2, 2, 1, 1, 1, 0]


def test_oracle_cuts_at_the_true_class_sizes() -> None:
    y_sorted = np.array([2, 1, 2, 1, 0, 0])
    assert oracle_classes(y_sorted, np.array([0, 1, 2])).tolist() == [2, 2, 1, 1, 0, 0]
