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


def captured_table(out: dict[str, Any]) -> str:
    """Per ranker: the eager and the captured step (``model.compile=step``) on the device, the
    CPU's eager step, and what the capture costs at the start of a fit."""
    rows = out.get("captured", [])
    if not rows:
        return "Not measured in this run."
    device = rows[0]["device"]
    where = "GPU" if device != "cpu" else "CPU"
    lines = [
        f"| model | eager {where} ms/step | captured {where} ms/step | eager CPU ms/step "
        f"| captured {where} / eager CPU (epochs/s) | first steps that pay the capture "
        "| their extra time (s) | host sync in a step |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        eager, cpu = _by(out["speed"], row["model"], device), _by(out["speed"], row["model"], "cpu")
        ratio = row["epochs_per_s"] / cpu["epochs_per_s"] if cpu and "epochs_per_s" in row else None
        sync = "none" if device != "cpu" and not row["sync_error"] else "not checked (CPU)"
        if row["sync_error"]:
            sync = f"**{row['sync_error'][:120]}**"
        lines.append(
            f"| {row['model']} | {_f(eager.get('ms_per_step'))} | {_f(row.get('ms_per_step'))} | "
            f"{_f(cpu.get('ms_per_step'))} | {_f(ratio, '.1f')} | {row.get('capture_steps', 'n/a')} "
            f"| {_f(row.get('capture_s'))} | {sync} |"
        )
    return (
        "`model.compile=step` on the same fold and batches: the whole training step compiled "
        "(forward and loss as one graph, AOTAutograd's backward, the optimiser's step; on CUDA "
        "replayed as CUDA graphs). Its first 30 steps run one by one, the device waited for "
        'after each, each under `torch.cuda.set_sync_debug_mode("error")` on CUDA; the steps '
        "that pay for the capture are those slower than twice the median of the last ten, and "
        "their extra time is what the capture costs a fit. Then two epochs cut after "
        f"{out['size']['gpu_seconds']:g} s of steps give ms/step, from the last. SortNet has no "
        "GPU path and is not here.\n\n" + "\n".join(lines)
    )


def sweeps_table(out: dict[str, Any]) -> str:
    """The same trials with 1, 2, 4 workers: trials per hour and the GPU's highest use."""
    size, rows = out["size"], out.get("sweeps") or [out["sweep"]]
    device = "one GPU" if "cuda" in out["devices"] else "the CPU"
    base = rows[0].get("trials_per_hour") if rows else None
    lines = [
        "| workers | wall (s) | trials per hour | against 1 worker | highest GPU utilisation (%) "
        "| highest GPU memory (MB) | trial runs with GPU / CPU metrics |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        if row.get("returncode") != 0:
            lines.append(f"| {row['workers']} | failed (exit {row.get('returncode')}) | | | | | |")
            continue
        speedup = row["trials_per_hour"] / base if base else None
        lines.append(
            f"| {row['workers']} | {row['wall_s']:.0f} | {_f(row['trials_per_hour'], '.0f')} | "
            f"{_f(speedup, '.1f')} | {_f(row['gpu_util_max_pct'], '.0f')} | "
            f"{_f(row['gpu_memory_max_mb'], '.0f')} | {row['with_gpu_metrics']} / "
            f"{row['with_cpu_metrics']} of {row['trial_runs']} |"
        )
    return (
        f"`ltr-bench -m` with the same {size['trials']} trials of DirectRanker on {device}, "
        f"in {', '.join(str(r['workers']) for r in rows)} ltr_pool workers (on a GPU each "
        "capped at its share of the GPU's memory, "
        "`hydra.launcher.gpu_memory_share`), `tracking.system_metrics=true` sampled every second. "
        "Trials per hour count the whole command, its start-up included.\n\n" + "\n".join(lines)
    )


def goals(out: dict[str, Any]) -> str:
    """What the captured step and the shared GPU are for, each against this run's numbers."""
    if "cuda" not in out["devices"]:
        return "Judged on a GPU only; this run had none."
    dr = next((r for r in out.get("captured", []) if r["model"] == "direct_ranker"), {})
    cpu = _by(out["speed"], "direct_ranker", "cpu")
    ratio = dr["epochs_per_s"] / cpu["epochs_per_s"] if dr.get("epochs_per_s") and cpu else None
    rows = {r["workers"]: r for r in out.get("sweeps", []) if r.get("returncode") == 0}
    one, four = rows.get(1, {}), rows.get(4, {})
    faster = (
        four["trials_per_hour"] / one["trials_per_hour"]
        if one.get("trials_per_hour") and four.get("trials_per_hour")
        else None
    )
    checks = [
        ("DirectRanker, captured on the GPU, against the CPU (epochs/s)", ratio, 10.0, "x", True),
        ("DirectRanker's captured step (ms)", dr.get("ms_per_step"), 0.5, " ms", False),
        ("4 workers against 1 (trials per hour)", faster, 3.0, "x", True),
        ("4 workers: highest GPU utilisation (%)", four.get("gpu_util_max_pct"), 60.0, " %", True),
    ]
    lines = ["| goal | this run | met |", "| --- | ---: | --- |"]
    for name, value, bound, unit, at_least in checks:
        met = None if value is None else (value >= bound if at_least else value <= bound)
        want = f"{'>=' if at_least else '<='} {bound:g}{unit}"
        verdict = "n/a" if met is None else ("yes" if met else "**no**")
        lines.append(f"| {name}, {want} | {_f(value)} | {verdict} |")
    synced = [r["model"] for r in out.get("captured", []) if r["sync_error"]]
    lines.append(
        '| every captured step under `set_sync_debug_mode("error")` | '
        f"{', '.join(synced) or 'no error'} | {'**no**' if synced else 'yes'} |"
    )
    return "\n".join(lines)


def write(path: Path, out: dict[str, Any], failed: list[str], prov: Any) -> Path:
    tests = out["tests"]
    parts = [
        _section("status", status(out)),
        "\n**Failed:** " + "; ".join(failed) if failed else "",
        "\n## Tests marked `gpu`\n",
        f"`pytest -m gpu` ({', '.join(tests['files'])}): {tests['summary']}.\n",
        "## Training speed\n",
        _section("speed", speed_table(out)),
        "## The captured step (`model.compile=step`)\n",
        _section("captured", captured_table(out)),
        "## Trials sharing one GPU\n",
        _section("sweep", sweeps_table(out)),
        "## Against the goals\n",
        _section("goals", goals(out)),
        "## A fold of MQ2008's size\n",
        _section("mq2008", mq2008_table(out)),
    ]
    return provenance.write_page(path, "GPU check", "\n".join(p for p in parts if p), prov)
