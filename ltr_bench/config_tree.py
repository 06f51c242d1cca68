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

from pathlib import Path

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
