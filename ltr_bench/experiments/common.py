"""What every experiment driver needs: its spec at the chosen scale, an output folder, one MLflow
parent run holding the outputs as artifacts, CSV/PNG/text writing, progress bars, and run configs
composed from the project's ``conf/`` tree.

An experiment (``conf/experiment/<name>.yaml``, package ``experiment``) holds its choices; the
values under ``scales.<scale>`` replace the top-level ones for ``scale=<scale>``. Drivers get an
:class:`ExperimentRun` and return a summary ``DataFrame`` (printed and saved as ``summary.csv``).

Why the scales are merged here and not by Hydra: Hydra can pick a config *file* by a choice
(``- optional <path>_${scale}`` in a defaults list), so each experiment's quick values would have
to be a file of their own. In a folder under ``conf/`` every such file becomes a config group
option (listed by ``ltr-bench --help``, selectable on its own); at the conf root they would be a
dozen more files beside the shared bases. The ``scales:`` block keeps an experiment in one file,
and :func:`scaled_spec` gives the same precedence Hydra would (file < scale < command line).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from ltr_bench import tracking_keys as keys
from ltr_bench.config.util import plain
from ltr_bench.errors import UserError
from ltr_bench.experiments.run_configs import compose_run_config as compose_run_config
from ltr_bench.tracking import RunTracker, Tracker, flatten_config

TAG_EXPERIMENT = keys.TAG_EXPERIMENT  # names live in tracking_keys
TAG_SCALE = keys.TAG_SCALE
ROLE_EXPERIMENT = keys.ROLE_EXPERIMENT
# The results key (invocation_inputs, ltr_bench.experiments.results_key) on its parent run: the
# claims ledger re-uses a finished run with the same key instead of running it again.
TAG_EXPERIMENT_KEY = keys.TAG_EXPERIMENT_KEY
SPEC_META_KEYS = ("scales",)


def scaled_spec(cfg: DictConfig, scale: str, overrides: Sequence[str] = ()) -> DictConfig:
    """``cfg.experiment`` with ``scales[scale]`` merged over its top-level values, then the
    ``experiment.<key>=<value>`` ones of ``overrides`` (a command line) over both, then resolved:
    yaml < scale < command line, and ``${experiment.n_trials}`` sees the value that won, as
    ``${scale}`` sees the whole config."""
    data = OmegaConf.to_container(cfg.experiment, resolve=False)
    assert isinstance(data, dict)
    scales = data.get("scales") or {}
    if scale not in scales:
        known = ", ".join(sorted(scales)) or "none"
        raise UserError(f"scale={scale} is not a scale of this experiment; choose one of [{known}]")
    base = {k: v for k, v in data.items() if k not in SPEC_META_KEYS}
    merged = OmegaConf.merge(base, scales[scale] or {})
    assert isinstance(merged, DictConfig)
    _apply_experiment_overrides(merged, overrides)
    top = OmegaConf.to_container(cfg, resolve=False)
    assert isinstance(top, dict)
    root = OmegaConf.create({k: v for k, v in top.items() if k not in ("experiment", "hydra")})
    root.experiment = merged
    resolved = OmegaConf.create(OmegaConf.to_container(root.experiment, resolve=True))
    assert isinstance(resolved, DictConfig)
    return resolved


def job_overrides() -> list[str]:
    """The running Hydra job's command-line overrides (none outside a Hydra job)."""
    from hydra.core.hydra_config import HydraConfig

    return list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []


def _apply_experiment_overrides(spec: DictConfig, overrides: Sequence[str]) -> None:
    """Set ``spec``'s keys from the ``experiment.<key>=<value>`` ones of ``overrides``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    mine = [
        o for o in overrides if o.lstrip("+~").startswith("experiment.") and not o.startswith("~")
    ]
    for o in OverridesParser.create().parse_overrides(mine):
        key = o.key_or_group.split(".", 1)[1]
        if key.split(".")[0] in SPEC_META_KEYS:
            continue
        value = o.value()
        OmegaConf.update(
            spec,
            key,
            plain(value) if not isinstance(value, (str, int, float, bool)) else value,
            merge=False,
            force_add=True,
        )


def user_overrides(exclude_keys: Iterable[str] = ()) -> list[str]:
    """The command line's overrides minus the experiment's own (``experiment``, ``scale``) and any
    of ``exclude_keys``: passed on to the runs an experiment starts (threads, tracking, seed ...)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return []
    skip = {k.lstrip("+~") for k in exclude_keys}
    out = []
    for o in HydraConfig.get().overrides.task:
        key = o.split("=", 1)[0].lstrip("+~")
        if key in ("experiment", "scale") or key.startswith("experiment.") or key in skip:
            continue
        out.append(o)
    return out


def override_key(override: str) -> str:
    """``"a.b=1" -> "a.b"``, ``"+x=1" -> "x"``."""
    return override.split("=", 1)[0].lstrip("+~")


