"""Hydra sweep overrides -> Optuna distributions (``choice``/comma lists categorical, ``range``
and ``interval`` numeric, ``tag(log, ...)`` log-scaled, as hydra-optuna-sweeper), and sampled
values -> job overrides; a command-line override replaces a ``params`` entry of its key."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import (
    ChoiceSweep,
    IntervalSweep,
    Override,
    QuotedString,
    RangeSweep,
    Transformer,
)
from hydra.errors import HydraException
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from ltr_bench.errors import UserError
from ltr_bench.sweeper.hydra_private import escape_special_characters
from ltr_bench.sweeper.optuna_private import distribution_contains


@lru_cache(maxsize=1)
def _parser() -> OverridesParser:
    return OverridesParser.create()


def parse_override(text: str) -> Override:
    """Parse one override string with Hydra's grammar; a syntax error becomes a UserError."""
    try:
        return _parser().parse_override(text)
    except HydraException as e:  # OverrideParseException and the grammar functions' errors
        raise UserError(f"Cannot parse the sweep override '{text}': {e}") from e


def _only(container: Any, kind: type) -> Any:
    """The one item (list) or one key (dict) of a parsed container, else a sentinel."""
    items: Any = container  # a list or dict when it is an instance of kind
    if isinstance(container, kind) and len(items) == 1:
        return next(iter(items)) if kind is dict else items[0]
    return _NOTHING


_NOTHING = object()
# Where a value is written (its "context" in an override) -> template and how to read it back.
_CONTEXTS = {
    "top": ("{}", lambda parsed: parsed),
    "list": ("[{}]", lambda parsed: _only(parsed, list)),
    "dict_value": (
        "{{k:{}}}",
        lambda parsed: parsed.get("k", _NOTHING) if isinstance(parsed, dict) else _NOTHING,
    ),
    "dict_key": ("{{{}:1}}", lambda parsed: _only(parsed, dict)),
}


@lru_cache(maxsize=4096, typed=True)  # a sweep formats the same values every trial
def _parses_to(text: str, value: Any, context: str = "top") -> bool:
    """True when ``text``, written in ``context``, parses back to ``value`` (with its type)."""
    template, read = _CONTEXTS[context]
    try:
        parsed = read(_parser().parse_override("k=" + template.format(text)).value())
    except HydraException:  # the text does not parse in this place
        return False
    return type(parsed) is type(value) and parsed == value


# Inside Hydra's quoted strings a backslash escapes only a quote or another backslash before a quote.
_QUOTE_ESCAPES = re.compile(r"(\\*)('|$)")


def format_value(value: Any) -> str:
    """``value`` (scalars, lists, dicts) as a Hydra override value that parses back to exactly
    it; a UserError when Hydra's grammar cannot express it."""
    return _format(value, "top")


def _format(value: Any, context: str) -> str:
    if hasattr(value, "item") and type(value).__module__ == "numpy":
        value = value.item()
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        quoted = (
            "'"
            + _QUOTE_ESCAPES.sub(lambda m: m.group(1) * 2 + ("\\'" if m.group(2) else ""), value)
            + "'"
        )
        for candidate in (value, quoted, escape_special_characters(value)):
            if _parses_to(candidate, value, context):
                return candidate
        raise UserError(f"The sweep value {value!r} cannot be written as a Hydra override.")
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_format(v, "list") for v in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(f"{_format_key(k)}:{_format(v, 'dict_value')}" for k, v in value.items())
            + "}"
        )
    raise UserError(f"The sweep value {value!r} has unsupported type {type(value).__name__}.")


def _format_key(key: Any) -> str:
    """A dict key: Hydra's grammar has no quoted keys, only bare or backslash-escaped ones."""
    if isinstance(key, (bool, int, float)) or key is None:
        text = _format(key, "top")
        if _parses_to(text, key, "dict_key"):
            return text
    elif isinstance(key, str):
        for candidate in (key, escape_special_characters(key)):
            if _parses_to(candidate, key, "dict_key"):
                return candidate
    raise UserError(f"The dict key {key!r} cannot be written as a Hydra override.")


