"""The leaderboard's board: its parts planned (:mod:`~ltr_bench.experiments.leaderboard_plan`) from
the run's config -- the dataset the command line chose, Table 1's spec at the scale, the
leaderboard's options and, on MQ2008 at the papers' budget, the claims ledger's run -- and the
words the page's title and intro are written with."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ltr_bench.errors import UserError
from ltr_bench.experiments.common import ExperimentRun, compose_run_config, plain, scaled_spec
from ltr_bench.experiments.leaderboard_plan import (
    FOLDS,
    DataFacts,
    PlannedPart,
    Protocol,
    choose_protocol,
    common_overrides,
    every_ledger_part,
    plan_parts,
)
from ltr_bench.experiments.ledger import Claim, RunSpec, configured_folder, parse_ledger
from ltr_bench.experiments.results_key import override_key


@dataclass
class Board:
    """The plan of one leaderboard command and what its page says about it."""

    scale: str
    data: DataFacts
    protocol: Protocol
    parts: list[PlannedPart]
    where: dict[str, str]  # refits.csv rows of the page
    words: dict[str, Any] = field(default_factory=dict)  # the title's and intro's placeholders
    nominal_ratio: float = 1 / 3
    nominal_note: str = ""
    ledger: RunSpec | None = None
    claim: Claim | None = None
    judging: bool = True
    ledger_bundles: Path | None = None
    ledger_work: Path | None = None


def data_facts(cfg: DictConfig, user: list[str]) -> DataFacts:
    """The command line's dataset: its config's name, the name the page shows (the folder's), its
    predefined folds (``None`` when its files are absent here) and its ``dataset.*`` overrides."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import instantiate

    name = str(cfg.dataset.get("name") or "dataset")
    if HydraConfig.initialized():
        name = str(HydraConfig.get().runtime.choices.get("dataset") or name)
    path, folder = cfg.dataset.get("path"), cfg.dataset.get("folder")
    shown = Path(str(path)).name if path else str(folder or name)
    folds: tuple[int, ...] | None
    try:
        data = instantiate(cfg.dataset, _convert_="all")
    except Exception:  # noqa: BLE001 - absent here: the bundles may stand for the data
        folds = None
    else:
        numbers = getattr(data, "fold_numbers", None)
        n = int(data.n_folds)
        folds = tuple(int(f) for f in numbers) if numbers is not None else tuple(range(1, n + 1))
        folds = folds if len(folds) >= 2 else ()
    own = tuple(o for o in user if override_key(o).startswith("dataset."))
    return DataFacts(name, shown, folds, own)


def _ledger(spec: DictConfig, scale: str) -> tuple[RunSpec, Claim, bool, DictConfig]:
    """The ledger's run whose parts serve MQ2008, its claim, whether the ledger judges at this
    scale, and the ledger's spec (its work folder)."""
    ledger_spec = scaled_spec(compose_run_config(["experiment=claims", f"scale={scale}"]), scale)
    runs, claims = parse_ledger(ledger_spec)
    name, cid = str(spec.ledger_run), str(spec.claim)
    if name not in runs:
        raise UserError(
            f"experiment.ledger_run={name} is not a run of conf/experiment/claims.yaml; "
            f"choose one of [{', '.join(runs)}]"
        )
    found = [c for c in claims if c.id == cid and c.run == name]
    if not found:
        raise UserError(
            f"experiment.claim={cid} is not a claim of conf/experiment/claims.yaml on run {name}"
        )
    return runs[name], found[0], bool(ledger_spec.get("judge", True)), ledger_spec


def _inner_cv(table1: DictConfig, protocol: Protocol) -> int:
    """The folds of the sweeps' inner cross-validation: Table 1's override, else the protocol's."""
    lists = [table1.get("scale_overrides"), table1.get("cell_overrides")]
    own = protocol.overrides or plain(table1.variants)[protocol.variant]["overrides"]
    for o in [*(x for lst in lists for x in plain(lst) or []), *own]:
        if override_key(str(o)) == "protocol.inner_cv":
            return int(str(o).split("=", 1)[1])
    return int(compose_run_config([f"protocol={protocol.kind}"]).protocol.inner_cv)


def _nominal(protocol: Protocol) -> tuple[float, str]:
    """The protocol's own n_test / n_train, for rows that predate recording their split sizes."""
    if protocol.kind == FOLDS:
        return 1 / 3, "LETOR's folds: one test part against three training parts"
    p = compose_run_config(["protocol=holdout"]).protocol
    train = float(p.train_fraction) * (1 - float(p.vali_fraction))
    return (1 - float(p.train_fraction)) / train, "the hold-out protocol's nominal shares"


def plan_board(exp: ExperimentRun, user: list[str]) -> Board:
    """The leaderboard's parts for this command, and the words of its page."""
    spec, scale = exp.spec, str(exp.cfg.get("scale", "full"))
    from ltr_bench.runner import job_context

    data = data_facts(exp.cfg, user)
    table1 = scaled_spec(compose_run_config(["experiment=table1", f"scale={scale}"]), scale)
    variants = {str(k): list(v["overrides"]) for k, v in plain(table1.variants).items()}
    n_splits = spec.get("n_splits")
    protocol = choose_protocol(
        data,
        str(spec.variant) if spec.get("variant") else None,
        int(n_splits) if n_splits is not None else None,
        variants,
        all_folds=scale == "full",
    )
    n_trials = spec.get("n_trials")
    trials = int(n_trials) if n_trials is not None else int(table1.n_trials)
    common = common_overrides(data, protocol, trials if trials != int(table1.n_trials) else None)
    ledger = claim = ledger_spec = None
    judging = True
    bundles = configured_folder(spec.get("bundles_dir"), job_context().cwd)
    if spec.get("ledger_run") and bundles is not None:
        ledger, claim, judging, ledger_spec = _ledger(spec, scale)
    models = [str(m) for m in plain(spec.models) or []]
    model_variants = {str(k): list(v) for k, v in (plain(spec.get("model_variants")) or {}).items()}
    parts = plan_parts(models, model_variants, common, data, ledger)
    ratio, note = _nominal(protocol)
    every = len(models) == len(plain(spec.get("names")) or {}) or every_ledger_part(parts, ledger)
    outer, unit = ("outer fold", "fold") if protocol.kind == FOLDS else ("hold-out split", "split")
    words = {
        "scale": scale,
        "who": "every ranker" if every else f"{len(models)} rankers",
        "Who": "Every ranker" if every else f"{len(models)} rankers",
        "data": protocol.describe(data.shown),
        "where": protocol.describe(data.shown).replace(" predefined", ""),
        "outer": outer,
        "unit": unit,
        "n_trials": trials,
        "inner_cv": _inner_cv(table1, protocol),
    }
    return Board(
        scale,
        data,
        protocol,
        parts,
        {"variant": protocol.variant, "dataset": data.config},
        words,
        ratio,
        note,
        ledger,
        claim,
        judging,
        bundles if ledger is not None else None,
        configured_folder(ledger_spec.get("work_dir"), job_context().cwd) if ledger_spec else None,
    )
