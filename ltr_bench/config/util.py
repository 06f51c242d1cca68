"""Config values as plain Python, and the one parser of group options.

Hydra hands constructors OmegaConf nodes (``_recursive_: false``, experiment specs); code that
stores or compares them wants lists and dicts (:func:`plain`).

The loss, optimizer and activation groups are parsed by :func:`parse_option` alone: a group
option is a registry name (``"adam"``) or a config node ``{name, _target_, **params}``. The
parser resolves ``_target_`` (or the name) to the class or function it builds, and checks every
parameter against that callable's signature, so a key is refused where it is parsed, in one
sentence naming it (``optimizer.lr='abc' is not a number ...``). What a group adds on top (a
loss's kind, torch's own checks of an optimizer's values) lives beside its registry:
:func:`ltr_bench.losses.resolve_loss`, :func:`ltr_bench.models.networks.parse_optimizer` and
:func:`ltr_bench.models.networks.make_activation`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from ltr_bench.errors import UserError

NAME_KEY = "name"  # a group option's name: logged with every run, never an argument
HYDRA_KEYS = ("_target_", "_partial_", "_recursive_", "_convert_", "_args_")
# Keys of a config node that describe it rather than parametrise what it builds.
META_KEYS = (NAME_KEY, *HYDRA_KEYS)


def plain(value: Any) -> Any:
    """OmegaConf containers as plain (resolved) Python containers; other values unchanged."""
    if isinstance(value, (DictConfig, ListConfig)):
        return OmegaConf.to_container(value, resolve=True)
    return value


def option_params(node: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of a config node: every key but :data:`META_KEYS`."""
    return {str(k): v for k, v in node.items() if k not in META_KEYS}


@dataclass(frozen=True)
class Option:
    """A group option, parsed: its key, its name, what it builds and the parameters it passes.

    ``build(*args)`` calls ``target(*args, **params)`` (an optimizer over its parameter groups,
    an activation module); ``bound()`` is the target with the parameters bound (a loss).
    """

    key: str
    name: str
    target: Callable[..., Any]
    params: dict[str, Any] = field(default_factory=dict)

    def build(self, *args: Any) -> Any:
        return self.target(*args, **self.params)

    def bound(self) -> Callable[..., Any]:
        return partial(self.target, **self.params) if self.params else self.target


def parse_option(
    value: Any,
    key: str,
    registry: Mapping[str, Callable[..., Any]],
    what: str,
    *,
    fix: str | None = None,
) -> Option:
    """Parse a group option (a registry name or a node ``{name, _target_, **params}``) once.

    ``_target_`` wins over the name; a name without ``_target_`` is looked up in ``registry``
    (case-insensitive). Raises a one-sentence :class:`UserError` naming ``key`` for a value of
    another type, an unknown name, a ``_target_`` that cannot be imported, a parameter the target
    does not take, and text where the target's default is a number. ``fix`` replaces the
    sentence's default advice for an unknown name (use one of the registry's names).
    """
    fix = fix or f"use one of {sorted(registry)}"
    value = plain(value)
    if isinstance(value, str):
        name, target, params = value.strip(), None, {}
    elif isinstance(value, Mapping):
        name = str(value.get(NAME_KEY, value.get("_target_", ""))).strip()
        target, params = value.get("_target_"), option_params(value)
    else:
        raise UserError(
            f"{key} must be a {what} name or a config node with '_target_', got {value!r}"
        )
    if target:
        fn = _locate(str(target), f"{key}._target_", fix)
    elif name.lower() in registry:
        fn = registry[name.lower()]
    else:
        raise UserError(f"{key}={name} is not a known {what}; {fix}")
    _check_params(fn, params, key, f"the {name!r} {what}")
    return Option(key, name, fn, params)


def _locate(path: str, key: str, fix: str) -> Callable[..., Any]:
    """The callable at dotted ``path`` (Hydra's lookup; its errors become one sentence)."""
    from hydra.utils import get_object

    try:
        fn = get_object(path)
    except (ImportError, ValueError) as err:  # what Hydra's lookup raises
        why = " ".join(str(err).split()) or type(err).__name__
        raise UserError(f"{key}={path} cannot be imported ({why}); {fix}") from None
    if not callable(fn):
        raise UserError(f"{key}={path} is not a class or function")
    return fn


def _check_params(fn: Callable[..., Any], params: Mapping[str, Any], key: str, of: str) -> None:
    """Every parameter is one ``fn`` takes; text is refused where its default is a number."""
    try:
        accepted = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature: its own call checks
        return
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())
    for k, v in sorted(params.items()):
        if k not in accepted:
            if takes_any:
                continue
            raise UserError(f"{key}.{k} is not a parameter of {of}")
        default = accepted[k].default
        numeric = isinstance(default, (int, float)) and not isinstance(default, bool)
        if numeric and isinstance(v, str):
            raise UserError(
                f"{key}.{k}={v!r} is not a number; give a number such as {key}.{k}={default}"
            )
