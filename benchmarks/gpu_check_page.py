"""The page of ``benchmarks/gpu_check.py``: tables from its rows, written through
:mod:`ltr_bench.provenance`, with snippet markers so the guides include its numbers
(``--8<-- "docs/results/gpu-check.md:speed"``) instead of copying them.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ltr_bench import provenance

ON_GPU, CPU_ONLY = "<!-- gpu-check: on a GPU -->", "<!-- gpu-check: CPU only -->"


def target(page: Path, on_gpu: bool, failed: list[str], out: Path | None) -> Path:
    """Where this run's page goes: ``page``, unless a step failed or a CPU-only run would replace
    a page measured on a GPU; then a file in ``out`` (or a temporary folder)."""
    elsewhere = (out or Path(tempfile.mkdtemp(prefix="gpu_check_"))) / page.name
    if failed:
        return elsewhere
    if not on_gpu and page.exists() and ON_GPU in page.read_text(encoding="utf-8"):
        print(f"gpu_check: {page} was measured on a GPU; this CPU-only run goes to {elsewhere}")
        return elsewhere
    return page


def _f(value: Any, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def _section(name: str, text: str) -> str:
    return f"<!-- --8<-- [start:{name}] -->\n{text.rstrip()}\n<!-- --8<-- [end:{name}] -->\n"


def status(out: dict[str, Any]) -> str:
    """The first paragraph: where this was measured, and plainly whether a GPU was involved."""
    facts = out["machine"]
    if "cuda" in out["devices"]:
        return (
            f"{ON_GPU}\nMeasured on **{facts['gpu']}** and on the same machine's CPU "
            f"({facts['cores']} cores), in one run of `make gpu-check` (torch {facts['torch']}, "
            f"CUDA {facts['cuda']}, Python {facts['python']})."
        )
    return (
        f"{CPU_ONLY}\n**This check has not run on a GPU yet.** This page is the CPU quick run "
        "(`make gpu-check QUICK=1`: small data, the CPU only), which CI runs so that the script "
        "cannot rot; its numbers say nothing about a GPU, and the GPU columns read n/a. On a "
        "machine with a CUDA GPU, `make gpu-check` measures the sizes below in full and writes "
        f"this page again (torch {facts['torch']}, Python {facts['python']} here)."
    )


def _by(rows: list[dict[str, Any]], model: str, device: str) -> dict[str, Any]:
    return next((r for r in rows if r["model"] == model and r["device"] == device), {})


def speed_table(out: dict[str, Any]) -> str:
    rows = out["speed"]
    lines = [
        "| model | CPU epochs/s | GPU epochs/s | GPU/CPU | CPU ms/step | GPU ms/step "
        "| steps per epoch | GPU memory peak (GiB) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        cpu, gpu = _by(rows, model, "cpu"), _by(rows, model, "cuda")
        ratio = gpu["epochs_per_s"] / cpu["epochs_per_s"] if cpu and gpu else None
        lines.append(
            f"| {model} | {_f(cpu.get('epochs_per_s'), '.4f')} | "
            f"{_f(gpu.get('epochs_per_s'), '.4f')} | {_f(ratio, '.1f')} | "
            f"{_f(cpu.get('ms_per_step'))} | {_f(gpu.get('ms_per_step'))} | "
            f"{cpu.get('steps_per_epoch') or gpu.get('steps_per_epoch')} | "
            f"{_f(gpu.get('gpu_peak_gib'))} |"
        )
    trees = [
        "| LambdaMART, LightGBM device_type | trees | fit with binning (s) | trees/s | note |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for row in out["lambdamart"]:
        trees.append(
            f"| {row['device']} | {row.get('trees', '')} | {_f(row.get('fit_s'))} | "
            f"{_f(row.get('trees_per_s'))} | {row.get('note', '')} |"
        )
    size = out["size"]
    return (
        f"A generated fold of MSLR-WEB30K's shape: {out['mslr']['docs']:,} training documents in "
        f"{out['mslr']['queries']:,} queries, 136 features, grades 0-4. Each ranker trains two "
        f"epochs, each cut after {size['gpu_seconds']:g} s of steps on the GPU and "
        f"{size['cpu_seconds']:g} s on the CPU (or at its end); the second epoch's time per step, "
        "times the steps of a whole epoch, gives epochs/s (the first pays the warm-up). GPU/CPU "
        "is the GPU's epochs/s over the CPU's. "
        "LambdaMART is timed by its boosting rounds, LightGBM's binning of the data included."
        "\n\n" + "\n".join(lines) + "\n\n" + "\n".join(trees)
    )


def mq2008_table(out: dict[str, Any]) -> str:
    rows = out["mq2008"]
    if not rows:
        return "Skipped: the steps before it used the check's time."
    lines = [
        "| model | CPU fit (s) | GPU fit (s) | CPU time / GPU time | CPU s/epoch | GPU s/epoch "
        "| outside epochs, CPU (s) | outside epochs, GPU (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for model in dict.fromkeys(r["model"] for r in rows):
        cpu, gpu = _by(rows, model, "cpu"), _by(rows, model, "cuda")
        ratio = cpu["fit_s"] / gpu["fit_s"] if cpu and gpu else None
        lines.append(
            f"| {model} | {_f(cpu.get('fit_s'))} | {_f(gpu.get('fit_s'))} | {_f(ratio)} | "
            f"{_f(cpu.get('epoch_s'), '.3f')} | {_f(gpu.get('epoch_s'), '.3f')} | "
            f"{_f(cpu.get('fixed_s'))} | {_f(gpu.get('fixed_s'))} |"
        )
    return (
        f"A generated fold of MQ2008's shape ({out['mq_docs'][0]:,} training and "
        f"{out['mq_docs'][1]:,} validation documents, 46 features; MQ2008 Fold1 has 9,630 and "
        f"2,707): whole fits of {out['size']['mq_epochs']} epoch(s) with validation, from the "
        "ranker's construction to its best weights. 'Outside epochs' is the fit's wall time "
        "minus its epochs: Lightning's start-up, moving the data, the validation set-up.\n\n"
        + "\n".join(lines)
        + "\n\n"
        + mq2008_verdict(out)
    )


def mq2008_verdict(out: dict[str, Any]) -> str:
    """One sentence from the numbers: does a GPU help on data of MQ2008's size?"""
    pairs = [
        (_by(out["mq2008"], m, "cpu"), _by(out["mq2008"], m, "cuda"))
        for m in dict.fromkeys(r["model"] for r in out["mq2008"])
    ]
    pairs = [(c, g) for c, g in pairs if c and g]
    if not pairs:
        return "Without a GPU in this run there is no comparison yet."
    ratios = [c["fit_s"] / g["fit_s"] for c, g in pairs]
    share = max(g["fixed_s"] / g["fit_s"] for _, g in pairs)
    verdict = (
        "faster" if min(ratios) > 1.1 else "not clearly faster" if max(ratios) > 0.9 else "slower"
    )
    return (
        f"On this size the GPU fit is {verdict} than the CPU fit (CPU/GPU time "
        f"{min(ratios):.2f} to {max(ratios):.2f}); up to {100 * share:.0f} % of a GPU fit is "
        "spent outside its epochs."
    )


