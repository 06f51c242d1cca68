"""The losses' one registry: how a loss says its kind and cost, and how a config resolves to one.

Pairwise losses take ``r`` -- the ranker's output for pairs whose first document is the more
relevant one (DirectRanker property (i): the target is always "first wins") -- and return a
(weighted) mean. List losses take padded ``[Q, L]`` scores, labels and a mask. Weighted means
divide by the sum of the weights, so a weighting changes the balance between pairs, not the
overall scale the learning rate was tuned for.

**Adding a loss** is one function here (or in any importable module) plus one config file:
decorate it with :func:`pair_loss` or :func:`list_loss` -- that marks its kind (which models can
train with it) and, for list losses, its cost (how its work grows with the query length, which
sizes the query batches) -- and write ``conf/loss/<name>.yaml`` with ``name`` and ``_target_``
(the function's import path) plus its parameters. A model checks the kind, never a list of names;
``_target_`` is what a config resolves to. Example::

    @list_loss(cost_power=1)
    def my_loss(scores, labels, mask, *, temperature=1.0): ...
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from torch import Tensor

from ltr_bench.config.util import parse_option
from ltr_bench.errors import UserError

__all__ = [
    "LossKind",
    "LossInfo",
    "pair_loss",
    "list_loss",
    "loss_info",
    "builtin_losses",
    "resolve_loss",
]

LossKind = Literal["pair", "list"]
F_ = TypeVar("F_", bound=Callable[..., Tensor])


@dataclass(frozen=True)
class LossInfo:
    """What a model needs to know of a loss besides calling it.

    Attributes:
        kind: ``"pair"`` -- ``loss(r, label_hi, weight)`` on the ranker's outputs for sampled
            pairs, more relevant document first; ``"list"`` -- ``loss(scores, labels, mask)`` on
            padded ``[Q, L]`` query batches.
        cost_power: list losses: how one query's work grows with its length L (1: O(L) like
            ListNet, 2: all L^2 pairs like LambdaRank); batches bound ``queries x L^cost_power``.
            Pair losses: 0 (a pair costs the same whatever its query).
        name: the short name of a built-in loss (its ``conf/loss`` option), for use from Python.
    """

    kind: LossKind
    cost_power: int = 0
    name: str | None = None


def pair_loss(fn: F_ | None = None, *, name: str | None = None) -> Any:
    """Mark ``fn(r, label_hi=None, weight=None, **params)`` as a pairwise loss (a decorator,
    with or without arguments)."""

    def mark(f: F_) -> F_:
        f.ltr_loss = LossInfo("pair", 0, name)  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


def list_loss(cost_power: int = 2, *, name: str | None = None) -> Callable[[F_], F_]:
    """Mark ``fn(scores, labels, mask, **params)`` as a list loss whose work per query grows as
    ``L^cost_power`` (a decorator)."""
    if int(cost_power) < 1:
        raise ValueError(f"cost_power of a list loss must be >= 1, got {cost_power}")

    def mark(f: F_) -> F_:
        f.ltr_loss = LossInfo("list", int(cost_power), name)  # type: ignore[attr-defined]
        return f

    return mark


def loss_info(fn: Any) -> LossInfo | None:
    """The :class:`LossInfo` a loss was marked with (None: not marked as a loss)."""
    info = getattr(fn, "ltr_loss", None)
    return info if isinstance(info, LossInfo) else None


#: modules whose named losses are the built-in options (imported on first use: the others import
#: this module for its decorators)
BUILTIN_MODULES = ("ltr_bench.losses.pairwise", "ltr_bench.losses.listwise")


def builtin_losses(kind: LossKind | None = None) -> dict[str, Callable[..., Tensor]]:
    """The losses of :data:`BUILTIN_MODULES` by short name (``{"l2": l2_pair_loss, ...}``), of
    one kind."""
    import importlib

    out = {}
    for module in BUILTIN_MODULES:
        for value in vars(importlib.import_module(module)).values():
            info = loss_info(value)
            if info is not None and info.name and (kind is None or info.kind == kind):
                out[info.name] = value
    return dict(sorted(out.items()))


def resolve_loss(
    value: Any,
    kind: LossKind,
    key: str = "loss",
) -> tuple[Callable[..., Tensor], LossInfo]:
    """The loss function (config parameters bound) and its :class:`LossInfo`.

    ``value`` is a config node ``{name, _target_, **params}`` -- ``_target_`` is what resolves --
    or, from Python, the short name of a built-in loss (a string or a node without
    ``_target_``), parsed by :func:`ltr_bench.config.util.parse_option`. A loss of another kind than
    ``kind`` (what the model trains on) or a function not marked as a loss is a
    :class:`UserError` of one sentence.
    """
    fits = builtin_losses(kind)
    choose = f"choose a {kind} loss, one of [{', '.join(fits)}], or drop the override"
    option = parse_option(value, key, builtin_losses(), "loss", fix=choose)
    info = loss_info(option.target)
    if info is None:
        raise UserError(
            f"{key}._target_={_path(option.target)} is not marked as a loss; decorate it with "
            "ltr_bench.losses.pair_loss or ltr_bench.losses.list_loss"
        )
    if info.kind != kind:
        raise UserError(
            f"{key}={option.name} is a {info.kind} loss, but this model trains with {kind} "
            f"losses; {choose}"
        )
    return option.bound(), info


def _path(fn: Any) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', fn)}"
