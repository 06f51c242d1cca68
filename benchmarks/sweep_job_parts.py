"""A later sweep job's CPU, part by part: which library each millisecond of a job is spent in
(Hydra, MLflow, Lightning, ltr_bench's own steps) and how much is the fitting itself.

``bench_sweep_timeline.py``'s worker hook builds a :class:`JobParts`: it wraps the functions of
:data:`PARTS` as their modules load, counts each job's CPU by part, and at the end of each job
after a worker's first writes the job's CPU seconds by part as one stamp
(``parts {"job": ..., "parts": {...}}``). A part's time is exclusive: a wrapped call made inside
another counts in its own part only, and what no wrapped call holds counts in :data:`OUTSIDE`.
Calls outside a job (the study's end in a worker) are not counted. Each wrapped call reads the
process's CPU clock twice: microseconds a job.
"""

from __future__ import annotations

import functools
import inspect
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

STAMP = "parts "  # a job's stamp: this, then its JSON
OUTSIDE = (
    "Hydra: the launcher's job outside the parts (payload, singletons, HydraConfig.set_config)"
)
TASK = "ltr_bench: the task outside the parts (config checks, data, tags, the trial's run)"
# A neural fit (the benchmark's sweep fits DirectRanker): what Lightning runs around the module's
# own work, and that work
FIT = "Lightning: the fits' Trainer, loops and hooks around the module's work (and seeding)"
BUILT = "fitting: the network and the module built (DirectRanker)"
STEPS = "fitting: the module's training epochs (pairs sampled, forward, backward, optimiser)"
VALIDATION = "fitting: the module's validation (scores, metric)"
TRACKER_CALLS = (
    "from_config",
    "find_or_create_sweep_run",
    "start_run",
    "log_params",
    "log_inputs",
    "log_metric_rows",
    "set_tags",
    "end_run",
    "rename",
    "extend",
)
# (module, class or None, function, part); the part's words before ':' name its library
PARTS: list[tuple[str, str | None, str, str]] = [
    (
        "hydra._internal.config_loader_impl",
        "ConfigLoaderImpl",
        "load_sweep_config",
        "Hydra: the job's config composed from the config files",
    ),
    (
        "hydra.core.utils",
        None,
        "run_job",
        "Hydra: run_job's own work (output folder, HydraConfig, the task's config copied)",
    ),
    ("hydra.core.utils", None, "_save_config", "Hydra: the three .hydra YAML files"),
    ("hydra.core.utils", None, "configure_log", "Hydra: the job's logging configured"),
    ("ltr_bench.launching.processes", None, "_run_guarded", TASK),
    *(
        ("ltr_bench.tracking.tracker", "Tracker", name, f"MLflow: Tracker.{name}")
        for name in TRACKER_CALLS
    ),
    ("ltr_bench.models.neural", "NeuralRanker", "fit", FIT),
    ("ltr_bench.models.neural", "NeuralRanker", "build_scorer", BUILT),
    ("ltr_bench.models.direct_ranker", "DirectRanker", "build_module", BUILT),
    ("ltr_bench.models.ranking_module", "RankingModule", "training_step", STEPS),
    ("ltr_bench.models.direct_ranker", "PairwiseModule", "on_train_epoch_start", STEPS),
    ("ltr_bench.models.ranking_module", "RankingModule", "validation_step", VALIDATION),
    ("ltr_bench.models.ranking_module", "RankingModule", "on_validation_epoch_end", VALIDATION),
    (
        "ltr_bench.runner.inner_cv",
        None,
        "prepare",
        "ltr_bench: preprocessing (through the transform cache)",
    ),
    ("ltr_bench.runner.pipeline", "RankerPrototype", "of", "ltr_bench: rankers built"),
    ("ltr_bench.runner.pipeline", "RankerPrototype", "fresh", "ltr_bench: rankers built"),
    ("ltr_bench.runner.inner_cv", None, "evaluate_split", "ltr_bench: scoring and evaluation"),
    ("ltr_bench.models.neural", "NeuralRanker", "score", "ltr_bench: scoring and evaluation"),
    ("ltr_bench.runner.inner_cv", None, "run_params", "ltr_bench: the run's params collected"),
    ("ltr_bench.runner.job", None, "results_json", "ltr_bench: results.json"),
]


