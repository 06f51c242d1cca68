"""What a run is tagged with: the common tags of every run of a job and a split's dataset inputs
(name, fingerprint, source), so any number can be traced back to its config and data."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig

from ltr_bench import tracking_keys as keys
from ltr_bench.data.queryset import QuerySet
from ltr_bench.protocols import OuterSplit
from ltr_bench.runner.context import JobContext
from ltr_bench.tracking import git_commit, machine_tags


def split_fingerprint(*digests: str | None) -> str:
    """One hash of a split's parts' fingerprints (train, vali, test; ``-`` for a missing part)."""
    h = hashlib.sha256()
    for d in digests:
        h.update((d if d is not None else "-").encode())
    return h.hexdigest()[:16]


def _name(cfg: DictConfig, group: str, ctx: JobContext) -> str:
    node = cfg.get(group)
    if isinstance(node, DictConfig) and node.get("name") is not None:
        return str(node.get("name"))
    return ctx.choices.get(group, "unknown")


def package_version() -> str:
    """The installed ltr_bench version (from the package metadata)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ltr_bench")
    except PackageNotFoundError:
        return "unknown"


def common_tags(cfg: DictConfig, ctx: JobContext) -> dict[str, Any]:
    return {
        keys.TAG_MODEL: _name(cfg, "model", ctx),
        keys.TAG_DATASET: _name(cfg, "dataset", ctx),
        keys.TAG_PROTOCOL: _name(cfg, "protocol", ctx),
        keys.TAG_EVAL: _name(cfg, "eval", ctx),
        keys.TAG_SEED: cfg.seed,
        keys.TAG_VERSION: package_version(),
        keys.TAG_GIT_COMMIT: git_commit(),
        keys.TAG_STUDY: cfg.get("sweep", {}).get("study_name"),
        **machine_tags(cfg),
    }


def dataset_inputs(
    split: OuterSplit, parts: tuple[str, ...] = ("train", "vali", "test")
) -> list[Mapping[str, Any]]:
    """MLflow dataset inputs of one split: name ``mq2008/Fold1``, digest = the part's
    fingerprint, context train / vali / test, source = its file (LETOR) or generator."""
    out: list[Mapping[str, Any]] = []
    for part in parts:
        qs: QuerySet | None = getattr(split, part)
        if qs is None:
            continue
        source = {
            k: v
            for k, v in (qs.source or {}).items()
            if k in ("path", "sha256", "generator", "kind")
        }
        out.append(
            {
                "name": split.name,
                "digest": qs.fingerprint(),
                "context": part,
                "source_type": "local" if "path" in source else "code",
                "source": {"uri": source["path"]} if "path" in source else source,
                "profile": {"n_queries": qs.n_queries, "n_docs": qs.n_docs},
            }
        )
    return out
