"""The results key: a hash over what decides an experiment's results, and nothing else.

Every option of an experiment's spec is in one of three classes, declared beside its driver with
:func:`spec_classes`:

- *deciding*: what can change a number (datasets, models, search spaces, protocol, budget, seed,
  scale, precision, the evaluation convention) -- only these enter the key;
- *execution*: how the work runs (processes, threads, launcher, tracking, progress, work folders);
- *presentation*: what a page or a verdict recomputes from the results anyway (titles, names,
  baselines, the driver's ``_target_``).

A class covers an option and everything below it (``names`` covers ``names.ranknet``). The
command line's overrides that reach a run's config are deciding, but for those of
:data:`EXECUTION_OVERRIDES`; a dataset's location (:data:`LOCATION_OVERRIDES`, ``$LTR_DATA``)
is replaced by the sha256 of the files it reads (:mod:`~ltr_bench.experiments.fingerprints`).

:func:`results_inputs` writes the deciding inputs as a readable record (kept in each results
bundle), :func:`results_key` hashes it, and :func:`differences` names what differs between two
records ("`n_trials`: 30 then, 20 now"). A key promises the same experiment, not the same numbers
(an asynchronous sweep can choose differently), and it does not cover the code: that is the
behaviour snapshot's to catch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ltr_bench.errors import UserError

DECIDING, EXECUTION, PRESENTATION = "deciding", "execution", "presentation"

#: Override keys (and their sub-keys) that say how a run goes, not what it computes.
EXECUTION_OVERRIDES = (
    "threads",
    "tracking",
    "experiment_name",
    "trainer.enable_progress_bar",
    "hydra/launcher",
    "hydra.launcher",
    "hydra.run",
    "hydra.sweep",
    "hydra.job",
    "hydra.job_logging",
    "hydra.hydra_logging",
    "hydra.output_subdir",
    "hydra.verbose",
    "hydra.sweeper.n_jobs",
    "hydra.sweeper.storage",
)
#: Override keys that say where a dataset's files are: the files' sha256 stands for them.
LOCATION_OVERRIDES = ("dataset.root", "dataset.path", "dataset.folder", "dataset.cache_dir")


@dataclass(frozen=True)
class SpecClasses:
    """The class of each option of a driver's spec (dotted paths; a path covers its subtree)."""

    deciding: frozenset[str]
    execution: frozenset[str]
    presentation: frozenset[str]

    def of(self, path: str) -> str | None:
        """The class of ``path`` (its own, else its nearest classified parent's); None if none."""
        parts = path.split(".")
        for n in range(len(parts), 0, -1):
            prefix = ".".join(parts[:n])
            for name, members in (
                (DECIDING, self.deciding),
                (EXECUTION, self.execution),
                (PRESENTATION, self.presentation),
            ):
                if prefix in members:
                    return name
        return None


#: Options every experiment spec has or may have.
COMMON = SpecClasses(
    deciding=frozenset({"name"}),
    execution=frozenset({"in_process", "execute", "work_dir", "bundles_dir"}),
    presentation=frozenset({"_target_", "title", "mlflow_experiment", "results_page"}),
)

_REGISTRY: dict[Callable[..., Any], SpecClasses] = {}
F = TypeVar("F", bound=Callable[..., Any])


def spec_classes(
    *,
    deciding: Iterable[str] = (),
    execution: Iterable[str] = (),
    presentation: Iterable[str] = (),
) -> Callable[[F], F]:
    """Declare the classes of a driver's spec options (beyond :data:`COMMON`) beside the driver:

    >>> @spec_classes(deciding=["models"], presentation=["names"])
    ... def run(exp): ...
    """

    classes = SpecClasses(
        COMMON.deciding | frozenset(deciding),
        COMMON.execution | frozenset(execution),
        COMMON.presentation | frozenset(presentation),
    )
    clash = (
        (classes.deciding & classes.execution)
        | (classes.deciding & classes.presentation)
        | (classes.execution & classes.presentation)
    )
    if clash:
        raise ValueError(f"options {sorted(clash)} are declared in two classes")

    def register(driver: F) -> F:
        _REGISTRY[driver] = classes
        return driver

    return register


def classes_of(spec: Mapping[str, Any]) -> SpecClasses:
    """The classes declared by the driver that ``spec._target_`` names."""
    from hydra.utils import get_method

    target = str(spec.get("_target_"))
    driver = get_method(target)
    if driver not in _REGISTRY:
        raise UserError(
            f"experiment driver {target} declares no option classes; decorate it with "
            "ltr_bench.experiments.results_key.spec_classes"
        )
    return _REGISTRY[driver]


def leaf_paths(data: Any, prefix: str = "") -> list[str]:
    """Every dotted path of a nested mapping down to its leaves (lists are leaves)."""
    if not isinstance(data, Mapping) or not data:
        return [prefix] if prefix else []
    out: list[str] = []
    for key, value in data.items():
        out += leaf_paths(value, f"{prefix}.{key}" if prefix else str(key))
    return out


def unclassified(spec: Mapping[str, Any], classes: SpecClasses) -> list[str]:
    """The options of ``spec`` that no class covers."""
    return [p for p in leaf_paths(spec) if classes.of(p) is None]


