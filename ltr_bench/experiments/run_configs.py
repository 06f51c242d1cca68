"""Run configs composed from the project's ``conf/`` tree, for the runs an experiment starts and
for what it needs to know of a config (a dataset's files, a model's options)."""

from __future__ import annotations

from collections.abc import Sequence

from omegaconf import DictConfig


def compose_run_config(overrides: Sequence[str]) -> DictConfig:
    """The project's run config composed with ``overrides`` (Hydra's compose API).

    Inside a running ``ltr-bench`` the app's Hydra instance is reused; elsewhere (tests,
    notebooks) the ``conf/`` tree is initialised for the call.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ltr_bench.config.tree import config_dir

    if GlobalHydra.instance().is_initialized():
        return compose(config_name="config", overrides=list(overrides))
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))
