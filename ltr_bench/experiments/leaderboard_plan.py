"""The leaderboard's parts, planned from the chosen models, data and protocol: which ``ltr-bench
experiment=table1 ...`` invocations give its rows.

Pure functions of plain values (no composing, no data read), so the plan is tested without
training. Each part is one Table 1 invocation whose results key addresses its work folder and its
bundle. Two kinds:

- the claims ledger's parts (``conf/experiment/claims.yaml``, run ``experiment.ledger_run``): used
  when the leaderboard's common overrides are that run's own (MQ2008, Table 1's five folds, its
  budget) and the ledger keeps bundles at this scale, so the committed bundles serve; a part is
  used when one of its models is chosen;
- one part per remaining model, named ``<dataset>.<label>``: its key depends on that model, the
  data, the protocol and the budget alone, so choosing other models later finds it again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ltr_bench.errors import UserError
from ltr_bench.experiments.ledger.spec import RunSpec
from ltr_bench.experiments.results_key import override_key

FOLDS, HOLDOUT = "letor_folds", "holdout"
_WORDS = "zero one two three four five six seven eight nine ten".split()


@dataclass(frozen=True)
class DataFacts:
    """The chosen dataset: its config, the name the page shows, its predefined fold numbers
    (``None`` when its files are absent here, ``()`` when it has none) and the command line's
    ``dataset.*`` overrides (its location and the like), passed on as Table 1's cell overrides."""

    config: str
    shown: str
    folds: tuple[int, ...] | None
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Protocol:
    """Table 1's protocol variant the parts run, its overrides when they differ from Table 1's
    own (the data's fold numbers, a chosen number of hold-out splits), and the outer units."""

    variant: str
    kind: str  # FOLDS or HOLDOUT
    units: int  # outer folds or hold-out splits (0: unknown, the data being absent)
    overrides: tuple[str, ...] | None = None  # None: Table 1's own
    train_labels: str = "graded"

    def describe(self, data: str) -> str:
        """``the five predefined MQ2008 folds`` / ``15 hold-out splits by query of X (...)``."""
        if self.kind == FOLDS:
            count = _WORDS[self.units] if 0 < self.units < len(_WORDS) else str(self.units or "")
            return f"the {count} predefined {data} folds".replace("the  ", "the ")
        return (
            f"{self.units} hold-out splits by query of {data} ({self.train_labels} training labels)"
        )


@dataclass(frozen=True)
class PlannedPart:
    """One invocation of the plan: its number, the Table 1 run, the rows it gives the page and
    whether it is one of the claims ledger's parts."""

    number: int
    run: RunSpec
    labels: tuple[str, ...]
    ledger: bool = False


def listed(value: str) -> list[str]:
    """``"a=[x, y]" -> ["x", "y"]``; ``"a=x,y" -> ["x", "y"]``."""
    body = value.split("=", 1)[1].strip() if "=" in value else value
    body = body.strip("[]")
    return [v.strip().strip("'\"") for v in body.split(",") if v.strip()]


def _find(overrides: Sequence[str], key: str) -> str | None:
    found = [o for o in overrides if override_key(o) == key]
    return found[-1].split("=", 1)[1] if found else None


def _set(overrides: Sequence[str], key: str, value: str) -> list[str]:
    """``overrides`` with ``key=value`` in place of ``key``'s own (or added before the last)."""
    out = [o for o in overrides if override_key(o) != key]
    where = next((i for i, o in enumerate(overrides) if override_key(o) == key), len(out))
    out.insert(min(where, len(out)), f"{key}={value}")
    return out


