"""Hydra sweep grammar -> Optuna distributions, and sampled values -> overrides that parse back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from ltr_bench.errors import UserError
from ltr_bench.sweeper.search.space import (
    discrete_values,
    format_value,
    parse_override,
    parse_search_space,
)


def _dist(text: str):
    space = parse_search_space({}, [f"p={text}"])
    return space.params["p"]


@pytest.mark.parametrize(
    ("text", "expected", "values"),
    [
        ("choice(a,b,3)", CategoricalDistribution(["a", "b", 3]), ("a", "b", 3)),
        ("a,b,1.5", CategoricalDistribution(["a", "b", 1.5]), ("a", "b", 1.5)),
        (
            "choice(tanh,tanh,linear)",
            CategoricalDistribution(["tanh", "linear"]),
            ("tanh", "linear"),
        ),
        ("range(1,5)", IntDistribution(1, 4), (1, 2, 3, 4)),  # stop exclusive, like Python
        ("range(5,201,65)", IntDistribution(5, 200, step=65), (5, 70, 135, 200)),
        ("range(0,1,0.25)", FloatDistribution(0.0, 0.75, step=0.25), (0.0, 0.25, 0.5, 0.75)),
        ("shuffle(range(1,4))", CategoricalDistribution([1, 2, 3]), (1, 2, 3)),
        ("tag(log, range(1,9))", IntDistribution(1, 8, log=True), tuple(range(1, 9))),
        ("interval(0.001,1)", FloatDistribution(0.001, 1.0), None),
        ("interval(1,5)", FloatDistribution(1.0, 5.0), None),  # Hydra's interval is float ...
        ("int(interval(1,5))", IntDistribution(1, 5), None),  # ... unless cast to int
        ("tag(log, interval(1e-4,1e-1))", FloatDistribution(1e-4, 0.1, log=True), None),
    ],
)
def test_grammar_to_distribution(text: str, expected, values) -> None:
    param = _dist(text)
    assert param.distribution == expected
    assert param.values == values


def test_list_choices_are_kept_as_override_text() -> None:
    param = _dist("choice([64,64],[128])")
    assert param.encoded and param.values == ("[64,64]", "[128]")
    assert param.override("[64,64]") == "p=[64,64]"
    assert parse_override(param.override("[64,64]")).value() == [64, 64]


def test_command_line_replaces_config_and_fixed_overrides_pass_through() -> None:
    space = parse_search_space(
        {"x": "range(0,4)", "y": "choice(0,1)", "k": 7, "activation": "choice(tanh,linear)"},
        ["y=5", "+model.extra=interval(0,1)", "dataset=mq2008"],
    )
    assert list(space.params) == ["x", "activation", "model.extra"]
    assert space.fixed == ("k=7", "y=5", "dataset=mq2008")
    assert space.params["model.extra"].key == "+model.extra"
    assert space.size() is None
    overrides = space.job_overrides({"x": 2, "activation": "linear", "model.extra": 0.5})
    assert overrides == [
        "k=7",
        "y=5",
        "dataset=mq2008",
        "x=2",
        "activation=linear",
        "+model.extra=0.5",
    ]


def test_grid_points_are_the_product_in_declaration_order() -> None:
    space = parse_search_space({"a": "choice(u,v)", "b": "range(0,3)"}, ["c=true,false"])
    assert space.size() == 12
    points = list(space.grid_points())
    assert len(points) == 12 and points[0] == {"a": "u", "b": 0, "c": True}
    assert points[1] == {"a": "u", "b": 0, "c": False} and points[-1] == {
        "a": "v",
        "b": 2,
        "c": False,
    }
    assert len({tuple(p.values()) for p in points}) == 12


@pytest.mark.parametrize(
    ("params", "arguments", "message"),
    [
        ({"lr": "interval(0.1,1)", "n": "range(1,3)"}, [], "lr is an interval"),
        ({}, ["p=tag(log, choice(1,2))"], "applies to interval or range"),
        ({}, ["p=range(3,3)"], "is empty"),
        ({}, ["p=interval(2,1)"], "start < end"),
        ({}, ["p=tag(log, interval(0,1))"], "start > 0"),
        ({}, ["p=tag(log, range(1,10,2))"], "step 1"),
        ({}, ["p=choice(a"], "Cannot parse"),
    ],
)
def test_bad_search_spaces_name_the_parameter(params, arguments, message) -> None:
    with pytest.raises(UserError, match=message):
        parse_search_space(params, arguments).grid_values()


def test_discrete_values_for_study_per() -> None:
    assert discrete_values(parse_override("fold=range(0,3)")) == ["fold=0", "fold=1", "fold=2"]
    assert discrete_values(parse_override("fold=2")) == ["fold=2"]
    with pytest.raises(UserError):
        discrete_values(parse_override("fold=interval(0,1)"))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, "null"),
        (True, "true"),
        (3, "3"),
        (1e-05, "1e-05"),
        ("tanh", "tanh"),
        ("3", "'3'"),
        ("true", "'true'"),
        ("a,b", "'a,b'"),
    ],
)
def test_format_value_examples(value, text) -> None:
    assert format_value(value) == text


_scalars = st.one_of(
    st.booleans(),
    st.integers(-(10**9), 10**9),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), max_size=12).filter(
        lambda s: "${" not in s
    ),
)


@settings(max_examples=150, deadline=None)
@given(_scalars)
def test_format_value_round_trips_through_hydra(value) -> None:
    parsed = parse_override(f"k={format_value(value)}").value()
    assert parsed == value and type(parsed) is type(value)


def test_point_encodes_config_values_in_the_spaces_representation() -> None:
    space = parse_search_space(
        {},
        [
            "net=choice([64,32],[10,5])",
            "act=choice(tanh,linear)",
            "decay=choice(1.0,0.001)",
            "lr=tag(log, interval(1e-4,1e-2))",
            "epochs=choice(5,10,30)",
            "layers=range(2,6)",
        ],
    )
    point = space.point(
        {"net": [64, 32], "act": "tanh", "decay": 1, "lr": 0.004, "epochs": 10.0, "layers": 3},
        "here",
    )
    assert point == {
        "net": "[64,32]",
        "act": "tanh",
        "decay": 1.0,
        "lr": 0.004,
        "epochs": 10,
        "layers": 3,
    }
    assert type(point["epochs"]) is int  # the choice itself, so Optuna sees a known value
    assert space.point({"net": "[10, 5]"}, "here") == {
        "net": "[10,5]"
    }  # override text, any spacing
    assert space.params["net"].override(point["net"]) == "net=[64,32]"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"nope": 1}, "'nope' is not a swept parameter"),
        ({"net": [1, 2]}, "net=[1,2] is not one of its choices"),
        ({"lr": 0.5}, "lr=0.5 is outside its range"),
        ({"layers": 2.5}, "layers=2.5 is outside its range"),
        ({"layers": 6}, "layers=6 is outside its range"),
        ({"lr": "fast"}, "lr needs a number"),
        ({"act": True}, "is not one of its choices"),
    ],
)
def test_point_outside_the_space_is_a_user_error(values, message) -> None:
    space = parse_search_space(
        {},
        [
            "net=choice([64,32])",
            "act=choice(tanh,1)",
            "lr=interval(1e-4,1e-2)",
            "layers=range(2,6)",
        ],
    )
    with pytest.raises(
        UserError, match=r"^where: .*" + message.replace("[", r"\[").replace("]", r"\]")
    ):
        space.point(values, "where")
