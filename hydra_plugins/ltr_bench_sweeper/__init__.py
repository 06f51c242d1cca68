"""Hydra plugin entry point for the project's Optuna sweeper (``hydra/sweeper=ltr_optuna``).

Hydra discovers plugins only in the ``hydra_plugins`` namespace package and instantiates only
classes defined there, so this module registers the configs and defines a thin subclass of
:class:`ltr_bench.sweeper.sweeper.OptunaSweeperImpl`. It imports no Optuna at import time, so
plugin discovery stays cheap for every Hydra app.
"""

from ltr_bench.sweeper import config as _config
from ltr_bench.sweeper import sweeper as _sweeper

_config.register_configs()


class LtrOptunaSweeper(_sweeper.OptunaSweeperImpl):
    """The ``ltr_optuna`` sweeper (config surface: ``ltr_bench.sweeper.config``)."""
