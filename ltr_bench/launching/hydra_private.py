"""Every private Hydra and joblib name the running of jobs needs, in one place;
``tests/launching/test_hydra_private.py`` fails naming the one a release removes or changes."""

from __future__ import annotations

import sys
from typing import Any

#: (object kind, attribute) pairs read below; the test checks each against the installed releases
PRIVATE_NAMES = (
    ("hydra_plugins.hydra_joblib_launcher._core", "execute_job"),
    ("hydra._internal.core_plugins.basic_launcher", "BasicLauncher"),
    ("hydra._internal.config_loader_impl", "create_defaults_list"),
    ("hydra._internal.config_loader_impl.ConfigLoaderImpl", "_compose_config_from_defaults_list"),
    (
        "hydra._internal.config_loader_impl.ConfigLoaderImpl",
        "_parse_overrides_and_create_caching_repo",
    ),
    ("hydra._internal.config_repository.CachingConfigRepository", "cache"),
    ("hydra.core.singleton.Singleton", "_instances"),
    ("joblib._parallel_backends.LokyBackend", "_prepare_worker_env"),
    ("joblib.externals.loky.process_executor", "_MAX_MEMORY_LEAK_SIZE"),
    ("omegaconf._utils", "get_yaml_loader"),
    ("hydra.core.utils", "_check_hydra_context"),
    ("hydra.core.utils", "_save_config"),
    ("hydra.core.utils", "_flush_loggers"),
    ("hydra._internal.deprecation_warning", "deprecation_warning"),
)


def omegaconf_yaml_loader() -> Any:
    """The YAML loader class ``OmegaConf.load`` parses with."""
    from omegaconf._utils import get_yaml_loader

    return get_yaml_loader()


def joblib_execute_job() -> Any:
    """The joblib launcher's function that runs one Hydra job in a worker process."""
    from hydra_plugins.hydra_joblib_launcher._core import execute_job

    return execute_job


def run_job_helpers() -> tuple[Any, Any, Any, Any]:
    """The helpers Hydra's ``run_job`` calls, for :mod:`ltr_bench.launching.job_run` to call as
    it does: ``_check_hydra_context``, ``_save_config``, ``_flush_loggers`` and
    ``deprecation_warning``."""
    from hydra._internal.deprecation_warning import deprecation_warning
    from hydra.core.utils import _check_hydra_context, _flush_loggers, _save_config

    return _check_hydra_context, _save_config, _flush_loggers, deprecation_warning


def basic_launcher_class() -> type:
    """Hydra's default launcher, which runs a batch's jobs one after another in this process."""
    from hydra._internal.core_plugins.basic_launcher import BasicLauncher

    return BasicLauncher


def cached_launcher_classes() -> tuple[type, ...]:
    """The launchers whose jobs may compose through the cache, given a cached Hydra context:
    Hydra's basic launcher (its jobs run in this process) and the joblib launcher (each worker
    unpickles the context with the cache installed)."""
    try:
        from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
    except ImportError:  # the launcher plugin is not installed
        return (basic_launcher_class(),)
    return (basic_launcher_class(), JoblibLauncher)


def hydra_composition() -> tuple[Any, Any]:
    """Hydra's config loader module, whose ``create_defaults_list`` builds a job's defaults tree,
    and its ``ConfigLoaderImpl``, whose ``_parse_overrides_and_create_caching_repo`` sets up the
    config sources (a ``CachingConfigRepository``, its ``cache`` of loaded files) and whose
    ``_compose_config_from_defaults_list`` merges the files."""
    from hydra._internal import config_loader_impl

    return config_loader_impl, config_loader_impl.ConfigLoaderImpl


def hydra_defaults_tree() -> Any:
    """Hydra's defaults-tree module, whose ``_check_not_missing`` decides whether a config
    group's ``???`` default is skipped (a multirun's compose) or an error."""
    from hydra._internal import defaults_list

    return defaults_list


def warm_plugins() -> Any:
    """Hydra's ``Plugins`` singleton of this process if it was built (its plugins searched for),
    else None."""
    from hydra.core.plugins import Plugins
    from hydra.core.singleton import Singleton

    return Singleton._instances.get(Plugins)


def joblib_worker_env(n_jobs: int) -> dict[str, str]:
    """The environment (thread caps) joblib's loky backend gives ``n_jobs`` workers."""
    from joblib._parallel_backends import LokyBackend

    return dict(LokyBackend()._prepare_worker_env(n_jobs=n_jobs))


def keep_worker_as_it_grows() -> None:
    """In a loky worker: never replace it for its memory growth. loky takes a worker whose memory
    grew by 300 MB since its first call for a leaking one and replaces it; a sweep's worker grows
    that much on its first job after the warm-up (its data, LightGBM, the MLflow store), and the
    replacement imports everything again, cold (seconds of every sweep on every worker)."""
    from joblib.externals.loky import process_executor

    process_executor._MAX_MEMORY_LEAK_SIZE = sys.maxsize
