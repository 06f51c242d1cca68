"""The GPU check: the neural rankers' device path measured on a GPU, in one prepared run.

    make gpu-check            # on a GPU machine: at most ~8 minutes on one H100
    make gpu-check QUICK=1    # on any CPU, small data, a few minutes (CI runs it)

In order, each step printed as it ends:

1. the machine: Python, torch, CUDA, the GPU, LightGBM's GPU builds;
2. the tests marked ``gpu`` (``pytest -m gpu``): placement, a step loop that never waits for the
   device, bf16-mixed, DDP on one GPU over NCCL, a model saved from a GPU fit scoring on the CPU
   (they skip without CUDA);
3. epochs per second of DirectRanker, RankNet, ListNet*, LambdaRank (and the self-attention
   ranker, where ``conf/model/attention_ranker.yaml`` exists) on a generated fold of
   MSLR-WEB30K's shape (2.27 M training documents, 136 features), eager on the GPU and on the
   same machine's CPU, and the GPU/CPU ratio;
4. the same with ``model.compile=step`` on the GPU (the quick run: DirectRanker on the CPU): ms
   per step, how many first steps pay for the capture, and each of the first steps run under
   ``torch.cuda.set_sync_debug_mode("error")`` (a step that waits for the device fails the
   check); LambdaMART's trees per second with LightGBM's GPU device where the build has one;
5. one sweep of the same 16 trials with 1, 2 and 4 ltr_pool workers on one GPU
   (``tracking.system_metrics=true``): trials per hour and the highest GPU utilisation, checking
   that every trial run carries GPU utilisation and memory (CPU metrics without a GPU);
6. whole fits on a fold of MQ2008's size on both, with the part of the fit that is not epochs,
   when the steps before left time;
7. the page ``docs/results/gpu-check.md``, written through :mod:`ltr_bench.provenance` (its
   machine row names the GPU). A run without CUDA says so on the page, and never replaces a page
   measured on a GPU. A run with a failed step writes its page beside ``--out`` only.

On a GPU machine without a package registry (Python 3.12, torch, Lightning; no hydra-core,
omegaconf, Optuna, MLflow or LightGBM): first, here, ``make gpu-wheels``
(``benchmarks/gpu_wheels.py``: ``pip download --no-deps --only-binary=:all: --python-version
3.12 --platform manylinux_..._x86_64 -d .whl NAME==VERSION`` for every missing package, ``.whl``
listed in ``.git/info/exclude``); then carry ``.whl`` with the working tree and run
``python3 benchmarks/gpu_check.py --out $OUT`` there. Finding those packages missing, this script
installs ``.whl/*.whl`` with ``pip install --no-index --no-deps --target /tmp/site`` and runs
itself again with ``PYTHONPATH=/tmp/site:<repository>`` (the project runs from its source tree).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "results" / "gpu-check.md"
SITE = Path("/tmp/site")
NEEDED = ("hydra", "omegaconf", "optuna", "mlflow", "lightgbm")


@dataclass(frozen=True)
class Size:
    """How much each step does."""

    mslr_docs: int  # training documents of the MSLR-shaped fold
    gpu_seconds: float  # seconds of steps timed per epoch on the GPU (less if the epoch ends)
    cpu_seconds: float  # the same on the CPU
    trees: int  # LambdaMART's boosting rounds
    mq_docs: int  # training documents of the MQ2008-sized fold (a third more for validation)
    mq_epochs: int  # epochs of its fits
    trials: int  # sweep trials
    workers: tuple[int, ...]  # ltr_pool workers of each sweep (the same trials)
    sweep_docs: int  # the sweep's training documents
    sweep_epochs: int  # epochs per sweep run
    captured: int  # how many of the neural rankers are timed with model.compile=step


FULL = Size(2_270_000, 2.0, 3.0, 10, 9_600, 5, 16, (1, 2, 4), 1000, 2, captured=5)
QUICK = Size(4_000, 1.0, 1.0, 3, 1_200, 1, 4, (1, 2), 400, 1, captured=1)
#: the MQ2008-sized fits are skipped when the check has run this long (it must fit 8 minutes)
MQ_DEADLINE_S = 360.0
NEURAL = ["direct_ranker", "ranknet", "listnet_star", "lambdarank", "attention_ranker"]


def ensure_packages() -> None:
    """Install the carried wheels and run again when hydra/Optuna/MLflow/LightGBM are missing."""
    import importlib.util

    missing = [m for m in NEEDED if importlib.util.find_spec(m) is None]
    if not missing:
        return
    wheels = sorted((ROOT / ".whl").glob("*.whl"))
    if not wheels or os.environ.get("GPU_CHECK_INSTALLED"):
        raise SystemExit(
            f"gpu_check: {', '.join(missing)} not installed and no wheels in .whl/; run "
            "`make gpu-wheels` where pip works and carry .whl (see this script's docstring)"
        )
    print(f"gpu_check: installing {len(wheels)} carried wheels into {SITE}", flush=True)
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    pip += ["--no-compile", "--no-cache-dir", "--upgrade", "--target", str(SITE)]
    subprocess.run([*pip, *map(str, wheels)], check=True)
    path = os.pathsep.join([str(SITE), str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path.rstrip(os.pathsep), GPU_CHECK_INSTALLED="1")
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def machine() -> dict[str, Any]:
    """Python, torch, CUDA and the GPU (torch.cuda), cores, and LightGBM's GPU builds."""
    import platform

    import torch

    from ltr_bench.machine.accelerators import lightgbm_build

    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda or "none",
        "gpu": torch.cuda.get_device_name(0) if cuda else None,
        "cores": os.cpu_count() or 1,
        "lightgbm_gpu": [d for d in ("cuda", "gpu") if lightgbm_build(d)],
    }


