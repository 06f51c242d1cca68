"""Reading a finished sweep back: the refit jobs of ``refit_best=<sweep dir>`` (each study's best
config as an ordinary ``final`` run of this app) and their results. The sweeper knows nothing of
refits: it writes each study's best overrides to its results file, and this module reads them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltr_bench.errors import UserError
from ltr_bench.sweeper.job import RESULTS_FILE, file_stem, format_value

REFIT_KEY = "refit_best"


@dataclass(frozen=True)
class Refit:
    """One refit job: the command-line overrides of an ordinary ``final`` run."""

    study_name: str | None
    overrides: list[str]
    output_dir: str | None  # None when the user set hydra.run.dir
    label: str = ""  # the study's own overrides (e.g. dataset.fold=3), for summaries
    seed: int | None = None  # the refit's seed (of a seed list, the command or the sweep), if known
    sweep_dir: str | None = None  # the sweep folder whose refit/ holds every refit's results


def plan_refits(args: Sequence[str], subdir: str = "refit") -> list[Refit] | None:
    """The refit jobs of ``refit_best=<sweep dir or results file>`` on a command line (None
    without it): per matching study and seed, the sweep's fixed overrides, the user's, the
    study's own and best ones, ``protocol.objective=final``, in a new ``<subdir>`` folder."""
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
        return args[:seed_pos] + [f"seed={seed}"] + args[seed_pos + 1 :]

    path = _results_path(raw)
    studies = load_studies(path)
    sweep_fixed, sweep_seed = _read_sweep(path.parent / "multirun.yaml")
    user_keys = {_key(a): a for a in args if _key(a)}
    chosen = [
        st for st in studies if all(user_keys.get(_key(o), o) == o for o in st["study_overrides"])
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
        for seed in [*seeds] if seeds else [None]:
            refits.append(
                _refit_of_study(st, path, sweep_fixed, seed_args(seed), seed, sweep_seed, subdir)
            )
    return refits


def _refit_of_study(
    st: dict[str, Any],
    path: Path,
    sweep_fixed: list[str],
    args: list[str],
    seed: int | None,
    sweep_seed: int | None = None,
    subdir: str = "refit",
) -> Refit:
    """The overrides of one study's refit (see :func:`plan_refits` for their order)."""
    late = st["study_overrides"] + st["best_overrides"]
    late_keys = {_key(o) for o in late}
    forced = ["protocol.objective=final"]
    early = [a for a in sweep_fixed + args if _key(a) not in late_keys | {_key(forced[0])}]
    last = {(_key(a) or a): i for i, a in enumerate(early)}  # a repeated key: the last one wins
    early = [a for i, a in enumerate(early) if last[_key(a) or a] == i]
    out = early + late + forced
    if st["study_name"]:
        out = [a for a in out if _key(a) != "sweep.study_name"]
        out.append(f"sweep.study_name={format_value(str(st['study_name']))}")
    out.append(f"{REFIT_KEY}={format_value(str(path))}")
    if seed is None:
        seed = _single_seed([a for a in out if _key(a) == "seed"][-1:], sweep_seed)
    run_dir = None
    if not any(_key(a) == "hydra.run.dir" for a in out):
        study_dir = path.parent / subdir / file_stem(str(st["study_name"] or "best"))
        run_dir = str(_reserve(study_dir / (f"seed{seed}" if seed is not None else "run")))
        out.append(f"hydra.run.dir={format_value(run_dir)}")
    label = " ".join(st["study_overrides"]) or str(st["study_name"] or "best")
    return Refit(st["study_name"], out, run_dir, label, seed, str(path.parent))


def _single_seed(seed_args: list[str], default: int | None) -> int | None:
    """The integer of the last ``seed=<k>`` override, else ``default`` (the sweep's seed)."""
    if seed_args:
        text = seed_args[-1].split("=", 1)[1].strip()
        return int(text) if text.lstrip("-").isdigit() else None
    return default


def _reserve(folder: Path) -> Path:
    """Create ``folder`` or, if it exists, the first free ``<folder>-2``, ``<folder>-3``, ..."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    n = 1
    while True:
        candidate = folder if n == 1 else folder.with_name(f"{folder.name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            n += 1


def _seed_list(args: list[str]) -> tuple[list[int] | None, int | None]:
    """The seeds of a ``seed=a,b,...``/``seed=range(a,b)`` argument and its position, or Nones."""
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
    return [v for v in seeds if isinstance(v, int)], pos[-1]  # all are (checked above)


def _results_path(raw: str) -> Path:
    """The results file of ``refit_best=<raw>``; else a UserError saying what ``raw`` is."""
    p = Path(raw).expanduser()
    if p.is_dir():
        if (p / RESULTS_FILE).is_file():
            return (p / RESULTS_FILE).resolve()
        if (p / "multirun.yaml").is_file():
            raise UserError(
                f"{REFIT_KEY}={raw}: this sweep folder has no {RESULTS_FILE} yet (no trial has "
                "finished); resume the sweep with its own command first"
            )
        raise UserError(
            f"{REFIT_KEY}={raw}: this folder is not a sweep's output folder (it has no {RESULTS_FILE}); "
            "give the folder of an `ltr-bench -m` sweep (multirun/<date>/<time>) or its results file"
        )
    if not p.exists():
        raise UserError(
            f"{REFIT_KEY}={raw}: no such file or folder; give a sweep's output folder "
            f"(multirun/<date>/<time>) or its {RESULTS_FILE}"
        )
    if not p.is_file():
        raise UserError(f"{REFIT_KEY}={raw}: not a file or folder; give a sweep's output folder")
    return p.resolve()


def load_studies(path: Path) -> list[dict[str, Any]]:
    """The studies of a sweeper results file: name, study overrides and best overrides."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{REFIT_KEY}={path}: not valid YAML ({exc.__class__.__name__})") from None
    except UnicodeDecodeError:  # e.g. the sweep's Optuna database
        raise UserError(
            f"{REFIT_KEY}={path}: not a sweep results file (not text); give the sweep's output "
            f"folder (multirun/<date>/<time>) or its {RESULTS_FILE}"
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"{REFIT_KEY}={path}: not a sweep results file")
    studies_entry = data.get("studies")
    entries = studies_entry if isinstance(studies_entry, list) else [data]
    studies = []
    for e in entries:
        best = e.get("best_overrides")
        if not best and isinstance(e.get("best_params"), dict):
            best = [f"{k}={format_value(v)}" for k, v in e["best_params"].items()]
        if best is None and "best_params" not in e:
            raise UserError(f"{REFIT_KEY}={path}: the file has no 'best_params' of a sweep")
        studies.append(
            {
                "study_name": e.get("study_name"),
                "study_overrides": [str(o) for o in e.get("study_overrides") or []],
                "best_overrides": [str(o) for o in best or []],
            }
        )
    return studies


