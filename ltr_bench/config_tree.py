"""Where the ``conf/`` tree is: the one place that knows, so that nothing imports the CLI for it.

The console scripts hand it to Hydra; the experiment drivers compose run configs from it.
"""

from __future__ import annotations

from pathlib import Path

from ltr_bench.errors import UserError


def config_dir() -> str:
    """The ``conf/`` tree: inside the package if shipped there, else the repository's top level."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "conf", here.parent / "conf"):
        if (candidate / "config.yaml").is_file():
            return str(candidate)
    raise UserError(f"the config tree conf/config.yaml was not found next to {here}; reinstall ltr_bench")
