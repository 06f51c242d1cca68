"""The GPU check's page (benchmarks/gpu_check_page.py) and the GPU in a page's machine row: a run
without a GPU says so plainly and never replaces a page measured on one; the wheel list for a GPU
machine leaves out what that machine has. The script itself runs in CI as `make gpu-check QUICK=1`.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ltr_bench import provenance
from ltr_bench.machine import facts as machine

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import gpu_check  # noqa: E402
import gpu_check_page as page  # noqa: E402
import gpu_wheels  # noqa: E402


def _out(devices: list[str]) -> dict[str, Any]:
    """Rows as gpu_check.run returns them: the GPU trains 8x faster on the big fold, but its
    whole fit of the small fold takes 3 s against the CPU's 2 s (2 s of it outside epochs)."""
    epochs_per_s, fit_s, fixed_s = {"cpu": 0.5, "cuda": 4.0}, {"cpu": 2.0, "cuda": 3.0}, 0.5
    speed = [
        {
            "model": "direct_ranker",
            "device": d,
            "epochs_per_s": epochs_per_s[d],
            "ms_per_step": 1.0,
            "steps_per_epoch": 10,
            "gpu_peak_gib": 1.5,
        }
        for d in devices
    ]
    mq = [
        {
            "model": "direct_ranker",
            "device": d,
            "fit_s": fit_s[d],
            "epoch_s": 0.1,
            "fixed_s": 2.0 if d == "cuda" else fixed_s,
            "epochs": 5,
        }
        for d in devices
    ]
    cuda = "cuda" in devices
    sweeps = [
        {
            "workers": w,
            "returncode": 0,
            "wall_s": 64.0 / w,
            "trials_per_hour": 900.0 * w,
            "trial_runs": 16,
            "with_cpu_metrics": 16,
            "with_gpu_metrics": 16 if cuda else 0,
            "gpu_util_max_pct": 20.0 * w if cuda else None,
            "gpu_memory_max_mb": 900.0 if cuda else None,
        }
        for w in (1, 2, 4)
    ]
    return {
        "devices": devices,
        "machine": {
            "gpu": "NVIDIA H100 80GB HBM3" if "cuda" in devices else None,
            "cores": 16,
            "torch": "2.11",
            "cuda": "13.0",
            "python": "3.12.3",
        },
        "size": {
            "gpu_seconds": 5,
            "cpu_seconds": 8,
            "mq_epochs": 5,
            "trials": 16,
            "workers": (1, 2, 4),
        },
        "tests": {"files": ["tests/models/test_gpu.py"], "summary": "13 passed", "ok": True},
        "mslr": {"docs": 2_270_000, "queries": 18_900},
        "speed": speed,
        "lambdamart": [{"device": "cpu", "trees": 10, "fit_s": 5.0, "trees_per_s": 2.0}],
        "mq_docs": (9600, 3200),
        "mq2008": mq,
        "captured": [
            {
                "model": "direct_ranker",
                "device": devices[0],
                "sync_error": None,
                "ms_per_step": 0.4,
                "epochs_per_s": 6.0,
                "capture_steps": 3,
                "capture_s": 12.5,
            }
        ],
        "sweeps": sweeps,
        "sweep": sweeps[-1],
    }


def _prov() -> provenance.Provenance:
    return provenance.Provenance.collect("python benchmarks/gpu_check.py", datetime.now(UTC), 0.1)


def test_a_cpu_only_page_says_plainly_that_no_gpu_ran(tmp_path: Path) -> None:
    text = page.write(tmp_path / "gpu-check.md", _out(["cpu"]), [], _prov()).read_text()
    assert page.CPU_ONLY in text and "**This check has not run on a GPU yet.**" in text
    assert "| direct_ranker | 0.5000 | n/a | n/a |" in text
    assert "no comparison yet" in text and "[start:speed]" in text and "[start:status]" in text