def _read_sweep(multirun_yaml: Path) -> tuple[list[str], int | None]:
    """The sweep command's fixed task overrides and the ``seed`` of its saved config."""
    if not multirun_yaml.is_file():
        return [], None
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
    seed = data.get("seed")
    return out, (seed if isinstance(seed, int) and not isinstance(seed, bool) else None)


@dataclass(frozen=True)
class RefitResult:
    """One refit's ``results.json`` under ``<sweep dir>/refit/``."""

    study_name: str | None
    label: str  # the study's own overrides, as in the refit table
    seed: int | None
    path: Path
    results: dict[str, Any] = field(repr=False, compare=False, default_factory=dict)


def find_refits(sweep_dir: str | Path, subdir: str = "refit") -> tuple[list[RefitResult], int]:
    """Every refit of a sweep (the latest per study and seed, in study then seed order) and how
    many older ones were left out."""
    import json

    root = Path(sweep_dir) / subdir
    results = Path(sweep_dir) / RESULTS_FILE
    labels: dict[Any, str] = {}
    if results.is_file():
        try:
            labels = {
                st["study_name"]: " ".join(st["study_overrides"]) or str(st["study_name"] or "best")
                for st in load_studies(results)
            }
        except UserError:
            labels = {}
    order = {name: i for i, name in enumerate(labels)}
    latest: dict[tuple[Any, Any], tuple[float, RefitResult]] = {}
    superseded = 0
    for path in [*root.glob("*/results.json"), *root.glob("*/*/results.json")]:
        try:
            data = json.loads(path.read_text())
            config = data.get("config") or {}
            stamp = path.stat().st_mtime
        except (OSError, ValueError, AttributeError):
            continue
        study = (config.get("sweep") or {}).get("study_name")
        seed = config.get("seed")
        folder = path.relative_to(root).parts[0]
        record = RefitResult(study, labels.get(study, str(study or folder)), seed, path, data)
        key = (study or folder, seed)
        if key in latest:
            superseded += 1
            if stamp < latest[key][0]:
                continue
        latest[key] = (stamp, record)
    found = [r for _, r in latest.values()]
    found.sort(
        key=lambda r: (
            order.get(r.study_name, len(order)),
            r.label,
            r.seed if isinstance(r.seed, int) else -1,
        )
    )
    return found, superseded


def _key(arg: str) -> str | None:
    """The config key of an override ``[+~]key=value`` (None for flags like ``--cfg``)."""
    if arg.startswith("-") or "=" not in arg:
        return None
    return arg.split("=", 1)[0].lstrip("+~").strip()