def gpu_tests() -> dict[str, Any]:
    """``pytest -m gpu`` on the test files that hold ``gpu`` tests; the summary line."""
    files = sorted(
        str(p.relative_to(ROOT))
        for p in (ROOT / "tests").rglob("test_*.py")
        if "mark.gpu" in p.read_text(encoding="utf-8", errors="replace")
    )
    cmd = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:randomly"]
    cmd += ["-p", "no:cacheprovider", "-o", "addopts=", *files]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()[-1:] or ["(no output)"]
    summary = re.sub(r"=+", "", tail[0]).strip()
    ok = proc.returncode == 0
    if not ok:
        print(proc.stdout[-4000:], proc.stderr[-2000:], sep="\n", flush=True)
    return {"files": files, "summary": summary, "ok": ok, "wall_s": time.perf_counter() - start}


def neural_models() -> list[str]:
    return [m for m in NEURAL if (ROOT / "conf" / "model" / f"{m}.yaml").exists()]


def step(title: str, began: float) -> None:
    print(f"\n== {title} ({time.perf_counter() - began:.0f} s into the check)", flush=True)


def fmt(value: Any, spec: str = ".2f") -> str:
    return "n/a" if value is None else format(value, spec)


def run(size: Size, facts: dict[str, Any], devices: list[str], began: float) -> dict[str, Any]:
    """Steps 2-5 (the MQ2008-sized fits last, skipped past :data:`MQ_DEADLINE_S`); every result
    as plain rows."""
    import gpu_check_runs as runs
    import torch

    # every core, unless the caller limited the threads (a shared machine)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS") or facts["cores"]))
    out: dict[str, Any] = {"devices": devices, "machine": facts, "size": size.__dict__}
    step("tests marked gpu", began)
    out["tests"] = gpu_tests()
    print(out["tests"]["summary"], flush=True)

    step(f"epochs per second, MSLR-shaped fold of {size.mslr_docs:,} documents", began)
    train = runs.mslr_fold(size.mslr_docs)
    print(f"{train.n_queries:,} queries, {train.n_features} features", flush=True)
    out["mslr"] = {"docs": train.n_docs, "queries": train.n_queries}
    out["speed"] = []
    for model in neural_models():
        for device in devices:
            seconds = size.gpu_seconds if device != "cpu" else size.cpu_seconds
            row = runs.epochs_per_s(model, train, device, seconds)
            out["speed"].append(row)
            print(
                f"{model:16s} {device:4s} {row['ms_per_step']:9.2f} ms/step "
                f"{row['epochs_per_s']:.4f} epochs/s ({row['steps_timed']} of "
                f"{row['steps_per_epoch']} steps timed)",
                flush=True,
            )
    step(f"model.compile=step on {devices[0]}: the captured step", began)
    out["captured"] = []
    for model in neural_models()[: size.captured]:
        row = runs.captured_steps(model, train, devices[0], size.gpu_seconds)
        out["captured"].append(row)
        print(
            f"{model:16s} {devices[0]:4s} captured {fmt(row.get('ms_per_step'))} ms/step, "
            f"{row.get('capture_steps')} first steps pay {fmt(row.get('capture_s'))} s, "
            f"sync error: {row['sync_error']}",
            flush=True,
        )
    lgb_devices = ["cpu"] + (facts["lightgbm_gpu"][:1] if "cuda" in devices else [])
    threads = torch.get_num_threads()
    out["lambdamart"] = [runs.lambdamart_trees(train, d, size.trees, threads) for d in lgb_devices]
    for row in out["lambdamart"]:
        print(
            f"lambdamart       {row['device']:4s} {fmt(row.get('trees_per_s'))} trees/s "
            f"{row.get('note', '')}",
            flush=True,
        )
    del train

    data = runs.sweep_data(size.sweep_docs, size.sweep_epochs)
    out["sweeps"] = []
    for workers in size.workers:
        step(f"sweep: {size.trials} trials, {workers} workers, system metrics", began)
        row = runs.sweep_with_system_metrics(devices[0], size.trials, workers, data)
        out["sweeps"].append(row)
        print({k: v for k, v in row.items() if k != "error"}, flush=True)
    out["sweep"] = out["sweeps"][-1]  # the most workers: its runs' system metrics are checked

    out["mq2008"] = []
    if time.perf_counter() - began > MQ_DEADLINE_S:
        print("gpu_check: no time left for the MQ2008-sized fits; skipped", flush=True)
        return out
    step("whole fits on an MQ2008-sized fold", began)
    mq_train = runs.mq2008_fold(size.mq_docs, seed=1)
    mq_vali = runs.mq2008_fold(size.mq_docs // 3, seed=2)
    out["mq_docs"] = (mq_train.n_docs, mq_vali.n_docs)
    for model in neural_models():
        for device in devices:
            row = runs.small_fit(model, mq_train, mq_vali, device, size.mq_epochs)
            out["mq2008"].append(row)
            print(
                f"{model:16s} {device:4s} fit {row['fit_s']:.2f} s, {row['epoch_s']:.3f} s "
                f"per epoch, {row['fixed_s']:.2f} s outside epochs",
                flush=True,
            )
    return out


def checks(out: dict[str, Any], cuda: bool) -> list[str]:
    """What failed (empty: the check passed)."""
    failed = [] if out["tests"]["ok"] else [f"tests marked gpu: {out['tests']['summary']}"]
    for row in out.get("captured", []):
        if row["sync_error"]:
            failed.append(f"model.compile=step of {row['model']}: {row['sync_error']}")
    for row in out.get("sweeps", [])[:-1]:
        if row.get("returncode") != 0:
            failed.append(f"the {row['workers']}-worker sweep exited {row.get('returncode')}")
    sweep = out["sweep"]
    if sweep.get("returncode") != 0:
        failed.append(
            f"the sweep exited {sweep.get('returncode')}: {sweep.get('error', '')[-300:]}"
        )
    elif sweep["trial_runs"] < 1:
        failed.append("the sweep left no trial runs")
    elif sweep["with_cpu_metrics"] < sweep["trial_runs"]:
        failed.append("trial runs without CPU system metrics")
    elif cuda and sweep["with_gpu_metrics"] < sweep["trial_runs"]:
        failed.append("trial runs without GPU utilisation and memory")
    return failed


def page_command(argv: list[str], script: str = "benchmarks/gpu_check.py") -> str:
    """The command the page names: ``argv`` without ``--out`` (a copy of the page for the
    caller, often an absolute folder of the machine that ran it), a ``--page`` inside the
    repository relative to it."""
    shown: list[str] = []
    args = iter([part for arg in argv for part in arg.split("=", 1)])
    for arg in args:
        if arg == "--out":
            next(args, None)
        else:
            shown.append(arg)
    for i, arg in enumerate(shown[:-1]):
        if arg == "--page" and Path(shown[i + 1]).resolve().is_relative_to(ROOT):
            shown[i + 1] = str(Path(shown[i + 1]).resolve().relative_to(ROOT))
    return shlex.join(["python", script, *shown])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small data on the CPU (CI)")
    parser.add_argument("--page", type=Path, default=PAGE, help="the results page to write")
    parser.add_argument("--out", type=Path, default=None, help="also copy page + JSON here")
    args = parser.parse_args()
    ensure_packages()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import gpu_check_page as page

    from ltr_bench import provenance

    began = time.perf_counter()
    begun = provenance.start(page_command(sys.argv[1:]))
    facts = machine()
    cuda = facts["gpu"] is not None
    devices = (["cuda", "cpu"] if cuda else ["cpu"]) if not args.quick else ["cpu"]
    size = QUICK if args.quick or not cuda else FULL
    print(json.dumps(facts), flush=True)
    out = run(size, facts, devices, began)
    out["quick"] = args.quick
    failed = checks(out, "cuda" in devices)
    step("page", began)
    target = page.target(args.page, on_gpu="cuda" in devices, failed=failed, out=args.out)
    page.write(target, out, failed, begun.finish())
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        shutil.copy(target, args.out / target.name)
        (args.out / "gpu-check.json").write_text(json.dumps(out, indent=1, default=str))
    print(f"gpu_check: wrote {target}; {'FAILED: ' + '; '.join(failed) if failed else 'passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
