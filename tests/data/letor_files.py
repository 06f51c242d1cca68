"""Writers of small LETOR text files for the data-layer tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def letor_lines(labels, qids, features, comments=None) -> list[str]:
    """LETOR text lines (1-based feature indices, every feature written)."""
    out = []
    for i, (y, q, row) in enumerate(zip(labels, qids, features)):
        feats = " ".join(f"{j + 1}:{v:g}" for j, v in enumerate(row))
        line = f"{int(y)} qid:{int(q)} {feats}"
        if comments is not None:
            line += f" #docid = {comments[i]} inc = 1"
        out.append(line)
    return out


def write_letor(path: Path, labels, qids, features, comments=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(letor_lines(labels, qids, features, comments)) + "\n")
    return path


def random_letor(path: Path, n_queries=6, n_features=5, seed=0, qid_start=1, docs=(2, 9)) -> Path:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(docs[0], docs[1], size=n_queries)
    qids = np.repeat(np.arange(qid_start, qid_start + n_queries), lengths)
    labels = rng.integers(0, 3, size=len(qids))
    feats = np.round(rng.uniform(0, 1, size=(len(qids), n_features)), 4)
    return write_letor(path, labels, qids, feats)
