"""Training and validation batches of whole queries (ListNet, LambdaRank, the context-aware
rankers, validation): queries grouped by length and padded per batch into ``[B, L]`` index
matrices on the device.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from ltr_bench.data.padding import bucket_chunks, length_buckets, pad_index, two_widths
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.seeding import derive_seed


class ListBatch(NamedTuple):
    """Whole queries padded to ``[B, L]``: QuerySet row indices (0 at padding) and a mask."""

    rows: Tensor
    mask: Tensor


class QueryBatches:
    """Batches of whole queries, grouped by length so that padding wastes less than 2x.

    Queries are bucketed by the power of two above their length; a bucket of width ``w`` is cut
    into batches of ``min(batch_queries, max(1, max_cells // w**cost_power))`` queries
    (``cost_power=2`` bounds the ``B x L x L`` pair tensors of LambdaRank). With ``shuffle`` the
    queries inside buckets and the order of the batches are shuffled per epoch (seeded by
    ``(seed, epoch)``, the same on every rank). Under DDP ``batch_queries`` is the queries of one
    step over all ranks: batches hold ``ceil(batch_queries / world_size)`` queries and each rank
    takes every ``world_size``-th batch, the list wrapped around so that all ranks take the same
    number of steps (about as many as one process takes). ``max_cells`` stays a per-rank bound.

    Padding happens on ``device``: the query offsets go there once, each epoch sends its query
    order there in one copy (``Q`` integers), and every batch is then cut and padded there with
    no host-to-device copy and no synchronisation (the widths are known on the host). Without
    ``shuffle`` the padded batches are the same every epoch and are kept after the first.

    With ``fixed_shapes`` (a captured training step, which compiles once per shape) batches take
    two shapes: queries are padded to one of two widths (:func:`~ltr_bench.data.padding.two_widths`)
    and every batch of a width to its row count (at least 2) with empty queries (mask all
    False), so an epoch compiles at most twice and no dimension has size one.
    """

    def __init__(
        self,
        data: QuerySet,
        batch_queries: int = 32,
        max_cells: int = 1 << 20,
        cost_power: int = 1,
        shuffle: bool = True,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        device: torch.device | str = "cpu",
        fixed_shapes: bool = False,
    ) -> None:
        if batch_queries < 1:
            raise UserError(f"model.batch_size={batch_queries} (queries per batch) must be >= 1")
        lengths = np.asarray(data.query_lengths, dtype=np.int64)
        self._offsets = np.array(data.offsets, dtype=np.int64)  # a copy: data may be read-only
        self._lengths = lengths
        self._queries = np.flatnonzero(lengths > 0)
        self.batch_queries, self.max_cells = int(batch_queries), int(max_cells)
        self.cost_power = int(cost_power)
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        self.device = torch.device(device)
        self.fixed_shapes = bool(fixed_shapes)
        self._buckets = None
        if self.fixed_shapes:
            self._buckets = length_buckets(two_widths(lengths, self.cost_power))
        self.epoch = 0
        self._n_batches = len(self._chunks(None))
        self._on_device: dict[str, Tensor] = {}
        self._kept: list[ListBatch] | None = None

    def _chunks(self, rng: np.random.Generator | None) -> list[np.ndarray]:
        chunks = bucket_chunks(
            self._lengths, self._rows, queries=self._queries, rng=rng, buckets=self._buckets
        )
        if rng is not None:
            chunks = [chunks[i] for i in rng.permutation(len(chunks))]
        return chunks

    def _rows(self, width: int) -> int:
        """Queries per batch of a bucket of ``width``: ``batch_queries`` (this rank's share),
        fewer where ``max_cells`` bounds ``rows x width^cost_power``."""
        per_rank = -(-self.batch_queries // self.world_size)
        return min(per_rank, max(1, self.max_cells // width**self.cost_power))

    def _shape(self, queries: np.ndarray) -> tuple[int, int]:
        """``(rows, width)`` of the batch of ``queries``: as many rows as queries and the
        longest query's width, or with ``fixed_shapes`` the bucket's (see the class doc)."""
        if self._buckets is None:
            return len(queries), int(self._lengths[queries].max())
        width = 1 << int(self._buckets[queries[0]])
        return max(2, self._rows(width), len(queries)), width

    def __len__(self) -> int:
        return max(1, math.ceil(self._n_batches / self.world_size)) if self._n_batches else 0

    def __iter__(self) -> Iterator[ListBatch]:
        if self._kept is not None:
            self.epoch += 1
            yield from self._kept
            return
        rng = (
            np.random.default_rng(derive_seed(self.seed, self.epoch, bits=63))
            if self.shuffle
            else None
        )
        self.epoch += 1
        chunks = self._chunks(rng)
        if not chunks:
            return
        picks = [(self.rank + i * self.world_size) % len(chunks) for i in range(len(self))]
        plan = [chunks[i] for i in picks]
        if self.shuffle:
            yield from self._padded(plan)
        else:
            self._kept = list(self._padded(plan))
            yield from self._kept

    def _padded(self, plan: list[np.ndarray]) -> Iterator[ListBatch]:
        """The batches of ``plan`` (query positions per batch), padded on the device.

        The same rows and mask as :func:`~ltr_bench.data.padding.pad_index` (``fill=0``); rows
        beyond a batch's queries (``fixed_shapes``) are the empty query after the last.
        """
        t = self._tables()
        shapes = [self._shape(q) for q in plan]
        empty = len(self._lengths)  # the tables' extra query of length 0
        padded = [
            np.pad(q, (0, rows - len(q)), constant_values=empty)
            for q, (rows, _) in zip(plan, shapes)
        ]
        order = torch.as_tensor(np.concatenate(padded), device=self.device)  # one copy per epoch
        for q, (_, width) in zip(order.split([rows for rows, _ in shapes]), shapes):
            col = t["col"][:width]
            mask = col[None, :] < t["length"][q][:, None]
            rows = torch.where(mask, t["start"][q][:, None] + col[None, :], 0)
            yield ListBatch(rows, mask)

    def _tables(self) -> dict[str, Tensor]:
        """Query starts and lengths (and an empty query after the last) and a column index on
        the device (copied there once)."""
        if not self._on_device:
            longest = int(self._lengths.max()) if len(self._lengths) else 0
            for name, array in (
                ("start", np.append(self._offsets[:-1], 0)),
                ("length", np.append(self._lengths, 0)),
                ("col", np.arange(max(2, 2 * longest), dtype=np.int64)),
            ):
                self._on_device[name] = torch.as_tensor(array, device=self.device)
        return self._on_device

    def pad(self, queries: np.ndarray) -> ListBatch:
        """Row indices ``[B, L]`` and mask of the given query positions."""
        rows, mask = pad_index(self._offsets, queries, fill=0)
        return ListBatch(
            torch.as_tensor(rows, device=self.device), torch.as_tensor(mask, device=self.device)
        )
