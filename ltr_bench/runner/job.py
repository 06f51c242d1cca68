"""One job: check the config, build data, protocol and tracker, run the protocol's loop or a
sweep trial, and write ``results.json`` (see :mod:`ltr_bench.runner`)."""

from __future__ import annotations

import os
import time

from omegaconf import DictConfig

from ltr_bench.errors import UserError
from ltr_bench.machine.accelerators import resolve as resolve_accelerator
from ltr_bench.protocols import Protocol
from ltr_bench.runner.checks import (
    check_compatibility,
    check_distributed,
    check_top_level,
)
from ltr_bench.runner.context import (
    configure_loaded_torch,
    job_context,
    resolve_threads,
    seed_everything,
)
from ltr_bench.runner.inner_cv import run_inner_cv
from ltr_bench.runner.outer import run_final
from ltr_bench.runner.pipeline import RankerPrototype
from ltr_bench.runner.results import RunResult, results_json
from ltr_bench.runner.tags import common_tags
from ltr_bench.tracking import Tracker, is_rank_zero


def run(
    cfg: DictConfig, output_dir: str | os.PathLike[str] | None = None, *, verbose: bool = True
) -> RunResult:
    """Run the composed config ``cfg`` once (see :mod:`ltr_bench.runner`)."""
    from hydra.utils import instantiate

    t_start = time.perf_counter()
    verbose = verbose and is_rank_zero()  # DDP: the other ranks print nothing (and write nothing)
    check_compatibility(cfg)
    check_top_level(cfg)
    check_distributed(cfg)
    resolve_accelerator(cfg)  # a GPU request is granted, refused or said to be ignored: no data yet
    protocol: Protocol = instantiate(cfg.protocol)
    is_trial = cfg.get("sweep", {}).get("trial_number") is not None
    mode = protocol.mode(is_trial)
    if mode == "inner_cv" and cfg.objective.split == "test":
        raise UserError(
            "objective.split=test would choose hyperparameters on test data; "
            "sweeps select on vali (objective.split=vali)"
        )
    ctx = job_context(output_dir)
    resolve_threads(cfg)
    dataset = instantiate(cfg.dataset, _convert_="all")
    # the ranker validates its config (e.g. its loss's kind) before any run is logged; building
    # it imports its libraries (torch only for a ranker that uses it). Every fit copies it.
    ranker = RankerPrototype.of(cfg)
    seed_everything(int(cfg.seed), torch_too=False)
    configure_loaded_torch(cfg)
    tracker = Tracker.from_config(cfg.tracking, ctx.cwd)
    tags = common_tags(cfg, ctx)
    loop = run_inner_cv if mode == "inner_cv" else run_final
    result = loop(cfg, protocol, dataset, ranker, tracker, tags, ctx, verbose)
    result.times["time_total_s"] = time.perf_counter() - t_start
    if ctx.output_dir is not None and is_rank_zero():
        path = ctx.output_dir / "results.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        result.results_path = str(path)
        path.write_text(results_json(cfg, result, tracker))
        if verbose:
            print(f"results: {path}", flush=True)
    return result