@dataclass(frozen=True)
class SearchParam:
    """One swept parameter: its override key, Optuna distribution and (if finite) its values."""

    name: str
    key: str
    distribution: BaseDistribution
    values: tuple[Any, ...] | None
    encoded: bool = False

    def override(self, value: Any) -> str:
        """The job override that sets this parameter to ``value``."""
        text = str(value) if self.encoded else format_value(value)
        return f"{self.key}={text}"

    def encode(self, value: Any, where: str) -> Any:
        """A config's ``value`` in Optuna's representation; a UserError outside the space."""
        if isinstance(self.distribution, CategoricalDistribution):
            if self.encoded:  # choices kept as override text: compare texts of parsed values
                parsed: Any = (
                    parse_override(f"{self.key}={value}").value()
                    if isinstance(value, str)
                    else value
                )
                value = Transformer.str(parsed)
            for choice in self.distribution.choices:
                if _same_choice(choice, value):
                    return choice
            raise UserError(
                f"{where}: {self.name}={value} is not one of its choices "
                f"{', '.join(map(str, self.distribution.choices))}"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{where}: {self.name} needs a number, got {value!r}")
        number = int(value) if isinstance(self.distribution, IntDistribution) else float(value)
        if number != value or not distribution_contains(
            self.distribution, self.distribution.to_internal_repr(number)
        ):
            d: Any = self.distribution  # an Int- or FloatDistribution here
            raise UserError(
                f"{where}: {self.name}={value} is outside its range [{d.low}, {d.high}]"
            )
        return number


@dataclass(frozen=True)
class SearchSpace:
    """The swept parameters (declaration order) and the fixed overrides passed to every job."""

    params: Mapping[str, SearchParam]
    fixed: tuple[str, ...] = ()

    def distributions(self) -> dict[str, BaseDistribution]:
        return {name: p.distribution for name, p in self.params.items()}

    def size(self) -> int | None:
        """Number of distinct points, or None when a parameter is continuous."""
        if any(p.values is None for p in self.params.values()):
            return None
        return math.prod(len(p.values or ()) for p in self.params.values())

    def grid_values(self) -> dict[str, list[Any]]:
        """Finite values per parameter for a grid search; a UserError names any continuous one."""
        continuous = [n for n, p in self.params.items() if p.values is None]
        if continuous:
            raise UserError(
                "The grid sampler needs discrete parameters (choice, range or comma lists), "
                f"but {', '.join(continuous)} is an interval."
            )
        return {n: list(p.values) for n, p in self.params.items()}  # type: ignore[arg-type]

    def grid_points(self) -> Iterator[dict[str, Any]]:
        """All grid points in product order (first parameter varies slowest)."""
        grid = self.grid_values()
        names = list(grid)
        for combo in itertools.product(*grid.values()):
            yield dict(zip(names, combo))

    def point(self, values: Mapping[str, Any], where: str) -> dict[str, Any]:
        """Optuna params of a (partial) point; a UserError naming ``where`` outside the space."""
        out: dict[str, Any] = {}
        for name, value in values.items():
            param = self.params.get(str(name).lstrip("+~"))
            if param is None:
                raise UserError(
                    f"{where}: '{name}' is not a swept parameter (swept: {', '.join(self.params)})"
                )
            out[param.name] = param.encode(value, where)
        return out

    def job_overrides(self, params: Mapping[str, Any]) -> list[str]:
        """The override list of one job: fixed overrides, then one per swept parameter."""
        return [*self.fixed, *(self.params[n].override(params[n]) for n in self.params)]


def _same_choice(choice: Any, value: Any) -> bool:
    """Equal as choice values: 1 matches 1.0, but True never matches 1 and '1' never matches 1."""
    if isinstance(choice, bool) or isinstance(value, bool):
        return choice is value
    if isinstance(choice, (int, float)) and isinstance(value, (int, float)):
        return float(choice) == float(value)
    return type(choice) is type(value) and choice == value


def collect_overrides(
    params: Mapping[str, Any] | None, arguments: Sequence[str]
) -> dict[str, Override]:
    """Parse ``hydra.sweeper.params`` then the command-line overrides; later keys replace earlier."""
    merged: dict[str, Override] = {}
    texts = [f"{k}={v}" for k, v in (params or {}).items()] + list(arguments)
    for text in texts:
        override = parse_override(text)
        name = override.get_key_element().lstrip("+~")  # the Optuna name: no +, ++ or ~
        merged.pop(name, None)  # keep the order of the winning declaration
        merged[name] = override
    return merged


def discrete_values(override: Override) -> list[str]:
    """Override strings ``key=value`` for each value of a discrete sweep (or the single value)."""
    if not override.is_sweep_override():
        return [_text(override)]
    if override.is_interval_sweep():
        raise UserError(f"'{override.input_line}' is an interval; study_per needs discrete values.")
    key = override.get_key_element()
    return [f"{key}={v}" for v in override.sweep_string_iterator()]


def _text(override: Override) -> str:
    return (
        override.input_line or f"{override.get_key_element()}={override.get_value_element_as_str()}"
    )


def build_space(overrides: Mapping[str, Override]) -> SearchSpace:
    """Split parsed overrides into swept parameters and fixed overrides."""
    params: dict[str, SearchParam] = {}
    fixed: list[str] = []
    for name, override in overrides.items():
        if not override.is_sweep_override():
            fixed.append(_text(override))
            continue
        params[name] = _to_param(name, override)
    return SearchSpace(params=params, fixed=tuple(fixed))


def _to_param(name: str, override: Override) -> SearchParam:
    key = override.get_key_element()
    value = override.value()
    tags = set(getattr(value, "tags", None) or ())
    log = "log" in tags
    where = f"sweep parameter '{name}' ({override.input_line})"
    if isinstance(value, ChoiceSweep):
        if log:
            raise UserError(f"The {where}: tag(log, ...) applies to interval or range, not choice.")
        return _choice_param(name, key, list(value.list), where)
    if isinstance(value, RangeSweep):
        return _range_param(name, key, value, log, where)
    if isinstance(value, IntervalSweep):
        return _interval_param(name, key, value, log, where)
    raise UserError(f"The {where} uses an unsupported sweep type.")


def _choice_param(name: str, key: str, items: list[Any], where: str) -> SearchParam:
    items = [i.text if isinstance(i, QuotedString) else i for i in items]
    encoded = any(not isinstance(i, (str, int, float, bool)) for i in items)
    if encoded:
        items = [Transformer.str(i) for i in items]
    unique: list[Any] = []
    for item in items:
        if not any(type(item) is type(u) and item == u for u in unique):
            unique.append(item)
    if not unique:
        raise UserError(f"The {where} has no values.")
    return SearchParam(name, key, CategoricalDistribution(unique), tuple(unique), encoded)


def _range_param(name: str, key: str, value: RangeSweep, log: bool, where: str) -> SearchParam:
    # Hydra's grammar fills start and stop; typed Optional in its dataclass
    start: Any = value.start
    stop: Any = value.stop
    step: Any = value.step
    if step == 0:
        raise UserError(f"The {where} has step 0.")
    if all(isinstance(v, int) for v in (start, stop, step)):
        values: list[Any] = list(range(start, stop, step))
    else:
        n = max(0, math.ceil((stop - start) / step - 1e-9))
        values = [round(start + i * step, 12) for i in range(n)]
    if not values:
        raise UserError(f"The {where} is empty.")
    if value.shuffle or step < 0:
        if log:
            raise UserError(f"The {where}: tag(log, ...) needs an increasing, unshuffled range.")
        return SearchParam(name, key, CategoricalDistribution(values), tuple(values))
    if log and (step != 1 or not isinstance(start, int) or values[0] <= 0):
        raise UserError(
            f"The {where}: a log range needs integers > 0 and step 1; use interval instead."
        )
    if isinstance(values[0], int):
        dist: BaseDistribution = IntDistribution(
            values[0], values[-1], log=log, step=1 if log else step
        )
    else:
        dist = FloatDistribution(values[0], values[-1], step=step)
    return SearchParam(name, key, dist, tuple(values))


def _interval_param(
    name: str, key: str, value: IntervalSweep, log: bool, where: str
) -> SearchParam:
    low: Any = value.start  # both set by Hydra's grammar; typed Optional in its dataclass
    high: Any = value.end
    if not low < high:
        raise UserError(f"The {where} needs start < end.")
    if log and low <= 0:
        raise UserError(f"The {where}: a log interval needs start > 0.")
    if isinstance(low, int) and isinstance(high, int):
        return SearchParam(name, key, IntDistribution(low, high, log=log), None)
    return SearchParam(name, key, FloatDistribution(float(low), float(high), log=log), None)


def parse_search_space(
    params: Mapping[str, Any] | None, arguments: Sequence[str] = ()
) -> SearchSpace:
    """``hydra.sweeper.params`` plus command-line overrides -> :class:`SearchSpace`."""
    return build_space(collect_overrides(params, arguments))