@dataclass
class ExperimentRun:
    """One experiment run: config, spec at its scale, output folder, MLflow parent run."""

    cfg: DictConfig
    spec: DictConfig
    out_dir: Path
    tracker: RunTracker
    run_id: str
    files: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.spec.name)

    def path(self, name: str) -> Path:
        p = self.out_dir / name
        p.parent.mkdir(parents=True, exist_ok=True)
        return p

    def _logged(self, path: Path) -> Path:
        self.files.append(path)
        if self.tracker.enabled:
            parent = path.parent.relative_to(self.out_dir).as_posix()
            self.tracker.log_artifact(self.run_id, path, None if parent == "." else parent)
        return path

    def write_csv(self, frame: Any, name: str) -> Path:
        """``frame`` as ``<out>/<name>``, logged as an artifact."""
        path = self.path(name)
        frame.to_csv(path, index=False)
        return self._logged(path)

    def write_text(self, text: str, name: str) -> Path:
        path = self.path(name)
        path.write_text(text, encoding="utf-8")
        return self._logged(path)

    def save_figure(self, fig: Any, name: str) -> Path:
        """A matplotlib figure as PNG (closed afterwards), logged as an artifact."""
        import matplotlib.pyplot as plt

        path = self.path(name)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return self._logged(path)

    def log_file(self, path: Path, artifact_dir: str | None = None) -> None:
        """A file written elsewhere (e.g. by a report) as an artifact of the parent run."""
        self.files.append(path)
        if self.tracker.enabled:
            self.tracker.log_artifact(self.run_id, path, artifact_dir)

    def log_metrics(self, metrics: Mapping[str, float]) -> None:
        self.tracker.log_metrics(
            self.run_id,
            {k: v for k, v in metrics.items() if v is not None and math.isfinite(float(v))},
        )

    def progress(self, total: int, desc: str | None = None) -> Any:
        """A tqdm progress bar on stderr (one line, updated per cell)."""
        from tqdm.auto import tqdm

        return tqdm(
            total=total,
            desc=desc or self.name,
            file=sys.stderr,
            dynamic_ncols=True,
            mininterval=0.5,
            leave=True,
        )


def _output_dir(cfg: DictConfig, name: str) -> Path:
    from ltr_bench.runner import job_context

    ctx = job_context()
    if ctx.output_dir is not None:
        return ctx.output_dir
    return ctx.cwd / "outputs" / "experiments" / name


def run_experiment(cfg: DictConfig) -> Any:
    """Run the experiment ``cfg.experiment`` at ``cfg.scale``: call its driver (``_target_``)
    inside an MLflow parent run, print and save the summary it returns."""
    from hydra.utils import get_method

    from ltr_bench.runner import (
        check_top_level,
        configure_threads,
        job_context,
        package_version,
        seed_everything,
    )
    from ltr_bench.tracking import git_commit

    check_top_level(cfg)
    scale = str(cfg.get("scale", "full"))
    spec = scaled_spec(cfg, scale, job_overrides())
    driver = get_method(str(spec._target_))
    name = str(spec.get("name") or "experiment")
    out_dir = _output_dir(cfg, name)
    out_dir.mkdir(parents=True, exist_ok=True)
    tracking = OmegaConf.merge(cfg.tracking, {"experiment_name": str(spec.mlflow_experiment)})
    assert isinstance(tracking, DictConfig)
    tracker = Tracker.from_config(tracking, job_context().cwd)
    configure_threads(cfg)
    seed_everything(int(cfg.seed))
    tags = {
        keys.TAG_ROLE: ROLE_EXPERIMENT,
        TAG_EXPERIMENT: name,
        TAG_SCALE: scale,
        keys.TAG_SEED: cfg.seed,
        keys.TAG_VERSION: package_version(),
        keys.TAG_GIT_COMMIT: git_commit(),
        TAG_EXPERIMENT_KEY: invocation_key(name, scale, int(cfg.seed), spec, user_overrides()),
    }
    with tracker.run(f"{name} ({scale})", tags) as run_id:
        tracker.log_params(run_id, flatten_config(spec, prefix="experiment"))
        tracker.log_params(run_id, {"seed": cfg.seed, "scale": scale})
        exp = ExperimentRun(cfg, spec, out_dir, tracker, run_id)
        exp.write_text(OmegaConf.to_yaml(spec, resolve=True), "experiment.yaml")
        print(f"{name} (scale={scale}): {spec.get('title', '')}", flush=True)
        summary = driver(exp)
        if summary is not None:
            exp.write_csv(summary, "summary.csv")
            print(format_summary(summary), flush=True)
    print(f"outputs: {out_dir}", flush=True)
    if tracker.enabled:
        print(
            f"MLflow run {run_id} in {tracker.tracking_uri} (experiment "
            f"'{tracker.experiment_name}')",
            flush=True,
        )
    return summary


def format_summary(frame: Any) -> str:
    """The summary table as aligned text (floats with 4 decimals)."""
    import pandas as pd

    with pd.option_context(
        "display.max_rows",
        500,
        "display.max_columns",
        50,
        "display.width",
        160,
        "display.float_format",
        "{:.4f}".format,
    ):
        return frame.to_string(index=False)


def invocation_inputs(
    name: str,
    scale: str,
    seed: int,
    spec: DictConfig,
    overrides: Sequence[str],
    memo: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """What decides an invocation's results, as a readable record
    (:func:`~ltr_bench.experiments.results_key.results_inputs`): the deciding options of the
    resolved spec (after ``experiment.*`` overrides), the deciding command-line overrides and the
    sha256 of the files of every dataset it reads (``memo``: fingerprints taken before)."""
    from ltr_bench.experiments.fingerprints import data_fingerprints, datasets_read
    from ltr_bench.experiments.results_key import results_inputs

    data = plain(spec)
    read = data_fingerprints(datasets_read(data, overrides), memo)
    return results_inputs(name, scale, seed, data, overrides, read)


def invocation_key(
    name: str, scale: str, seed: int, spec: DictConfig, overrides: Sequence[str]
) -> str:
    """The results key of an invocation: the hash of :func:`invocation_inputs`."""
    from ltr_bench.experiments.results_key import results_key

    return results_key(invocation_inputs(name, scale, seed, spec, overrides))
