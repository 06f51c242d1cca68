"""Config checks a run makes before it reads any data: one clear sentence per mistake.

Model/group compatibility (a group the model does not use is ``none``), the top-level keys the
runner owns (``seed``, ``threads``, ``objective``), and DDP inside a multirun. The values of the
loss, optimizer and activation groups are checked where the ranker parses them
(:mod:`ltr_bench.config.util`), not here.
"""

from __future__ import annotations

import os

from omegaconf import DictConfig

from ltr_bench.errors import UserError

COMPAT_GROUPS = ("loss", "optimizer", "activation")
NO_OPTION = "none"  # the option of a group for models that do not use it
SPLITS = ("vali", "test")


def check_compatibility(cfg: DictConfig) -> None:
    """Reject group options (and a search space) the model cannot use, before anything is read.

    A model uses a group (loss, optimizer, activation) when its config passes the group on
    (``model.loss: ${loss}``); a model that does not runs with the group's ``none`` option, and
    which options of a group it does use fit is for the option itself to say where the ranker
    parses it (a loss's kind; :mod:`ltr_bench.config.util`). A search config (``search=<name>``)
    names its model in ``search_space.model``. Raises a one-sentence :class:`UserError`.
    """
    model = cfg.get("model")
    if model is None:
        raise UserError("no model is configured; choose one with model=<name>")
    model_name = model.get("name", "?")
    if "accepts" in model:
        raise UserError(
            f"model.accepts is not read (model={model_name}): a model uses the loss, optimizer "
            "and activation groups its config passes on (model.loss: ${loss}); delete the key"
        )
    space = cfg.get("search_space")
    if space is not None and space.get("model") not in (None, model_name):
        raise UserError(
            f"search={space.get('model')} is the search space of model={space.get('model')}, not of "
            f"model={model_name}; choose search={model_name} (or search={model_name}_grid)"
        )
    for group in COMPAT_GROUPS:
        if group not in cfg or group in model:
            continue
        chosen = cfg[group].get("name") if isinstance(cfg[group], DictConfig) else cfg[group]
        if str(chosen) != NO_OPTION:
            raise UserError(
                f"model={model_name} does not use {group}={chosen}; choose one of "
                f"[{NO_OPTION}] or drop the override"
            )


def check_top_level(cfg: DictConfig) -> None:
    """Validate the top-level keys this module owns (seed, threads, objective)."""
    from ltr_bench.metrics import parse_metric

    seed = cfg.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise UserError(f"seed must be a non-negative integer, got {seed!r}")
    threads = cfg.get("threads")
    if threads is not None and (
        not isinstance(threads, int) or isinstance(threads, bool) or threads < 1
    ):
        raise UserError(f"threads must be null (all cores) or an integer >= 1, got {threads!r}")
    obj = cfg.get("objective") or {}
    split = obj.get("split", "vali")
    if split not in SPLITS:
        raise UserError(f"objective.split must be one of {', '.join(SPLITS)}, got {split!r}")
    try:
        parse_metric(str(obj.get("metric", "ndcg@10")))
    except (UserError, ValueError) as exc:
        raise UserError(f"objective.metric: {exc}") from None


def check_distributed(cfg: DictConfig) -> None:
    """Reject ``trainer=ddp`` inside a multirun when Lightning would start the ranks itself.

    Lightning's ddp launcher starts ranks 1..n-1 by re-running the command line; in a multirun
    (``-m``) that would re-run the whole sweep in every child. Where the ranks are started outside
    (SLURM tasks, torchrun) each process is one rank of one job, which is fine.
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    trainer = cfg.get("trainer")
    if not isinstance(trainer, DictConfig) or not HydraConfig.initialized():
        return
    strategy = str(trainer.get("strategy", "auto"))
    relaunches = strategy.startswith("ddp") and not any(
        s in strategy for s in ("spawn", "fork", "notebook")
    )
    several = str(trainer.get("devices", 1)) != "1" or int(trainer.get("num_nodes", 1) or 1) > 1
    external = any(v in os.environ for v in ("LOCAL_RANK", "SLURM_NTASKS", "TORCHELASTIC_RUN_ID"))
    if relaunches and several and not external and HydraConfig.get().mode == RunMode.MULTIRUN:
        raise UserError(
            f"trainer.strategy={strategy} cannot run inside a multirun (-m): Lightning starts the "
            "other ranks by re-running the command line, which would re-run the sweep; run DDP as "
            "a single run (or refit_best=...) and give sweep trials one device each"
        )