def override_key(override: str) -> str:
    """``"+a.b=1" -> "a.b"``; ``"hydra/launcher=joblib" -> "hydra/launcher"``."""
    return override.split("=", 1)[0].lstrip("+~")


def _under(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == p or key.startswith(p + ".") or key.startswith(p + "/") for p in prefixes)


def override_class(override: str) -> str:
    """``execution`` for where or how a run goes (including a dataset's location, which the
    files' sha256 stands for), ``deciding`` for the rest."""
    key = override_key(override)
    if _under(key, EXECUTION_OVERRIDES) or _under(key, LOCATION_OVERRIDES):
        return EXECUTION
    return DECIDING


def _is_override(value: Any) -> bool:
    if not isinstance(value, str) or "=" not in value:
        return False
    key = override_key(value)
    return bool(key) and all(c.isalnum() or c in "_./@-" for c in key)


def _deciding_value(value: Any) -> Any:
    """A deciding option's value as it enters the key: override lists without their execution
    overrides, and a nested ``_target_`` by its name alone (moving a module keeps the key)."""
    if isinstance(value, Mapping):
        return {
            str(k): (str(v).rsplit(".", 1)[-1] if k == "_target_" else _deciding_value(v))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [
            _deciding_value(v)
            for v in value
            if not (_is_override(v) and override_class(v) == EXECUTION)
        ]
    return value


def deciding_spec(spec: Mapping[str, Any], classes: SpecClasses) -> dict[str, Any]:
    """The deciding options of ``spec`` (an option no class covers counts as deciding: a new
    option changes keys until it is classified, never silently)."""

    def keep(data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            kind = classes.of(path)
            if kind == DECIDING:
                out[str(key)] = _deciding_value(value)
            elif kind is None:
                if isinstance(value, Mapping) and value:
                    kept = keep(value, path)
                    if kept:
                        out[str(key)] = kept
                else:
                    out[str(key)] = _deciding_value(value)
        return out

    return keep(spec, "")


def results_inputs(
    name: str,
    scale: str,
    seed: int,
    spec: Mapping[str, Any],
    overrides: Sequence[str],
    data: Mapping[str, Any],
    classes: SpecClasses | None = None,
) -> dict[str, Any]:
    """The readable record of what decides an invocation's results: experiment, scale, seed, the
    deciding options of its resolved spec, the deciding command-line overrides and the sha256 of
    each dataset's files (``None`` for a dataset absent here)."""
    classes = classes or classes_of(spec)
    return {
        "experiment": name,
        "scale": scale,
        "seed": int(seed),
        "spec": deciding_spec(spec, classes),
        "overrides": sorted(
            o
            for o in overrides
            if override_class(o) == DECIDING and override_key(o) not in ("seed", "scale")
        ),
        "data": {str(k): v for k, v in sorted(data.items())},
    }


def results_key(inputs: Mapping[str, Any]) -> str:
    """A short hash (20 hex digits) of a :func:`results_inputs` record."""
    blob = json.dumps(inputs, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def data_known(inputs: Mapping[str, Any]) -> bool:
    """Whether every dataset of the record was fingerprinted (none absent here)."""
    return all(v is not None for v in (inputs.get("data") or {}).values())


def _flat(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, Mapping) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: data}


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def differences(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between two :func:`results_inputs` records, each as one phrase
    (``` `n_trials=30` then, `n_trials=20` now```); a dataset absent on either side is not
    compared (its files cannot be read here)."""
    out: list[str] = []
    for field in ("experiment", "scale", "seed"):
        if then.get(field) != now.get(field):
            out.append(f"`{field}={then.get(field)}` then, `{field}={now.get(field)}` now")
    old, new = _flat(then.get("spec") or {}), _flat(now.get("spec") or {})
    for path in sorted(set(old) | set(new)):
        if path not in new:
            out.append(f"`{path}={_shown(old[path])}` then, no `{path}` now")
        elif path not in old:
            out.append(f"no `{path}` then, `{path}={_shown(new[path])}` now")
        elif old[path] != new[path]:
            out.append(f"`{path}={_shown(old[path])}` then, `{path}={_shown(new[path])}` now")
    was, now_set = set(then.get("overrides") or []), set(now.get("overrides") or [])
    out += [f"override `{o}` then, not now" for o in sorted(was - now_set)]
    out += [f"override `{o}` now, not then" for o in sorted(now_set - was)]
    out += _data_differences(then.get("data") or {}, now.get("data") or {})
    return out


def _data_differences(then: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    out = []
    for ds in sorted(set(then) | set(now)):
        if ds not in now or ds not in then:
            side = "then" if ds in then else "now"
            out.append(f"dataset {ds} read {side} only")
            continue
        old, new = then[ds], now[ds]
        if old is None or new is None or old == new:
            continue
        changed = sorted(f for f in set(old) | set(new) if old.get(f) != new.get(f))
        shown = ", ".join(changed[:3]) + (" ..." if len(changed) > 3 else "")
        out.append(f"dataset {ds}: files {shown} differ (sha256)")
    return out