def choose_protocol(
    data: DataFacts,
    variant: str | None,
    n_splits: int | None,
    table1_variants: Mapping[str, Sequence[str]],
    all_folds: bool,
    default_splits: int = 15,
) -> Protocol:
    """The protocol of the parts: ``variant`` (Table 1's: ``letor_folds``, ``holdout_multi``,
    ``holdout_binary``), by default the predefined folds when the data has two or more, else
    hold-out splits with graded labels. ``all_folds`` (the papers' scale): every fold of the data,
    else Table 1's fold list of the scale. ``n_splits`` replaces Table 1's number of splits."""
    chosen = variant or (FOLDS if data.folds is None or len(data.folds) >= 2 else "holdout_multi")
    if chosen not in table1_variants:
        raise UserError(
            f"experiment.variant={chosen} is not one of Table 1's protocol variants; choose "
            f"one of [{', '.join(table1_variants)}]"
        )
    own = list(table1_variants[chosen])
    kind = HOLDOUT if _find(own, "protocol") == HOLDOUT else FOLDS
    labels = _find(own, "protocol.train_labels") or "graded"
    if kind == FOLDS:
        if data.folds is not None and len(data.folds) < 2:
            raise UserError(
                f"dataset {data.shown} has no predefined folds (Fold1..FoldK); choose hold-out "
                "splits, e.g. experiment.variant=holdout_multi experiment.n_splits=15"
            )
        table1_folds = [int(f) for f in listed(_find(own, "dataset.fold") or "")]
        folds = table1_folds
        if (
            data.folds is not None
            and not set(table1_folds) <= set(data.folds)
            or (all_folds and data.folds is not None and list(data.folds) != table1_folds)
        ):
            folds = list(data.folds) if all_folds else list(data.folds)[: len(table1_folds)]
        if folds == table1_folds:
            return Protocol(chosen, kind, len(folds), None, labels)
        shown = ",".join(str(f) for f in folds)
        return Protocol(chosen, kind, len(folds), tuple(_set(own, "dataset.fold", shown)), labels)
    own_splits = int(_find(own, "protocol.n_splits") or default_splits)
    if n_splits is None or int(n_splits) == own_splits:
        return Protocol(chosen, kind, own_splits, None, labels)
    n = int(n_splits)
    if n < 2:
        raise UserError(f"experiment.n_splits={n}: the tests need two hold-out splits at least")
    changed = _set(_set(own, "protocol.n_splits", str(n)), "protocol.split", f"range(0,{n})")
    return Protocol(chosen, kind, n, tuple(changed), labels)


def _quoted_list(items: Sequence[str]) -> str:
    return "[" + ",".join(f'"{i}"' for i in items) + "]"


def common_overrides(data: DataFacts, protocol: Protocol, n_trials: int | None) -> tuple[str, ...]:
    """The overrides every generic part shares: the dataset and protocol variant (the claims
    ledger's run spells them the same way), then what differs from Table 1's spec."""
    out = [f"experiment.datasets=[{data.config}]", f"experiment.run_variants=[{protocol.variant}]"]
    if protocol.overrides is not None:
        out.append(
            f"experiment.variants.{protocol.variant}.overrides={_quoted_list(protocol.overrides)}"
        )
    if n_trials is not None:
        out.append(f"experiment.n_trials={int(n_trials)}")
    if data.overrides:
        out.append(f"experiment.cell_overrides={_quoted_list(data.overrides)}")
    return tuple(out)


def models_of(overrides: Sequence[str]) -> list[str]:
    """The labels an invocation's ``experiment.models=[...]`` override names."""
    found = _find(overrides, "experiment.models")
    return listed(found) if found is not None else []


def _variant_override(label: str, overrides: Sequence[str]) -> str:
    return f"+experiment.model_variants={{{label}:{_quoted_list(overrides)}}}"


def plan_parts(
    models: Sequence[str],
    model_variants: Mapping[str, Sequence[str]],
    common: Sequence[str],
    data: DataFacts,
    ledger: RunSpec | None = None,
) -> list[PlannedPart]:
    """The parts giving the rows ``models``: the claims ledger's parts when its run has these
    common overrides (each with one of the chosen models), then one part per remaining model."""
    chosen = list(dict.fromkeys(str(m) for m in models))
    if not chosen:
        raise UserError("experiment.models is empty; name one model at least")
    bad = [m for m in chosen if not re.match(r"^[A-Za-z][A-Za-z0-9_]*$", m)]
    if bad:
        raise UserError(f"experiment.models: {bad} are not model or variant labels")
    parts: list[PlannedPart] = []
    left = list(chosen)
    if ledger is not None and tuple(ledger.overrides) == tuple(common):
        for piece in ledger.pieces():
            mine = tuple(m for m in models_of(piece.overrides) if m in left)
            if mine:
                parts.append(PlannedPart(len(parts) + 1, piece, mine, ledger=True))
                left = [m for m in left if m not in mine]
    for label in left:
        own = [f"experiment.models=[{label}]"]
        if label in model_variants:
            own.insert(0, _variant_override(label, list(model_variants[label])))
        # no `datasets`: the ledger would look for the config without its location; the key's
        # fingerprint of the data (None when absent) says whether it is here
        run = RunSpec(f"{data.config}.{label}", "table1", (*common, *own))
        parts.append(PlannedPart(len(parts) + 1, run, (label,)))
    return parts


def every_ledger_part(parts: Sequence[PlannedPart], ledger: RunSpec | None) -> bool:
    """Whether the plan is the ledger's whole run (its claim is then judged on the page)."""
    return ledger is not None and sum(p.ledger for p in parts) == len(ledger.pieces())


def one_sentence(reason: str) -> str:
    """A failed part's reason as one sentence: the innermost ``error:`` of its log's tail,
    without the log's path."""
    text = reason.rsplit("error: ", 1)[-1] if "error: " in reason else reason
    text = text.split(" / ")[0].strip()
    text = re.sub(r"\s*\(log [^)]*\)", "", text)
    return text if len(text) <= 300 else text[:297] + "..."
