"""Prepare ``.whl/``: the wheels a GPU machine without a package registry needs for
``make gpu-check`` (``benchmarks/gpu_check.py``), downloaded here where pip works.

The GPU machines lent to this project have Python 3.12, PyTorch (CUDA), Lightning, NumPy,
pandas, SciPy, scikit-learn, matplotlib, psutil, pytest and NVIDIA's NVML bindings, but no
hydra-core, omegaconf, Optuna, MLflow or LightGBM, and reach no registry. This script walks
ltr_bench's runtime dependencies (package metadata, markers evaluated for CPython 3.12 on
Linux x86-64), leaves out what :data:`ON_DEVICE` lists, and fetches each of the rest at the
version installed here with::

    python -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 ... -d .whl NAME==VERSION

(a package with no wheel on the registry, such as antlr4-python3-runtime, is built into one with
``pip wheel --no-deps``). It adds ``/.whl/`` to ``.git/info/exclude``, so the folder stays out of
git but can travel with the working tree (``carry: [".whl"]``). On the GPU machine
``gpu_check.py`` installs them with ``pip install --no-index --no-deps --target /tmp/site
.whl/*.whl`` before anything else. MLflow travels as ``mlflow-skinny`` and ``mlflow-tracing``
(the tracking client and the SQL store without the web UI), which keeps the folder small.

    make gpu-wheels                       # = python benchmarks/gpu_wheels.py
    python benchmarks/gpu_wheels.py --list   # what would be fetched, fetching nothing
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".whl"
#: what the GPU machine's image already has (its package list as read on such a machine in
#: November 2026, normalised names); everything else travels as a wheel
ON_DEVICE = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs
    botorch build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy
    coverage cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython
    diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools formulaic
    frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize
    hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin
    jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
    linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl
    meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
    narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti
    nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
    nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py
    nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime
    onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
    orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
    prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
    pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock
    pytest-timeout pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich
    sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy seaborn
    sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
    statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
    tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric
    torchmetrics torchvision tqdm transformers treescope triton typer typing-extensions
    typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp""".split()
)
#: carried instead of a package: the tracking client without the web UI and its server stack
REPLACE = {"mlflow": ("mlflow-skinny", "mlflow-tracing", "sqlalchemy", "alembic")}
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in (28, 27, 24, 17)] + [
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
ENVIRONMENT = default_environment() | {
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "implementation_name": "cpython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "extra": "",
}


def normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(root: str = "ltr_bench") -> dict[str, str]:
    """``{name: version}`` of the runtime dependencies of ``root`` (installed here) that the GPU
    machine lacks."""
    todo, seen, out = [root], set(), {}
    while todo:
        name = normal(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        if name in REPLACE:
            todo.extend(REPLACE[name])
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            print(f"gpu_wheels: {name} is not installed here; skipped", file=sys.stderr)
            continue
        if name != normal(root):
            if name in ON_DEVICE:
                continue
            out[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate(ENVIRONMENT):
                todo.append(req.name)
    return dict(sorted(out.items()))


def fetch(name: str, version: str) -> None:
    """Download the CPython 3.12 manylinux wheel of ``name==version`` into ``.whl/`` (or build a
    pure-Python one from the sdist when the registry has no wheel)."""
    spec = f"{name}=={version}"
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    cmd += ["--python-version", "3.12", "--implementation", "cp", "-d", str(WHEELS), spec]
    for platform in PLATFORMS:
        cmd[cmd.index("-d") : cmd.index("-d")] = ["--platform", platform]
    if subprocess.run(cmd).returncode == 0:
        return
    print(f"gpu_wheels: no wheel of {spec}; building a pure-Python one", file=sys.stderr)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(WHEELS), spec]
    subprocess.run(build, check=True)


def exclude_from_git() -> None:
    """``/.whl/`` in ``.git/info/exclude`` (the folder travels, git ignores it)."""
    exclude = ROOT / ".git" / "info" / "exclude"
    if exclude.parent.is_dir():
        text = exclude.read_text() if exclude.exists() else ""
        if "/.whl/" not in text.split():
            exclude.write_text(
                text + ("" if text.endswith("\n") or not text else "\n") + "/.whl/\n"
            )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true", help="print what is needed, fetch nothing")
    args = parser.parse_args()
    needed = closure()
    for name, version in needed.items():
        print(f"{name}=={version}")
    if args.list:
        return 0
    WHEELS.mkdir(exist_ok=True)
    exclude_from_git()
    have = {normal(p.name.split("-")[0]): p for p in WHEELS.glob("*.whl")}
    for name, version in needed.items():
        old = have.get(normal(name))
        if old is not None and f"-{version}-" in old.name:
            continue
        if old is not None:
            old.unlink()  # one version of each, or the install stops
        fetch(name, version)
    size = sum(p.stat().st_size for p in WHEELS.glob("*.whl"))
    print(f"gpu_wheels: {len(needed)} packages, {size / 2**20:.1f} MiB in {WHEELS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
