"""Hydra plugin entry point for the project's launcher (``hydra/launcher=ltr_pool``): jobs in warm
worker processes, as batches (``launch``) or in flight (``submit``/``wait``, for the ``ltr_optuna``
sweeper). Hydra instantiates only classes defined in ``hydra_plugins``, so this module registers
the config and defines a thin subclass of :class:`ltr_bench.launching.launcher.PoolLauncher`.
"""

from ltr_bench.launching import launcher as _launcher

_launcher.register_configs()


class LtrPoolLauncher(_launcher.PoolLauncher):
    """The ``ltr_pool`` launcher (config: ``ltr_bench.launching.launcher.PoolLauncherConf``)."""
