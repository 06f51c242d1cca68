"""Evaluation protocols: how a dataset is split into outer folds, and how a config is scored.

Three protocols (``conf/protocol/*.yaml``), each built with ``hydra.utils.instantiate``:

- :class:`SingleSplit` — the dataset's own train/vali/test (the first selected fold);
- :class:`LetorFolds` — every selected predefined LETOR fold (the papers' first experiment);
- :class:`HoldOut` — ``n_splits`` random hold-out splits by query of all queries (the papers'
  second and third experiments, binary or graded training labels).

Two ways to score a config (``protocol.objective``):

- ``final``: fit on each outer split's training part (its vali, if any, for early stopping) and
  evaluate once on vali and test — what tables report;
- ``inner_cv``: the sweep objective. Inner k-fold cross-validation **by query** on the training
  part of the outer split(s) (5 folds for LETOR folds, 3 for hold-out, as in the papers' Sect.
  4.4); the mean inner-validation metric is returned. Test data is never loaded or scored.
  ``auto`` (the default) means ``inner_cv`` for sweep trials (``sweep.trial_number`` set) and
  ``final`` otherwise.

After a sweep, the best config is refit with ``ltr-bench refit_best=<sweep dir>``
(:func:`plan_refits`): each study's best parameters become overrides of an ordinary ``final``
run on the whole training part, evaluated once on test.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from ltr_bench.data.protocol import Dataset
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.splits import apply_split, holdout_splits, kfold_by_query
from ltr_bench.errors import UserError
from ltr_bench.seeding import derive_seed

OBJECTIVES = ("auto", "final", "inner_cv")
TRAIN_LABELS = ("graded", "binary")


@dataclass(frozen=True)
class OuterSplit:
    """One outer fold / hold-out split, raw (before preprocessing).

    ``fold`` is the 0-based id logged as ``ltr.fold`` (for LETOR data the file fold number - 1,
    so ``dataset.fold=3`` is fold 2 in every run and the report can pair runs by it).
    """

    fold: int
    name: str
    train: QuerySet
    vali: QuerySet | None
    test: QuerySet | None


class Protocol:
    """Base class: outer splits of a dataset plus the inner CV used by sweeps.

    Args:
        name: the protocol's name (logged as ``ltr.protocol``).
        objective: ``auto`` | ``final`` | ``inner_cv`` (see the module docstring).
        inner_cv: number of inner folds by query for ``inner_cv``.
        inner_repeats: repetitions of the inner k-fold CV, each with its own fold assignment (and
            model seed, see :func:`ltr_bench.runner.seed_for_repeat`); 1 = the papers' plain
            k-fold. More repeats lower the noise of the sweep objective, at proportional cost.
        reevaluation_repeats: inner-CV repeats a sweep's *re-evaluation* of a top trial runs
            (``sweep.reevaluation=true``): the repeats after the search's own ones, i.e. fold
            assignments and model seeds that played no part in making the trial look best.
        split_seed: seeds inner folds (and hold-out splits); fixed across models and trials.
        train_labels: ``graded`` or ``binary`` (training labels >= the relevance threshold -> 1).
    """

    def __init__(
        self,
        name: str,
        objective: str = "auto",
        inner_cv: int = 5,
        inner_repeats: int = 1,
        reevaluation_repeats: int = 2,
        split_seed: int = 0,
        train_labels: str = "graded",
    ) -> None:
        self.name = str(name)
        if objective not in OBJECTIVES:
            raise UserError(
                f"protocol.objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}"
            )
        self.objective = objective
        if not _is_int(inner_cv) or int(inner_cv) < 2:
            raise UserError(f"protocol.inner_cv must be an integer >= 2, got {inner_cv!r}")
        self.inner_cv = int(inner_cv)
        if not _is_int(inner_repeats) or int(inner_repeats) < 1:
            raise UserError(f"protocol.inner_repeats must be an integer >= 1, got {inner_repeats!r}")
        self.inner_repeats = int(inner_repeats)
        if not _is_int(reevaluation_repeats) or int(reevaluation_repeats) < 1:
            raise UserError(
                f"protocol.reevaluation_repeats must be an integer >= 1, got {reevaluation_repeats!r}"
            )
        self.reevaluation_repeats = int(reevaluation_repeats)
        if not _is_int(split_seed):
            raise UserError(f"protocol.split_seed must be an integer, got {split_seed!r}")
        self.split_seed = int(split_seed)
        if train_labels not in TRAIN_LABELS:
            raise UserError(
                f"protocol.train_labels must be one of {', '.join(TRAIN_LABELS)}, "
                f"got {train_labels!r}"
            )
        self.train_labels = train_labels

    # ------------------------------------------------------------------ what to run
    def mode(self, is_trial: bool) -> str:
        """``final`` or ``inner_cv`` for this job."""
        if self.objective == "auto":
            return "inner_cv" if is_trial else "final"
        return self.objective

    def positions(self, dataset: Dataset) -> list[int]:
        """The outer splits this run covers (positions passed to :meth:`load`)."""
        raise NotImplementedError

    def load(self, dataset: Dataset, position: int, *, with_test: bool = True) -> OuterSplit:
        """Read outer split ``position``; ``with_test=False`` (inner CV) leaves test unread
        where the protocol can (predefined folds) and always returns ``test=None``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ inner CV
    def repeats(self, reevaluation: bool = False) -> range:
        """The inner-CV repeats a job runs: ``0 .. inner_repeats-1`` for a search trial; for a
        re-evaluation the next ``reevaluation_repeats`` ones, fresh for the trial being confirmed."""
        if reevaluation:
            return range(self.inner_repeats, self.inner_repeats + self.reevaluation_repeats)
        return range(self.inner_repeats)

    def inner_folds(
        self, train: QuerySet, reevaluation: bool = False
    ) -> Iterator[tuple[int, int, QuerySet, QuerySet]]:
        """``(repeat, k, inner_train, inner_vali)`` for the ``inner_cv`` folds by query of
        ``train``, once per repeat of :meth:`repeats`; repeat 0 is the papers' split
        (``split_seed``), later repeats re-assign the queries with a seed derived from
        ``(split_seed, repeat)``."""
        if train.n_queries < self.inner_cv:
            raise UserError(
                f"protocol.inner_cv={self.inner_cv} needs at least that many training queries, "
                f"got {train.n_queries}; lower protocol.inner_cv"
            )
        for repeat in self.repeats(reevaluation):
            seed = self.split_seed if repeat == 0 else derive_seed(self.split_seed, repeat)
            for k, split in enumerate(kfold_by_query(train, self.inner_cv, seed=seed)):
                inner_train, inner_vali = apply_split(train, split)
                yield repeat, k, inner_train, inner_vali

    def describe(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class SingleSplit(Protocol):
    """The dataset's own train/vali/test: its first selected fold."""

    def __init__(self, name: str = "single", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def positions(self, dataset: Dataset) -> list[int]:
        return [0]

    def load(self, dataset: Dataset, position: int, *, with_test: bool = True) -> OuterSplit:
        fold = dataset.load_fold(position)
        return OuterSplit(
            _fold_id(dataset, position), fold.name, fold.train, fold.vali,
            fold.test if with_test else None,
        )


class LetorFolds(SingleSplit):
    """Every fold the dataset selects (``dataset.fold``; all five by default) as an outer loop."""

    def __init__(self, name: str = "letor_folds", **kwargs: Any) -> None:
        super().__init__(name, **kwargs)

    def positions(self, dataset: Dataset) -> list[int]:
        return list(range(int(dataset.n_folds)))


class HoldOut(Protocol):
    """``n_splits`` random (train, test) splits by query of every query of the dataset.

    Args:
        n_splits: number of hold-out splits (15 in the papers).
        train_fraction: share of queries in each training part.
        vali_fraction: share of each training part held back as vali (0 = no vali).
        split: run only this split (0-based), or None for all.
    """

    def __init__(
        self,
        name: str = "holdout",
        n_splits: int = 15,
        train_fraction: float = 0.8,
        vali_fraction: float = 0.0,
        split: int | None = None,
        inner_cv: int = 3,
        **kwargs: Any,
    ) -> None:
        super().__init__(name, inner_cv=inner_cv, **kwargs)
        if not _is_int(n_splits) or int(n_splits) < 1:
            raise UserError(f"protocol.n_splits must be an integer >= 1, got {n_splits!r}")
        self.n_splits = int(n_splits)
        if not _is_number(train_fraction) or not 0.0 < float(train_fraction) < 1.0:
            raise UserError(
                f"protocol.train_fraction must be strictly between 0 and 1, got {train_fraction!r}"
            )
        self.train_fraction = float(train_fraction)
        if not _is_number(vali_fraction) or not 0.0 <= float(vali_fraction) < 1.0:
            raise UserError(
                f"protocol.vali_fraction must be in [0, 1), got {vali_fraction!r}"
            )
        self.vali_fraction = float(vali_fraction)
        if split is not None and (not _is_int(split) or not 0 <= int(split) < self.n_splits):
            raise UserError(
                f"protocol.split must be null or an index 0..{self.n_splits - 1}, got {split!r}"
            )
        self.split = None if split is None else int(split)
        self._pool: QuerySet | None = None

    def positions(self, dataset: Dataset) -> list[int]:
        return list(range(self.n_splits)) if self.split is None else [self.split]

    def load(self, dataset: Dataset, position: int, *, with_test: bool = True) -> OuterSplit:
        if self._pool is None:
            self._pool = dataset.load_all()
        pool = self._pool
        split = holdout_splits(pool, self.n_splits, self.train_fraction, self.split_seed)[position]
        train, test = apply_split(pool, split)
        vali = None
        if self.vali_fraction > 0:
            seed = derive_seed(self.split_seed, position, 1)
            inner = holdout_splits(train, 1, 1.0 - self.vali_fraction, seed)[0]
            train, vali = apply_split(train, inner)
        name = f"{getattr(dataset, 'name', 'data')}/holdout{position}"
        return OuterSplit(position, name, train, vali, test if with_test else None)


def _fold_id(dataset: Dataset, position: int) -> int:
    """0-based id of a dataset fold: the file fold number - 1 for LETOR folders."""
    numbers = getattr(dataset, "fold_numbers", None)
    return int(numbers[position]) - 1 if numbers is not None else int(position)


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool) and math.isfinite(x)


# ------------------------------------------------------------------------------ refit step
REFIT_KEY = "refit_best"
RESULTS_FILE = "optimization_results.yaml"


@dataclass(frozen=True)
class Refit:
    """One refit job: the command-line overrides of an ordinary ``final`` run."""

    study_name: str | None
    overrides: list[str]
    output_dir: str | None  # None when the user set hydra.run.dir
    label: str = ""  # the study's own overrides (e.g. dataset.fold=3), for summaries
    seed: int | None = None  # set when the refit repeats over several seeds (seed=0,1,2)


def plan_refits(args: Sequence[str]) -> list[Refit] | None:
    """The refit jobs for ``refit_best=<results>`` on a command line, or None without it.

    ``<results>`` is the sweeper's ``optimization_results.yaml`` or the sweep folder holding it.
    For each study in it (one, or one per ``study_per`` value such as each outer fold) the
    overrides are, in order:

    1. the sweep's own fixed command-line overrides (from ``multirun.yaml`` beside the results:
       sweep ranges and ``hydra`` keys left out), then the user's arguments, so a bare
       ``ltr-bench refit_best=<dir>`` repeats the sweep's model/dataset/protocol;
    2. the study's own overrides (e.g. ``dataset.fold=3``) and its best parameters, replacing
       any earlier value of the same keys;
    3. ``protocol.objective=final``, ``sweep.study_name=<study>`` (nests the run under the
       study's MLflow sweep run), ``refit_best=<file>`` (tags it ``ltr.refit``) and, unless the
       user gave one, ``hydra.run.dir=<sweep dir>/refit/<study>``.

    When the user's arguments already pin a study's overrides (``dataset.fold=3``), only the
    studies that match are refit. A seed list (``seed=0,1,2,3`` or ``seed=range(0,4)``) refits
    every study once per seed, into ``<sweep dir>/refit/<study>/seed<k>``: the seed alone moves a
    small dataset's test metric, and the mean over seeds separates that noise from the folds'.
    """
    args = list(args)
    idx = [i for i, a in enumerate(args) if a.lstrip("+").startswith(REFIT_KEY + "=")]
    if not idx:
        return None
    if len(idx) > 1:
        raise UserError(f"{REFIT_KEY} is given {len(idx)} times; give it once")
    raw = args.pop(idx[0]).lstrip("+").split("=", 1)[1]
    if raw in ("", "null", "None"):
        return [Refit(None, args, None)]
    seeds, seed_pos = _seed_list(args)

    def seed_args(seed: int | None) -> list[str]:
        if seed is None or seed_pos is None:
            return args
        return args[:seed_pos] + [f"seed={seed}"] + args[seed_pos + 1:]

    path = _results_path(raw)
    studies = load_studies(path)
    sweep_fixed = _sweep_fixed_overrides(path.parent / "multirun.yaml")
    user_keys = {_key(a): a for a in args if _key(a)}
    chosen = [
        st for st in studies
        if all(user_keys.get(_key(o), o) == o for o in st["study_overrides"])
    ]
    if not chosen:
        have = "; ".join(" ".join(st["study_overrides"]) or "(none)" for st in studies)
        raise UserError(
            f"{REFIT_KEY}={raw}: no study matches the given overrides; its studies are: {have}"
        )
    for st in chosen:
        if not st["best_overrides"]:
            raise UserError(
                f"{REFIT_KEY}={raw}: study '{st['study_name']}' has no completed trial to refit"
            )
    refits = []
    for st in chosen:
        for seed in seeds or [None]:
            refits.append(_refit_of_study(st, path, sweep_fixed, seed_args(seed), seed))
    return refits


def _refit_of_study(
    st: dict[str, Any], path: Path, sweep_fixed: list[str], args: list[str], seed: int | None
) -> Refit:
    """The overrides of one study's refit (see :func:`plan_refits` for their order)."""
    late = st["study_overrides"] + st["best_overrides"]
    late_keys = {_key(o) for o in late}
    forced = ["protocol.objective=final"]
    early = [a for a in sweep_fixed + args if _key(a) not in late_keys | {_key(forced[0])}]
    early = _dedupe_last_wins(early)
    out = early + late + forced
    if st["study_name"]:
        out = [a for a in out if _key(a) != "sweep.study_name"]
        out.append(f"sweep.study_name={format_override_value(str(st['study_name']))}")
    out.append(f"{REFIT_KEY}={format_override_value(str(path))}")
    run_dir = None
    if not any(_key(a) == "hydra.run.dir" for a in out):
        run_dir = path.parent / "refit" / _safe_name(str(st["study_name"] or "best"))
        run_dir = str(run_dir / f"seed{seed}" if seed is not None else run_dir)
        out.append(f"hydra.run.dir={format_override_value(run_dir)}")
    label = " ".join(st["study_overrides"]) or str(st["study_name"] or "best")
    return Refit(st["study_name"], out, run_dir, label, seed)


def _seed_list(args: list[str]) -> tuple[list[int] | None, int | None]:
    """The seeds of a ``seed=a,b,...`` / ``seed=range(a,b)`` argument and its position, or
    ``(None, None)`` when the seed is a single value or not given."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    pos = [i for i, a in enumerate(args) if _key(a) == "seed"]
    if not pos:
        return None, None
    text = args[pos[-1]]
    try:
        ov = OverridesParser.create().parse_override(text)
    except Exception:  # noqa: BLE001 - Hydra reports the bad override itself
        return None, None
    if not ov.is_sweep_override():
        return None, None
    try:
        seeds = list(ov.sweep_iterator())
    except Exception:  # noqa: BLE001 - e.g. interval(): not a list of values
        seeds = []
    if not seeds or not all(isinstance(v, int) and not isinstance(v, bool) for v in seeds):
        raise UserError(
            f"{text}: refit seeds must be a list of integers, e.g. seed=0,1,2,3 or seed=range(0,4)"
        )
    if len(set(seeds)) != len(seeds):
        raise UserError(f"{text}: a refit seed is repeated")
    return seeds, pos[-1]


def _results_path(raw: str) -> Path:
    p = Path(raw).expanduser()
    if p.is_dir():
        p = p / RESULTS_FILE
    if not p.is_file():
        raise UserError(
            f"{REFIT_KEY}={raw}: no such file; give the sweep's {RESULTS_FILE} or its output folder"
        )
    return p.resolve()


def load_studies(path: Path) -> list[dict[str, Any]]:
    """The studies of a sweeper results file: name, study overrides and best overrides."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{REFIT_KEY}={path}: not valid YAML ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise UserError(f"{REFIT_KEY}={path}: not a sweep results file")
    entries = data.get("studies") if isinstance(data.get("studies"), list) else [data]
    studies = []
    for e in entries:
        best = e.get("best_overrides")
        if not best and isinstance(e.get("best_params"), dict):
            best = [f"{k}={format_override_value(v)}" for k, v in e["best_params"].items()]
        if best is None and "best_params" not in e:
            raise UserError(f"{REFIT_KEY}={path}: the file has no 'best_params' of a sweep")
        studies.append({
            "study_name": e.get("study_name"),
            "study_overrides": [str(o) for o in e.get("study_overrides") or []],
            "best_overrides": [str(o) for o in best or []],
        })
    return studies


def _sweep_fixed_overrides(multirun_yaml: Path) -> list[str]:
    """The sweep command's fixed task overrides (no ranges/choices, no hydra keys)."""
    if not multirun_yaml.is_file():
        return []
    import yaml
    from hydra.core.override_parser.overrides_parser import OverridesParser

    data = yaml.safe_load(multirun_yaml.read_text()) or {}
    task = (((data.get("hydra") or {}).get("overrides") or {}).get("task")) or []
    parser = OverridesParser.create()
    out = []
    for o in task:
        try:
            ov = parser.parse_override(str(o))
        except Exception:  # noqa: BLE001 - an unparsable entry is skipped, the user can add it
            continue
        key = ov.get_key_element().lstrip("+~")
        if ov.is_sweep_override() or key.startswith("hydra") or key.startswith("sweep."):
            continue
        out.append(str(o))
    return out


def _key(arg: str) -> str | None:
    """The config key of an override ``[+~]key=value`` (None for flags like ``--cfg``)."""
    if arg.startswith("-") or "=" not in arg:
        return None
    return arg.split("=", 1)[0].lstrip("+~").strip()


def _safe_name(name: str, max_len: int = 100) -> str:
    """A folder name for a study; long names keep their (distinguishing) tail plus a hash."""
    import hashlib

    safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in name) or "study"
    if len(safe) <= max_len:
        return safe
    return hashlib.sha1(name.encode()).hexdigest()[:8] + "-" + safe[-(max_len - 9):]


def _dedupe_last_wins(args: list[str]) -> list[str]:
    last = {(_key(a) or a): i for i, a in enumerate(args)}
    return [a for i, a in enumerate(args) if last[_key(a) or a] == i]


def format_override_value(value: Any) -> str:
    """A Python value in Hydra's override grammar (``[64,32]``, ``null``, quoted strings)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, np.number)):
        return repr(value.item() if isinstance(value, np.number) else value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_override_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_override_value(v)}" for k, v in value.items()) + "}"
    text = str(value)
    if text and all(c.isalnum() or c in "_-./@:" for c in text) and not text[0].isdigit():
        return text
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
