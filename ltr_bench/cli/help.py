"""``ltr-bench --help`` without Hydra's group scan: the same text, read straight from ``conf/``.

Hydra renders ``--help`` by composing the config and then listing every config group through a
fresh config repository per group (about 120 deep copies of the whole tree), which costs about a
second before a word is printed. The help template of ``conf/config.yaml`` uses only
``$APP_CONFIG_GROUPS``, and the app's groups are the folders of ``conf/`` (Hydra's own ``hydra/``
groups are not shown), so this module lists them from the folder tree and fills the same template.
A test holds the text equal to Hydra's. Any other help (overrides on the command line, a template
with more placeholders, ``--hydra-help``) is left to Hydra.
"""

from __future__ import annotations

import string
from pathlib import Path

HELP_FLAGS = (["--help"], ["-h"])


def app_config_groups(conf: Path) -> str:
    """``group: option, option`` lines as Hydra's ``$APP_CONFIG_GROUPS`` prints them."""
    groups: dict[str, list[str]] = {}
    for path in conf.rglob("*.yaml"):
        group = path.parent.relative_to(conf).as_posix()
        if group != "." and group != "hydra" and not group.startswith("hydra/"):
            groups.setdefault(group, []).append(path.stem)
    return "".join(f"{g}: {', '.join(sorted(groups[g]))}\n" for g in sorted(groups))


def fast_help(args: list[str], conf: Path) -> str | None:
    """The help text for ``args`` if it is a plain ``--help`` this module can render, else None."""
    if args not in HELP_FLAGS:
        return None
    from omegaconf import OmegaConf

    node = OmegaConf.select(OmegaConf.load(conf / "config.yaml"), "hydra.help.template")
    if not isinstance(node, str):
        return None
    template = string.Template(node)
    if set(template.get_identifiers()) != {"APP_CONFIG_GROUPS"}:
        return None
    return template.substitute(APP_CONFIG_GROUPS=app_config_groups(conf))
