"""The objective a job hands the sweeper: a float that may carry its standard error."""

from __future__ import annotations

import math
import pickle

import pytest

from ltr_bench.sweeper.job import Objective, user_attrs_of
from ltr_bench.sweeper.results import within_one_se


def test_objective_is_a_float_with_finite_attrs_that_survives_pickling() -> None:
    v = Objective(0.72, se=0.01, n_folds=5, skipped=math.nan, none=None)
    assert v == 0.72 and isinstance(v, float) and float(v) + 1 == pytest.approx(1.72)
    assert v.attrs == {"se": 0.01, "n_folds": 5.0}  # non-finite values are dropped
    back = pickle.loads(pickle.dumps(v))
    assert type(back) is Objective and back == v and back.attrs == v.attrs
    assert user_attrs_of(v) == {"objective_se": 0.01, "objective_n_folds": 5.0}
    assert user_attrs_of(0.72) == {} and user_attrs_of(None) == {}
    assert "se=0.01" in repr(v)


def test_within_one_se_counts_on_the_side_of_the_direction() -> None:
    values = [0.70, 0.71, 0.715, 0.72]
    assert within_one_se(values, 0.72, 0.006, maximize=True) == 2
    assert within_one_se(values, 0.72, 0.0, maximize=True) == 1  # the best itself
    assert within_one_se([1.0, 1.2, 2.0], 1.0, 0.25, maximize=False) == 2