def test_a_gpu_page_names_the_gpu_and_the_ratios(tmp_path: Path) -> None:
    text = page.write(tmp_path / "gpu-check.md", _out(["cuda", "cpu"]), [], _prov()).read_text()
    assert page.ON_GPU in text and "Measured on **NVIDIA H100 80GB HBM3**" in text
    assert "| direct_ranker | 0.5000 | 4.0000 | 8.0 |" in text  # CPU, GPU, GPU/CPU columns
    assert "GPU fit is slower than the CPU fit (CPU/GPU time 0.67 to 0.67)" in text
    assert "up to 67 % of a GPU fit is spent outside its epochs" in text
    assert "| 4 | 16 | 3600 | 4.0 | 80 | 900 | 16 / 16 of 16 |" in text  # the sweeps
    assert "| direct_ranker | 1.00 | 0.40 | 1.00 | 12.0 | 3 | 12.50 | none |" in text
    assert "| DirectRanker's captured step (ms), <= 0.5 ms | 0.40 | yes |" in text
    assert "| 4 workers against 1 (trials per hour), >= 3x | 4.00 | yes |" in text


def test_a_cpu_run_never_replaces_a_gpu_page(tmp_path: Path) -> None:
    gpu_page = tmp_path / "gpu-check.md"
    page.write(gpu_page, _out(["cuda", "cpu"]), [], _prov())
    elsewhere = page.target(gpu_page, on_gpu=False, failed=[], out=tmp_path / "out")
    assert elsewhere == tmp_path / "out" / "gpu-check.md"
    assert page.target(gpu_page, on_gpu=True, failed=[], out=None) == gpu_page
    assert page.target(gpu_page, on_gpu=True, failed=["x"], out=tmp_path / "o") != gpu_page


def test_the_page_command_names_no_folder_of_the_machine_that_ran_it() -> None:
    """The device runs ``gpu_check.py --out $OUT``: an output copy, not a setting of the
    measurement, and an absolute path of that machine; a page path inside the repository is
    written relative to it."""
    argv = ["--out", "/root/out", "--page", str(REPO / "docs" / "results" / "gpu-check.md")]
    assert gpu_check.page_command(argv) == (
        "python benchmarks/gpu_check.py --page docs/results/gpu-check.md"
    )
    assert gpu_check.page_command(["--quick", "--out=/tmp/x", "--page=/tmp/p.md"]) == (
        "python benchmarks/gpu_check.py --quick --page /tmp/p.md"
    )


def test_the_machine_row_names_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {"gpu_count": 1, "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_memory_gib": 79.6}
    monkeypatch.setattr(machine, "_gpus_from_nvidia_smi", lambda: fake)
    assert ", 1 x NVIDIA H100 80GB HBM3 (79.6 GiB) |" in _prov().markdown()
    monkeypatch.setattr(machine, "_gpus_from_nvidia_smi", lambda: {})
    assert "GiB) |" not in _prov().markdown().split("machine")[1].split("\n")[0]


def test_the_wheels_leave_out_what_the_gpu_machine_has() -> None:
    needed = gpu_wheels.closure()
    assert {"hydra-core", "omegaconf", "optuna", "lightgbm", "mlflow-skinny"} <= set(needed)
    assert not set(needed) & gpu_wheels.ON_DEVICE
    assert "mlflow" not in needed and "torch" not in needed and "flask" not in needed


def test_the_batch_size_page_times_each_batch_and_says_where(tmp_path: Path) -> None:
    """``benchmarks/gpu_batch_size.py --quick``: a row per batch size with the CPU's numbers, the
    GPU's n/a, and a status that says plainly that no GPU ran."""
    import gpu_batch_size

    target = tmp_path / "gpu-batch-size.md"
    assert gpu_batch_size.main(["--quick", "--page", str(target)]) == 0
    text = target.read_text()
    assert page.CPU_ONLY in text and "**Not measured on a GPU:**" in text
    rows = [line for line in text.splitlines() if line.startswith(("| 256 |", "| 1,024 |"))]
    assert len(rows) == 2
    for row in rows:
        cpu_ms, gpu_ms, cpu_eps = row.split("|")[2:5]
        assert float(cpu_ms) > 0 and float(cpu_eps) > 0 and gpu_ms.strip() == "n/a"
    assert "python benchmarks/gpu_batch_size.py --quick" in text
