"""Rows of a model table: a model config, or a labelled variant of one (a model plus overrides).

An experiment's ``models`` list names its rows. A plain entry is a model config
(``listnet_star``): the row's label is the config's name and its runs add no override. An entry
that is a key of the optional ``model_variants`` map (label -> overrides) is a variant: its
overrides name the model config (``model=listnet_star``) and what differs (``loss=listmle``), e.g.

    '+experiment.model_variants={listnet_star_listmle:["model=listnet_star","loss=listmle"]}'
    'experiment.models=[listnet_star,listnet_star_listmle]'

A variant is swept with its model config's search space (``search=<model>``) and its runs carry
the label as ``model.name`` (hence the ``ltr.model`` tag, run names and every report's rows), so
two variants of one config never merge into one row of a report.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ltr_bench.config.util import plain
from ltr_bench.errors import UserError

_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class ModelEntry:
    """One row of a model table: its label, model config and extra overrides of its runs."""

    label: str
    model: str
    overrides: tuple[str, ...] = ()


def _variant(label: str, overrides: Any) -> ModelEntry:
    """The entry of ``model_variants.<label>``; a malformed one is one sentence naming it."""
    where = f"experiment.model_variants.{label}"
    if not _LABEL.match(label):
        raise UserError(
            f"{where}: a label is letters, digits and underscores (it becomes model.name); "
            "rename it, e.g. listnet_star_listmle"
        )
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        raise UserError(f'{where}: expected a list of overrides, e.g. ["model=listnet_star"]')
    models = [o.split("=", 1)[1] for o in overrides if o.split("=", 1)[0] == "model"]
    if len(models) != 1:
        raise UserError(f"{where}: name its model config once, e.g. model=listnet_star")
    rest = tuple(o for o in overrides if o.split("=", 1)[0] != "model")
    # The label is the runs' model name; the search space (the model config's) then names it too,
    # since a run checks that its search space is the one of its model.
    return ModelEntry(
        label, models[0], (*rest, f"model.name={label}", f"search_space.model={label}")
    )


def model_entries(spec: Mapping[str, Any]) -> dict[str, ModelEntry]:
    """The experiment's rows in order: ``spec.models``, each a model config or a label of
    ``spec.model_variants``. Raises :class:`UserError` for a label used twice."""
    variants = plain(spec.get("model_variants")) or {}
    if not isinstance(variants, Mapping):
        raise UserError(
            "experiment.model_variants: expected a map label -> overrides, e.g. "
            '{listnet_star_listmle:["model=listnet_star","loss=listmle"]}'
        )
    out: dict[str, ModelEntry] = {}
    for name in plain(spec.get("models")) or []:
        label = str(name)
        if label in out:
            raise UserError(f"experiment.models: {label} is listed twice; list each row once")
        entry = _variant(label, variants[label]) if label in variants else ModelEntry(label, label)
        out[label] = entry
    return out
