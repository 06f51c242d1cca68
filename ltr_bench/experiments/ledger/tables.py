"""Where a ledger run's tables come from: an experiment's CSV files (from its output folder or
its MLflow artifacts), and for a run in parts the row-wise union of its parts' tables."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ltr_bench.experiments.ledger.spec import RunSpec

_MLFLOW_BAR = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


@dataclass
class Invocation:
    """A run of the ledger at one scale: its key, where its tables come from, what happened."""

    run: RunSpec
    key: str = ""
    mlflow_experiment: str = ""
    inputs: dict[str, Any] = field(default_factory=dict)  # what the key hashes, readable
    status: str = "pending"  # absent | bundle | reused | ran | failed | not run
    reason: str = ""
    run_id: str | None = None
    provenance: str = ""  # when the run started and its git commit
    tables: Mapping[str, pd.DataFrame] | None = None
    claims: list[str] = field(default_factory=list)
    parts: list[Invocation] = field(default_factory=list)  # a run in parts: one per part
    bundle: Any = None  # its results bundle (bundles.Bundle), read or written by this ledger
    bundle_written: bool = False
    stale: list[str] = field(default_factory=list)  # bundles of its name made with other inputs


class Tables(Mapping):
    """An experiment's CSV files by name, read on first use from a folder, else downloaded from
    the run's MLflow artifacts."""

    def __init__(
        self,
        folder: Path | None,
        tracker: Any = None,
        run_id: str | None = None,
        download_to: Path | None = None,
    ) -> None:
        self.folder, self.tracker, self.run_id, self.download_to = (
            folder,
            tracker,
            run_id,
            download_to,
        )
        self._cache: dict[str, pd.DataFrame] = {}

    def _path(self, name: str) -> Path | None:
        if self.folder is not None and (self.folder / name).is_file():
            return self.folder / name
        if self.tracker is None or not self.run_id or self.download_to is None:
            return None
        self.download_to.mkdir(parents=True, exist_ok=True)
        quiet = os.environ.get(_MLFLOW_BAR)
        os.environ[_MLFLOW_BAR] = "false"  # no progress bar per small CSV
        try:
            return Path(
                self.tracker.client.download_artifacts(self.run_id, name, str(self.download_to))
            )
        except Exception:  # noqa: BLE001 - MLflow raises various types for a missing artifact
            return None
        finally:
            if quiet is None:
                os.environ.pop(_MLFLOW_BAR, None)
            else:
                os.environ[_MLFLOW_BAR] = quiet

    def csv_files(self) -> dict[str, Path]:
        """Every top-level CSV of the experiment as a local file (downloaded when it is only an
        MLflow artifact): what a results bundle keeps."""
        if self.folder is not None and self.folder.is_dir():
            names = [p.name for p in self.folder.glob("*.csv")]
        elif self.tracker is not None and self.run_id:
            listed = self.tracker.client.list_artifacts(self.run_id)
            names = [a.path for a in listed if not a.is_dir and a.path.endswith(".csv")]
        else:
            names = []
        found = {name: self._path(name) for name in sorted(names)}
        return {name: path for name, path in found.items() if path is not None}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            path = self._path(name)
            if path is None or not path.is_file():
                raise KeyError(name)
            self._cache[name] = pd.read_csv(path)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)


class UnionTables(Mapping):
    """The tables of a run in parts: each CSV is the row-wise union of the parts' CSVs (each part
    ran the same experiment on other models, datasets ...). A file some part lacks is missing."""

    def __init__(self, parts: list[Mapping[str, pd.DataFrame]]) -> None:
        self.parts = parts
        self._cache: dict[str, pd.DataFrame] = {}

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in self._cache:
            self._cache[name] = pd.concat([part[name] for part in self.parts], ignore_index=True)
        return self._cache[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cache)

    def __len__(self) -> int:
        return len(self._cache)


def combine(run: RunSpec, parts: list[Invocation]) -> Invocation:
    """The invocation of a run in parts: judged on the union of its parts' tables once every part
    has them; otherwise its status and reason name the first part that is missing."""
    inv = Invocation(run, ",".join(p.key for p in parts), parts[0].mlflow_experiment, parts=parts)
    inv.run_id = ", ".join(p.run_id for p in parts if p.run_id) or None
    inv.provenance = "; ".join(p.provenance for p in parts if p.provenance)
    for k, part in enumerate(parts, 1):
        if part.tables is None:
            inv.status = part.status
            status = "" if part.status == "not run" else f" {part.status}"  # "not yet run: ..."
            inv.reason = f"part {k}/{len(parts)} ({part.run.name}){status}" + (
                f": {part.reason}" if part.reason else ""
            )
            if part.status == "absent":
                inv.reason = part.reason
            return inv
    statuses = {p.status for p in parts}
    inv.status = (
        "bundle"
        if statuses == {"bundle"}
        else "reused"
        if statuses <= {"bundle", "reused"}
        else "ran"
    )
    inv.tables = UnionTables([p.tables for p in parts if p.tables is not None])
    return inv
