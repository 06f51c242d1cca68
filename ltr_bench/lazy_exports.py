"""Lazy package exports (PEP 562): a package names its public classes and functions, and each is
imported from its module on first use, so importing the package costs nothing until then.

Why: a run pays only for what it uses (a LambdaMART run never imports Lightning; a single run's
``mean_se`` never imports SciPy's statistics), while ``from ltr_bench.models import LambdaMART``
and a config's ``_target_: ltr_bench.models.LambdaMART`` keep working unchanged. A lazy name is
not in the package's namespace until first use, so the package also defines ``__dir__``
(:func:`lazy_dir`): ``dir()`` and tab completion in IPython or Jupyter list every public name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_getattr(
    package: str, namespace: dict[str, Any], where: Mapping[str, str]
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package``: ``where`` maps a public name to its submodule;
    the imported value is cached in the package's ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f"{package}.{module}"), name)
        namespace[name] = value
        return value

    return __getattr__


def lazy_dir(namespace: dict[str, Any], where: Mapping[str, str]) -> Callable[[], list[str]]:
    """A module ``__dir__`` for a package with lazy exports: the names already in its
    ``namespace``, its ``__all__`` and the lazily exported names of ``where``, sorted."""

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(namespace.get("__all__", ())) | set(where))

    return __dir__
