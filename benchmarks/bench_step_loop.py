"""The neural rankers' two step loops on a real sweep trial: Lightning's, one optimisation step
per Lightning batch, against the module's own, an epoch's steps in one Lightning batch
(``ltr_bench/models/step_loop.py``), in one process, in pairs.

Each model runs the sweep trial a ``search=<model>`` sweep runs on MQ2008 Fold1 (its default
config, five inner folds, ``tracking=none``), once per loop in every pair, the two loops taking
turns; the table gives the median fitting time of each loop and the median of the pairs' ratios,
and checks that the two loops' fold metrics are the same numbers (bit for bit).

    LTR_DATA=../shared/data/letor .venv/bin/python benchmarks/bench_step_loop.py [--pairs 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

MODELS = ("direct_ranker", "listnet", "lambdarank")
LOOPS = ("lightning", "module")


def trial(model: str, root: Path) -> tuple[float, str]:
    """One sweep trial of ``model``: its fitting seconds and its fold metrics, as text."""
    from hydra import compose, initialize_config_dir

    from ltr_bench.cli.main import config_dir
    from ltr_bench.runner import run

    overrides = [
        "tracking=none",
        "threads=1",
        "sweep.trial_number=0",
        "sweep.study_name=bench",
        "protocol=letor_folds",
        f"model={model}",
        "dataset=mq2008",
        f"dataset.root={root}",
        "dataset.fold=1",
        "trainer.enable_progress_bar=false",
    ]
    with initialize_config_dir(config_dir(), version_base="1.3"):
        cfg = compose("config", overrides)
    result = run(cfg, verbose=False)
    metrics = repr([sorted(f.metrics["vali"].items()) for f in result.folds])
    return result.times["time_fit_s"], metrics


def measure(model: str, root: Path, pairs: int) -> dict[str, Any]:
    """``pairs`` trials of each loop, taking turns, after one unmeasured warm-up trial."""
    from ltr_bench.models import ranking_module, step_loop

    def use(loop: str) -> None:
        ranking_module.lightning_steps_reason = (  # type: ignore[attr-defined]
            (lambda *_: "benchmark") if loop == "lightning" else step_loop.lightning_steps_reason
        )

    use("module")
    trial(model, root)
    times: dict[str, list[float]] = {loop: [] for loop in LOOPS}
    metrics: dict[str, set[str]] = {loop: set() for loop in LOOPS}
    for _ in range(pairs):
        for loop in LOOPS:
            use(loop)
            seconds, folds = trial(model, root)
            times[loop].append(seconds)
            metrics[loop].add(folds)
    use("module")
    ratios = [m / lt for m, lt in zip(times["module"], times["lightning"])]
    same = metrics["module"] == metrics["lightning"] and len(metrics["module"]) == 1
    return {"times": times, "ratio": statistics.median(ratios), "same": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(os.environ.get("LTR_DATA", Path(__file__).parents[2] / "shared/data/letor")),
        help="the LETOR data root (default: $LTR_DATA or ../shared/data/letor)",
    )
    parser.add_argument("--pairs", type=int, default=4, help="trials of each loop per model")
    args = parser.parse_args()
    if not (args.data / "MQ2008").is_dir():
        sys.exit(f"no MQ2008 under {args.data}: set LTR_DATA or --data")
    print(
        f"a sweep trial on MQ2008 Fold1 (5 inner folds, default config), {args.pairs} pairs per "
        "model, the loops taking turns; fitting seconds per trial\n"
    )
    print(
        "| model | Lightning's loop (median s) | the module's loop (median s) | "
        "module / Lightning (median of pairs) | same fold metrics |"
    )
    print("| --- | ---: | ---: | ---: | --- |")
    for model in MODELS:
        m = measure(model, args.data, args.pairs)
        lightning, own = (statistics.median(m["times"][loop]) for loop in LOOPS)
        print(
            f"| {model} | {lightning:.2f} | {own:.2f} | {m['ratio']:.2f} | "
            f"{'yes' if m['same'] else 'NO'} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
