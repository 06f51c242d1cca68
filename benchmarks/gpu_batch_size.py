"""DirectRanker's training speed against its batch size (pairs per step), on the GPU and on the
same machine's CPU: how much of a GPU the default batch (4,096 pairs on MSLR) leaves unused.

    python benchmarks/gpu_batch_size.py             # a CUDA GPU machine: about 1 minute on one H200
    python benchmarks/gpu_batch_size.py --quick     # any CPU, small data (a test runs it)

Speed only: a larger batch also changes the optimisation (fewer, larger steps per epoch), which
a sweep over ``model.batch_size`` has to judge. Each row times two epochs of DirectRanker on the
generated MSLR-shaped fold of ``benchmarks/gpu_check.py`` (2.27 M documents, 136 features), each
epoch cut after a few seconds of steps (:func:`gpu_check_runs.epochs_per_s`). The page,
``docs/results/gpu-batch-size.md``, is written through :mod:`ltr_bench.provenance`; a run without
CUDA never replaces one measured on a GPU. On a GPU machine without a package registry, carry
``.whl`` as for ``gpu_check.py`` (``make gpu-wheels``): the wheels are installed the same way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_check

PAGE = gpu_check.ROOT / "docs" / "results" / "gpu-batch-size.md"
FULL = {"docs": 2_270_000, "batches": (4096, 16384, 65536, 262144), "gpu_s": 2.0, "cpu_s": 3.0}
QUICK = {"docs": 4_000, "batches": (256, 1024), "gpu_s": 0.3, "cpu_s": 0.3}


def measure(size: dict[str, Any], devices: list[str]) -> list[dict[str, Any]]:
    """One :func:`gpu_check_runs.epochs_per_s` row per batch size and device."""
    import gpu_check_runs as runs

    train = runs.mslr_fold(size["docs"])
    rows = []
    for batch in size["batches"]:
        for device in devices:
            seconds = size["gpu_s"] if device != "cpu" else size["cpu_s"]
            row = runs.epochs_per_s(
                "direct_ranker", train, device, seconds, f"model.batch_size={batch}"
            )
            rows.append({**row, "batch": batch})
            print(f"batch {batch:7d} {device:4s} {row['ms_per_step']:9.2f} ms/step", flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """Markdown: per batch size, time per step and epochs per second on each device."""

    def cell(batch: int, device: str, key: str, spec: str) -> str:
        row = next((r for r in rows if r["batch"] == batch and r["device"] == device), {})
        return gpu_check.fmt(row.get(key), spec)

    lines = [
        "| pairs per step | CPU ms/step | GPU ms/step | CPU epochs/s | GPU epochs/s | GPU/CPU "
        "| GPU memory peak (GiB) |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for batch in sorted({r["batch"] for r in rows}):
        cpu, gpu = (cell(batch, d, "epochs_per_s", ".4f") for d in ("cpu", "cuda"))
        ratio = "n/a" if "n/a" in (cpu, gpu) else f"{float(gpu) / float(cpu):.1f}"
        lines.append(
            f"| {batch:,} | {cell(batch, 'cpu', 'ms_per_step', '.2f')} | "
            f"{cell(batch, 'cuda', 'ms_per_step', '.2f')} | {cpu} | {gpu} | {ratio} | "
            f"{cell(batch, 'cuda', 'gpu_peak_gib', '.2f')} |"
        )
    return "\n".join(lines)


def body(rows: list[dict[str, Any]], facts: dict[str, Any], docs: int) -> str:
    import gpu_check_page as page

    where = (
        f"{page.ON_GPU}\nMeasured on **{facts['gpu']}** and on the same machine's CPU "
        f"({facts['cores']} cores; torch {facts['torch']}, CUDA {facts['cuda']})."
        if facts["gpu"]
        else f"{page.CPU_ONLY}\n**Not measured on a GPU:** this is the CPU quick run (small "
        "data); its numbers say nothing about a GPU."
    )
    text = (
        f"{where}\n\nDirectRanker (`model=direct_ranker`, its other settings the defaults) on a "
        f"generated fold of MSLR-WEB30K's shape, {docs:,} training documents, at each "
        "`model.batch_size`; an epoch is as many pairs as there are training documents. A larger "
        "batch changes the optimisation too, not only its speed.\n"
    )
    return text + "\n" + page._section("table", table(rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data on the CPU")
    parser.add_argument("--page", type=Path, default=PAGE, help="the results page to write")
    parser.add_argument("--out", type=Path, default=None, help="also copy the page here")
    args = parser.parse_args(argv)
    gpu_check.ensure_packages()
    import gpu_check_page as page

    from ltr_bench import provenance

    argv = sys.argv[1:] if argv is None else argv
    begun = provenance.start(gpu_check.page_command(argv, "benchmarks/gpu_batch_size.py"))
    facts = gpu_check.machine()
    on_gpu = facts["gpu"] is not None and not args.quick
    size = QUICK if not on_gpu else FULL
    rows = measure(size, ["cuda", "cpu"] if on_gpu else ["cpu"])
    target = page.target(args.page, on_gpu=on_gpu, failed=[], out=args.out)
    provenance.write_page(
        target,
        "GPU: DirectRanker's speed against its batch size",
        body(rows, facts, size["docs"]),
        begun.finish(),
    )
    if args.out is not None and target != args.out / target.name:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / target.name).write_text(target.read_text())
    print(f"gpu_batch_size: wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