def sweep_table(out: dict[str, Any]) -> str:
    sweep = out["sweep"]
    size = out["size"]
    if sweep.get("returncode") != 0:
        return f"The sweep failed (exit code {sweep.get('returncode')})."
    device = "the GPU" if "cuda" in out["devices"] else "the CPU"
    return (
        f"`ltr-bench -m` with {size['trials']} trials in {size['workers']} ltr_pool workers on "
        f"{device}, `tracking.system_metrics=true` sampled every second: "
        f"{sweep['wall_s']:.0f} s.\n\n| | |\n| --- | --- |\n"
        f"| trial runs | {sweep['trial_runs']} |\n"
        f"| with CPU utilisation and memory | {sweep['with_cpu_metrics']} |\n"
        f"| with GPU utilisation and memory | {sweep['with_gpu_metrics']} |\n"
        f"| highest GPU utilisation | {_f(sweep['gpu_util_max_pct'], '.0f')} % |\n"
        f"| highest GPU memory | {_f(sweep['gpu_memory_max_mb'], '.0f')} MB |"
    )


def write(path: Path, out: dict[str, Any], failed: list[str], prov: Any) -> Path:
    tests = out["tests"]
    parts = [
        _section("status", status(out)),
        "\n**Failed:** " + "; ".join(failed) if failed else "",
        "\n## Tests marked `gpu`\n",
        f"`pytest -m gpu` ({', '.join(tests['files'])}): {tests['summary']}.\n",
        "## Training speed\n",
        _section("speed", speed_table(out)),
        "## A fold of MQ2008's size\n",
        _section("mq2008", mq2008_table(out)),
        "## A sweep with system metrics\n",
        _section("sweep", sweep_table(out)),
    ]
    return provenance.write_page(path, "GPU check", "\n".join(p for p in parts if p), prov)
