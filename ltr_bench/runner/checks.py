"""Config checks a run makes before it reads any data: one clear sentence per mistake.

Model/group compatibility (``model.accepts``), the top-level keys the runner owns (``seed``,
``threads``, ``objective``), text given where a number is expected, and DDP inside a multirun.
"""

from __future__ import annotations

import os

from omegaconf import DictConfig, OmegaConf

from ltr_bench.errors import UserError

COMPAT_GROUPS = ("loss", "optimizer", "activation")
SPLITS = ("vali", "test")


def check_compatibility(cfg: DictConfig) -> None:
    """Reject group options (and a search space) the model cannot use, before anything is read.

    Each model config lists ``model.accepts.<group>``: the option names of loss, optimizer and
    activation it works with; a search config (``search=<name>``) names its model in
    ``search_space.model``. Raises a one-sentence :class:`UserError` naming the fix.
    """
    model = cfg.get("model")
    if model is None:
        raise UserError("no model is configured; choose one with model=<name>")
    accepts = model.get("accepts") or {}
    model_name = model.get("name", "?")
    space = cfg.get("search_space")
    if space is not None and space.get("model") not in (None, model_name):
        raise UserError(
            f"search={space.get('model')} is the search space of model={space.get('model')}, not of "
            f"model={model_name}; choose search={model_name} (or search={model_name}_grid)"
        )
    for group in COMPAT_GROUPS:
        if group not in cfg or group not in accepts:
            continue
        chosen = cfg[group].get("name") if isinstance(cfg[group], DictConfig) else cfg[group]
        allowed = [str(a) for a in accepts[group]]
        if str(chosen) not in allowed:
            raise UserError(
                f"model={model_name} does not use {group}={chosen}; choose one of "
                f"[{', '.join(allowed)}] or drop the override"
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


def check_numeric_arguments(cfg: DictConfig, group: str = "optimizer") -> None:
    """Reject a text value (``optimizer.lr=abc``) where the group's ``_target_`` takes a number.

    Only a text value triggers the check (and the import of the target), so it costs nothing for
    numbers; the sentence names the key instead of the constructor's TypeError.
    """
    node = cfg.get(group)
    if not isinstance(node, DictConfig) or not node.get("_target_"):
        return
    texts = {
        str(k): v for k, v in node.items() if k not in ("_target_", "name") and isinstance(v, str)
    }
    if not texts:
        return
    import inspect

    from hydra.utils import get_class

    try:
        defaults = inspect.signature(get_class(str(node._target_))).parameters
    except (ImportError, ValueError, TypeError, AttributeError):
        return  # a bad _target_ is reported where it is instantiated
    for key, value in texts.items():
        default = defaults[key].default if key in defaults else None
        if isinstance(default, (int, float)) and not isinstance(default, bool):
            raise UserError(
                f"{group}.{key}={value!r} is not a number; give a number such as {group}.{key}={default}"
            )


def check_optimizer_arguments(cfg: DictConfig) -> None:
    """Reject optimizer values torch refuses (``optimizer.lr=-1``) before anything is tracked."""
    node = cfg.get("optimizer")
    if isinstance(node, DictConfig) and node.get("_target_"):
        from ltr_bench.models.networks import check_optimizer

        check_optimizer(OmegaConf.to_container(node, resolve=True))


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
