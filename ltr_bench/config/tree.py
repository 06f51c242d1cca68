"""Where the ``conf/`` tree is: the one place that knows, so that nothing imports the CLI for it.

``conf/`` sits at the repository's top level; ``ltr_bench/conf`` is a symlink to it (not a
``package-dir`` mapping in pyproject.toml, which would hide the sweeper plugin from Hydra in an
editable install), so the wheel carries the tree as the package ``ltr_bench.conf`` and Hydra reads
it as a package resource (``pkg://ltr_bench.conf``) in an editable install, from a wheel, and from
any working directory. The console scripts hand it to Hydra; the experiment drivers compose run
configs from it. A user's own config folder joins it through Hydra's ``--config-dir`` /
``hydra.searchpath`` (docs/guides/own-model.md).
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

from ltr_bench.errors import UserError

CONFIG_MODULE = "ltr_bench.conf"
CONFIG_PATH = f"pkg://{CONFIG_MODULE}"  # what hydra.main / hydra.initialize_config_module take


def config_dir() -> str:
    """The folder of the installed ``conf/`` tree (checked to hold ``config.yaml``)."""
    from importlib import resources

    try:
        root = resources.files(CONFIG_MODULE)
    except ModuleNotFoundError:
        root = None
    if root is None or not root.joinpath("config.yaml").is_file():
        here = Path(__file__).resolve().parent
        raise UserError(
            f"the config tree conf/config.yaml is not installed with ltr_bench ({here}); "
            "reinstall it with `pip install ltr_bench` or `pip install -e .` in a checkout"
        )
    return str(root)


def default_node(key: str, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """The config node ``key`` as the ``conf/`` tree composes it by default (with ``overrides``),
    as plain data: what a ranker built in Python without that option takes, so that no default
    is written twice (``default_node("optimizer", ("model=sortnet",))``). Composed once per
    process and arguments."""
    return copy.deepcopy(_composed_node(key, tuple(overrides)))


@functools.cache
def _composed_node(key: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    def node() -> dict[str, Any]:
        cfg = compose(config_name="config", overrides=list(overrides))
        value = OmegaConf.to_container(OmegaConf.select(cfg, key), resolve=True)
        assert isinstance(value, dict), key
        return {str(k): v for k, v in value.items()}

    if GlobalHydra.instance().is_initialized():
        return node()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return node()
