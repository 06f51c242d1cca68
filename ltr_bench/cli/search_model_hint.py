"""The usual cause of an unknown ``model.*`` key in a sweep, said instead of the generic
sentence: ``search=<name>`` chosen without the model whose keys its space samples (the search
config's ``search_space.model``), e.g. ``-m search=lambdamart`` on the default DirectRanker."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path


def search_model_hint(message: str, args: Sequence[str], conf: Path) -> str:
    """``message`` (a one-sentence user error), or the sentence naming the model to add when the
    unknown key is a model key and ``args`` choose a search space of another model."""
    unknown = re.match(r"(model\.\S+) is not a config key", message)
    if unknown is None:
        return message
    chosen = dict(a.split("=", 1) for a in args if "=" in a and a[0].isalpha())
    search = chosen.get("search")
    if not search:
        return message
    import yaml

    try:
        config = yaml.safe_load((conf / "search" / f"{search}.yaml").read_text()) or {}
        space_model = config["search_space"]["model"]
    except (OSError, yaml.YAMLError, KeyError, TypeError):  # a space of the user's --config-dir
        return message
    model = chosen.get("model")
    if not isinstance(space_model, str) or space_model == model:
        return message
    which = f"model={model}" if model else "the default model"
    return (
        f"{unknown.group(1)} is not a key of {which}: search={search} samples the keys of "
        f"model={space_model}; add model={space_model}"
    )
