"""Training batches for the neural rankers: document pairs inside queries, and padded query lists.

Pairs (DirectRanker, RankNet, RankSVM) are sampled on the fly, per batch, from per-document lookup
tables: documents are sorted by (query, label descending), so the documents of a query that have a
different label -- or a neighbouring label -- form at most two contiguous ranges around each
document's own label run. Drawing a pair is then a handful of vectorised gathers; the O(n^2) pairs
of a query are never materialised. Lists (ListNet, LambdaRank, validation) are whole queries,
grouped by length and padded per batch into ``[B, L]`` index matrices
(:mod:`ltr_bench.data.list_batches`, re-exported here).

Everything is a torch tensor on one device, so batches can be drawn on a GPU without a DataLoader.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Literal, NamedTuple

import numpy as np
import torch
from torch import Tensor

from ltr_bench.data.list_batches import ListBatch, QueryBatches
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.seeding import derive_seed

PairMode = Literal["all", "neighbours"]
PairDistribution = Literal["pairs", "documents"]
PAIR_MODES = ("all", "neighbours")
PAIR_DISTRIBUTIONS = ("pairs", "documents")


class PairBatch(NamedTuple):
    """Row indices (into the QuerySet the sampler was built from) of sampled pairs.

    ``hi[i]`` has a strictly higher label than ``lo[i]``; both belong to the same query.
    """

    hi: Tensor
    lo: Tensor
    label_hi: Tensor
    label_lo: Tensor


class PairDraws(NamedTuple):
    """The random numbers of a batch of pairs: an integer per pair below the sampler's total
    weight, and (``documents`` distribution) a uniform number that picks the partner."""

    draw: Tensor
    uniform: Tensor | None


class PairSampler:
    """Samples pairs of documents with different labels inside queries, more relevant one first.

    Args:
        data: the training queries.
        pairs: ``"all"`` -- any two documents of a query with different labels; ``"neighbours"``
            -- only documents of *adjacent label classes present in the query* (property (ii) of
            DirectRanker Sect. 3: transitivity covers the rest). With labels {0, 1, 2} in a query
            that means 0-1 and 1-2 pairs; with {0, 2} the 0-2 pair is still used, so no query loses
            its ordering information.
        distribution: ``"pairs"`` -- every eligible pair equally likely (the same distribution as
            enumerating all pairs and shuffling); ``"documents"`` -- every document that has a
            partner is equally likely to be drawn, its partner uniformly among its candidates.
        device: where the lookup tables (and sampled indices) live.

    Memory is O(documents); drawing ``n`` pairs costs O(n log documents).
    """

    def __init__(
        self,
        data: QuerySet,
        pairs: PairMode = "all",
        distribution: PairDistribution = "pairs",
        device: torch.device | str = "cpu",
    ) -> None:
        if pairs not in PAIR_MODES:
            raise UserError(f"model.pairs={pairs!r} must be one of {PAIR_MODES}")
        if distribution not in PAIR_DISTRIBUTIONS:
            raise UserError(
                f"model.pair_distribution={distribution!r} must be one of {PAIR_DISTRIBUTIONS}"
            )
        self.pairs, self.distribution = pairs, distribution
        tables = _pair_tables(data, pairs)
        n_cand = tables["len_a"] + tables["len_b"]
        weight = n_cand if distribution == "pairs" else (n_cand > 0).astype(np.int64)
        self.n_docs = data.n_docs
        #: number of ordered (anchor, partner) candidates = 2 x the eligible unordered pairs
        self.n_candidates = int(n_cand.sum())
        #: documents that have at least one partner
        self.n_anchors = int((n_cand > 0).sum())
        self._cdf = np.cumsum(weight)
        self._np = tables
        self._device = torch.device("cpu")
        self._t = self._tensors(torch.device(device))

    @property
    def n_pairs(self) -> int:
        """The number of eligible unordered pairs (different labels, same query)."""
        return self.n_candidates // 2

    @property
    def device(self) -> torch.device:
        return self._device

    def to(self, device: torch.device | str) -> PairSampler:
        """Move the lookup tables to ``device`` (in place; returns self)."""
        device = torch.device(device)
        if device != self._device:
            self._t = self._tensors(device)
        return self

    def _tensors(self, device: torch.device) -> dict[str, Tensor]:
        self._device = device
        out = {k: torch.as_tensor(v, device=device) for k, v in self._np.items()}
        out["cdf"] = torch.as_tensor(self._cdf, device=device)
        return out

    def sample(self, n: int, generator: torch.Generator | None = None) -> PairBatch:
        """Draw ``n`` pairs (with replacement), oriented so that ``hi`` is the more relevant."""
        return self.pairs_of(self.draw(n, generator))

    def draw(self, n: int, generator: torch.Generator | None = None) -> PairDraws:
        """The random numbers of ``n`` pairs (:meth:`pairs_of` turns them into the pairs): the
        one part of a draw that needs a generator, so a compiled step can take it as an input."""
        if self.n_anchors == 0:
            raise UserError(
                "the training data has no query with two different labels, so no pairs can be "
                "formed (check the labels or the relevance binarisation)"
            )
        total = int(self._cdf[-1])
        draw = torch.randint(0, total, (n,), generator=generator, device=self._device)
        if self.distribution == "pairs":
            return PairDraws(draw, None)
        return PairDraws(draw, torch.rand(n, generator=generator, device=self._device))

    def pairs_of(self, draws: PairDraws) -> PairBatch:
        """The pairs that ``draws`` select: gathers and a search on the device, shapes fixed by
        the draws' (no host sync, so the whole step can be captured)."""
        t, (draw, u) = self._t, draws
        anchor = torch.searchsorted(t["cdf"], draw, right=True)
        len_a, len_b = t["len_a"][anchor], t["len_b"][anchor]
        if u is None:  # "pairs": the residual of the draw is uniform over the partners
            offset = draw - (t["cdf"][anchor] - (len_a + len_b))
        else:
            offset = (u * (len_a + len_b)).long().clamp_max(len_a + len_b - 1)
        in_a = offset < len_a
        partner = torch.where(
            in_a, t["start_a"][anchor] + offset, t["start_b"][anchor] + offset - len_a
        )
        lab = t["label"]
        first = lab[anchor] > lab[partner]
        hi_s = torch.where(first, anchor, partner)
        lo_s = torch.where(first, partner, anchor)
        row = t["row"]
        return PairBatch(row[hi_s], row[lo_s], lab[hi_s], lab[lo_s])