class JobParts:
    """Each job's CPU by part in this process, written through ``stamp`` as each job ends."""

    def __init__(
        self, stamp: Callable[[str], None], clock: Callable[[], float] = time.process_time
    ) -> None:
        self.stamp, self.clock = stamp, clock
        self.stack: list[list[Any]] = []  # [part, CPU at entry, CPU of the calls inside]
        self.cpu: defaultdict[str, float] = defaultdict(float)
        self.jobs = 0

    def enter(self, part: str) -> None:
        self.stack.append([part, self.clock(), 0.0])

    def leave(self) -> float:
        """End the innermost call: its CPU less its inner calls' to its part; its total back."""
        part, start, inner = self.stack.pop()
        total = self.clock() - start
        self.cpu[part] += total - inner
        if self.stack:
            self.stack[-1][2] += total
        return float(total)

    def counted(self, owner: Any, name: str, part: str) -> None:
        """Count ``owner.<name>``'s calls made inside a job in ``part``."""
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.stack:
                return inner(*args, **kwargs)
            self.enter(part)
            try:
                return inner(*args, **kwargs)
            finally:
                self.leave()

        static = isinstance(inspect.getattr_static(owner, name), classmethod)
        setattr(owner, name, staticmethod(wrapper) if static else wrapper)

    def counted_job(self, owner: Any, name: str) -> None:
        """Make ``owner.<name>`` a job: its CPU by part stamped as it ends (each worker's first
        job, its caches warming, is left out)."""
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def job(*args: Any, **kwargs: Any) -> Any:
            self.jobs += 1
            self.cpu.clear()
            self.enter(OUTSIDE)
            try:
                return inner(*args, **kwargs)
            finally:
                total = self.leave()
                if self.jobs > 1:
                    self.stamp(STAMP + json.dumps({"job": total, "parts": dict(self.cpu)}))

        setattr(owner, name, job)

    def install(self, on_import: Callable[[str, Callable[[Any], None]], None]) -> None:
        """Wrap every function of :data:`PARTS` once its module has loaded."""
        by_module: defaultdict[str, list[tuple[str | None, str, str]]] = defaultdict(list)
        for module, owner, name, part in PARTS:
            by_module[module].append((owner, name, part))
        for module, entries in by_module.items():
            on_import(module, functools.partial(self._wrap_all, entries))

    def _wrap_all(self, entries: list[tuple[str | None, str, str]], module: Any) -> None:
        for owner, name, part in entries:
            self.counted(getattr(module, owner) if owner else module, name, part)


def jobs_of(stamps: Sequence[tuple[float, float, str]]) -> list[dict[str, Any]]:
    """The ``parts`` stamps of one process: each counted job's CPU and CPU by part."""
    return [json.loads(label[len(STAMP) :]) for _, _, label in stamps if label.startswith(STAMP)]


def library(part: str) -> str:
    """The library a part is spent in: its words before ':'."""
    return part.split(":", 1)[0]


def parts_table(jobs: Sequence[dict[str, Any]]) -> list[str]:
    """A later job's mean CPU by part (in :data:`PARTS`' order), then by library."""
    if not jobs:
        return []
    job = statistics.mean(j["job"] for j in jobs)
    order = list(dict.fromkeys([OUTSIDE, *(p for *_, p in PARTS)]))
    seen = {p for j in jobs for p in j["parts"]}
    order = [p for p in order if p in seen] + sorted(seen - set(order))
    mean = {p: sum(j["parts"].get(p, 0.0) for j in jobs) / len(jobs) for p in order}
    lines = [
        f"A job after a worker's first, CPU by part (the mean of {len(jobs)} jobs: "
        f"{1000 * job:.0f} ms a job):",
        "",
        "| part | CPU ms a job | share |",
        "| --- | ---: | ---: |",
    ]
    lines += [f"| {p} | {1000 * mean[p]:.1f} | {mean[p] / job:.0%} |" for p in order]
    libraries: defaultdict[str, float] = defaultdict(float)
    for p in order:
        libraries[library(p)] += mean[p]
    lines += ["", "| spent in | CPU ms a job | share |", "| --- | ---: | ---: |"]
    lines += [
        f"| {name} | {1000 * cpu:.1f} | {cpu / job:.0%} |"
        for name, cpu in sorted(libraries.items(), key=lambda kv: -kv[1])
    ]
    return lines