def _pair_tables(data: QuerySet, pairs: str) -> dict[str, np.ndarray]:
    """Per-document candidate ranges in (query, label descending) order.

    Returns ``row`` (QuerySet row of each sorted position), ``label``, and two candidate ranges
    ``[start_a, start_a + len_a)`` and ``[start_b, start_b + len_b)`` of sorted positions per
    document: for ``"all"`` the documents before and after its label run within its query, for
    ``"neighbours"`` the previous and next label runs of its query.
    """
    n = data.n_docs
    qidx = data.query_index()
    labels = np.asarray(data.labels, dtype=np.int64)
    row = np.lexsort((-labels, qidx)).astype(np.int64)  # stable: by query, then label descending
    lab = labels[row]
    pos = np.arange(n, dtype=np.int64)
    new_run = np.ones(n, dtype=bool)
    if n > 1:
        new_run[1:] = (qidx[1:] != qidx[:-1]) | (lab[1:] != lab[:-1])
    run_id = np.cumsum(new_run) - 1
    run_start = pos[new_run]
    run_end = np.append(run_start[1:], n)
    rs, re = run_start[run_id], run_end[run_id]
    q_start = np.asarray(data.offsets[:-1])[qidx]
    q_end = np.asarray(data.offsets[1:])[qidx]
    if pairs == "all":
        start_a, len_a = q_start, rs - q_start
        start_b, len_b = re, q_end - re
    else:
        has_prev = rs > q_start
        has_next = re < q_end
        prev_start = run_start[np.maximum(run_id - 1, 0)]
        next_end = run_end[np.minimum(run_id + 1, len(run_start) - 1)]
        start_a = np.where(has_prev, prev_start, rs)
        len_a = np.where(has_prev, rs - prev_start, 0)
        start_b, len_b = re, np.where(has_next, next_end - re, 0)
    return {
        "row": row,
        "label": lab,
        "start_a": start_a.astype(np.int64),
        "len_a": len_a.astype(np.int64),
        "start_b": start_b.astype(np.int64),
        "len_b": len_b.astype(np.int64),
    }


def auto_pair_batch_size(pairs_per_epoch: int, low: int = 256, high: int = 4096) -> int:
    """Pairs per step for ``batch_size: auto``: the power of two at or below
    ``pairs_per_epoch / 16``, clipped to ``[low, high]``.

    Small data (MQ2008: ~10k pairs per epoch -> 512) get at least ~16 steps per epoch, which early
    stopping on epochs needs; large data (MSLR-WEB10K: 723k -> 4096) get big batches, which are
    several times faster per pair on a CPU.
    """
    target = max(int(pairs_per_epoch) // 16, 1)
    return int(min(max(1 << (target.bit_length() - 1), low), high))


class PairBatches:
    """One epoch of pair batches, re-seeded per epoch and per DDP rank; an iterable with a length.

    ``batch_size`` is the pairs of one optimisation step over all ``world_size`` ranks (DDP
    averages the ranks' gradients): rank ``r`` draws its share, ``batch_size // world_size`` plus
    one for the first ``batch_size % world_size`` ranks. Every rank takes
    ``ceil(pairs_per_epoch / batch_size)`` steps, as DDP requires equal step counts, so the epoch
    has ``pairs_per_epoch`` pairs over all ranks and the same steps, batch and learning-rate
    schedule as on one process: the number of devices does not change what a config means.
    Rank ``r`` in epoch ``e`` draws from a generator seeded with ``(seed, e, r)``, so ranks draw
    different pairs and a run is reproducible.
    """

    def __init__(
        self,
        sampler: PairSampler,
        batch_size: int,
        pairs_per_epoch: int,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if batch_size < 1 or pairs_per_epoch < 1:
            raise UserError(
                f"model.batch_size={batch_size} and pairs per epoch={pairs_per_epoch} must be >= 1"
            )
        self.sampler, self.batch_size = sampler, int(batch_size)
        self.pairs_per_epoch, self.seed = int(pairs_per_epoch), int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.epoch = 0

    @property
    def rank_batch_size(self) -> int:
        """Pairs this rank draws per step (its share of ``batch_size``, at least one)."""
        share, extra = divmod(self.batch_size, self.world_size)
        return max(1, share + int(self.rank < extra))

    def __len__(self) -> int:
        return max(1, math.ceil(self.pairs_per_epoch / self.batch_size))

    def __iter__(self) -> Iterator[PairBatch]:
        for draws in self.draws():
            yield self.sampler.pairs_of(draws)

    def draws(self) -> Iterator[PairDraws]:
        """The epoch's batches as their random numbers (the same pairs as iterating), for a
        step that turns them into pairs itself (:meth:`PairSampler.pairs_of`)."""
        gen = torch.Generator(device=self.sampler.device)
        gen.manual_seed(derive_seed(self.seed, self.epoch, self.rank, bits=63))
        self.epoch += 1
        n = self.rank_batch_size
        for _ in range(len(self)):
            yield self.sampler.draw(n, gen)


class PairDrawBatches(PairBatches):
    """:class:`PairBatches` as their random numbers (:class:`PairDraws`): the same pairs, for a
    step that turns them into pairs itself (:meth:`PairSampler.pairs_of`)."""

    def __iter__(self) -> Iterator[PairDraws]:  # type: ignore[override]
        return self.draws()


__all__ = [
    "PairBatch",
    "PairDraws",
    "PairSampler",
    "PairBatches",
    "PairDrawBatches",
    "ListBatch",
    "QueryBatches",
    "auto_pair_batch_size",
]
