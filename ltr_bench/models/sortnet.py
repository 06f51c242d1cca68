"""SortNet (Rigutini et al.): a neural comparator CmpNN trained by incremental pair selection.

The comparator (paper Sect. 2, :class:`~ltr_bench.models.cmpnn.CmpNN`) reads a pair ``<x, y>``
and outputs ``N>(x, y) ~ P(x > y)`` and ``N<(x, y) ~ P(x < y)``; its dual-neuron weight sharing
makes ``N>(x, y) == N<(y, x)`` hold by construction.

Training follows Algorithm 3.1: starting from a random comparator and empty pair sets ``TP`` (train)
and ``VP`` (vali), each iteration ranks the training and validation queries with the current
comparator, adds the pairs it mis-compares to ``TP`` / ``VP``, retrains on ``TP`` for a few epochs
(keeping the epoch with the lowest squared error on ``VP``) and keeps the comparator whose ranking
of the validation queries is best. It stops after ``max_iter`` iterations or when no new
mis-compared pair appears. The first ``TP`` is therefore the pairs a random comparator gets wrong,
about a random half of all pairs of different labels (capped at ``max_new_pairs``).

Ranking (``score``): instead of running a comparison sort in Python, every document plays every
other document of its query (or a seeded random sample of ``max_opponents`` of them in long
queries) and its score is the mean preference margin ``N>(x, y) - N<(x, y)`` over its opponents,
a soft Borda count. The margins are computed for many queries at once on padded
``[queries, docs, opponents, hidden]`` tensors, in chunks of queries of similar length. Because
every pair is compared, "the pairs mis-compared while sorting" are all pairs of different labels
whose margin has the wrong sign (ties count as wrong).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ltr_bench.data.padding import pad_index, sorted_chunks
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.base import Ranker
from ltr_bench.models.cmpnn import CmpNN
from ltr_bench.models.networks import parse_optimizer

__all__ = ["SortNet", "CmpNN", "CMPNN_FILE"]


class SortNet(Ranker):
    """SortNet ranker: CmpNN comparator, Algorithm 3.1 training, soft-Borda ranking.

    Args:
        n_hidden: hidden neurons of the comparator (even; ``n_hidden // 2`` dual pairs).
        hidden_activation: ``sigmoid`` (paper), ``tanh`` or ``relu``.
        max_iter: iterations of the incremental procedure (paper: 20).
        epochs_per_iter: epochs of comparator training on ``TP`` per iteration.
        optimizer: the optimizer group's option (``conf/optimizer``: a node ``{name, _target_,
            lr, weight_decay, ...}``) or a registry name; default Adam with lr 0.003.
        batch_size: pairs per optimisation step.
        max_new_pairs: at most this many newly mis-compared pairs (a seeded random sample) join
            ``TP`` per iteration (and as many join ``VP``); caps work on large data.
        max_pairs: cap on ``|TP|`` (and ``|VP|``); when exceeded, old pairs are dropped at random
            and all new ones kept.
        max_opponents: documents a document is compared with in ``score`` (all of its query when
            the query is shorter; a seeded random sample otherwise).
        rank_quality: metric name (see ``ltr_bench.metrics.evaluate``) used to pick the best
            iteration on the validation queries (training queries without vali).
        warm_start: train ``C^{i+1}`` starting from ``C^i`` (True) or from a fresh random net.
        chunk_elements: memory budget (tensor elements) of one chunk of all-pairs comparisons.
        name: the model config's name (kept for tracking, unused in training).
        seed: seeds initialisation, pair sampling and batching.

    ``history`` has one record per iteration i: ``train_<rank_quality>`` and
    ``vali_<rank_quality>`` of comparator ``C^i``, how many training pairs it mis-compares
    (``n_wrong_train_pairs``, of which ``n_new_train_pairs`` are not in ``TP`` yet), and, except on
    the last record, the training of ``C^{i+1}``: ``train_loss`` (last epoch), ``vali_pair_loss``
    (best epoch on ``VP``) and ``n_train_pairs`` (``|TP|``). ``best_iteration_`` is the i kept.
    """

    def __init__(
        self,
        *,
        n_hidden: int = 20,
        hidden_activation: str = "sigmoid",
        max_iter: int = 20,
        epochs_per_iter: int = 5,
        optimizer: Any = None,
        batch_size: int = 512,
        max_new_pairs: int = 20000,
        max_pairs: int = 200000,
        max_opponents: int = 128,
        rank_quality: str = "ndcg@10",
        warm_start: bool = True,
        chunk_elements: int = 4_000_000,
        name: str | None = None,
        seed: int = 0,
    ) -> None:
        super().__init__(seed=seed, name=name)
        # checked here, once: a one-sentence error now, not after loading data
        # none given: conf/model/sortnet.yaml's optimizer
        self.optimizer = parse_optimizer(optimizer, defaults=("model=sortnet",))
        for key, value in (
            ("max_iter", max_iter),
            ("epochs_per_iter", epochs_per_iter),
            ("batch_size", batch_size),
            ("max_new_pairs", max_new_pairs),
            ("max_pairs", max_pairs),
            ("max_opponents", max_opponents),
        ):
            if int(value) < 1:
                raise UserError(f"model.{key} must be >= 1, got {value}")
        from ltr_bench.metrics import parse_metric

        CmpNN(1, int(n_hidden), str(hidden_activation))  # validates both now, not after loading
        self.n_hidden = int(n_hidden)
        self.hidden_activation = str(hidden_activation)
        self.max_iter = int(max_iter)
        self.epochs_per_iter = int(epochs_per_iter)
        self.batch_size = int(batch_size)
        self.max_new_pairs = int(max_new_pairs)
        self.max_pairs = int(max_pairs)
        self.max_opponents = int(max_opponents)
        self.rank_quality = parse_metric(rank_quality).name
        self.warm_start = bool(warm_start)
        self.chunk_elements = int(chunk_elements)
        self.net: CmpNN | None = None
        self.best_iteration_: int | None = None

    # ------------------------------------------------------------------ public API
    def fit(self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None) -> SortNet:
        """Algorithm 3.1; ``logger`` is ignored (plain torch loop), ``history`` has the curves."""
        torch.manual_seed(self.seed)
        rng = np.random.default_rng(self.seed)
        net = self._new_net(train.n_features)
        use_vali = vali is not None and vali.n_queries > 0
        x_train = _features(train)
        x_vali = _features(vali) if use_vali and vali is not None else None
        tp = np.zeros(0, dtype=np.int64)  # pair codes i * N + j, label_i > label_j
        vp = np.zeros(0, dtype=np.int64)
        best_quality, best_state = -np.inf, copy.deepcopy(net.state_dict())
        self.history = []
        for it in range(self.max_iter + 1):
            self.net = net
            scores_t, wrong_t = self._rank(train, net, with_wrong_pairs=True)
            quality_t = self._quality(scores_t, train)
            record: dict[str, float] = {"round": it, f"train_{self.rank_quality}": quality_t}
            if use_vali and vali is not None:
                scores_v, wrong_v = self._rank(vali, net, with_wrong_pairs=True)
                quality = self._quality(scores_v, vali)
                record[f"vali_{self.rank_quality}"] = quality
            else:
                wrong_v, quality = np.zeros(0, dtype=np.int64), quality_t
            if quality > best_quality:
                best_quality, best_state, self.best_iteration_ = (
                    quality,
                    copy.deepcopy(net.state_dict()),
                    it,
                )
            new_t = np.setdiff1d(wrong_t, tp, assume_unique=True)
            new_v = np.setdiff1d(wrong_v, vp, assume_unique=True)
            record.update(n_wrong_train_pairs=len(wrong_t), n_new_train_pairs=len(new_t))
            if (len(new_t) == 0 and len(new_v) == 0) or it == self.max_iter:
                self.history.append(record)
                break
            tp = _grow(tp, new_t, self.max_new_pairs, self.max_pairs, rng)
            vp = _grow(vp, new_v, self.max_new_pairs, self.max_pairs, rng)
            if not self.warm_start:
                net = self._new_net(train.n_features)
            record.update(self._train_and_validate(net, x_train, tp, x_vali, vp, rng))
            record["n_train_pairs"] = len(tp)
            self.history.append(record)
        net.load_state_dict(best_state)
        self.net = net
        return self

    def score(self, data: QuerySet) -> np.ndarray:
        """Mean preference margin of each document over (a sample of) its query's documents."""
        if self.net is None:
            raise RuntimeError("SortNet.score called before fit")
        scores, _ = self._rank(data, self.net, with_wrong_pairs=False)
        return scores

    def compare(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(N>(x, y), N<(x, y))`` for row-aligned batches of feature vectors."""
        if self.net is None:
            raise RuntimeError("SortNet.compare called before fit")
        with torch.no_grad():
            gt, lt = self.net(
                torch.as_tensor(np.asarray(x, dtype=np.float32)),
                torch.as_tensor(np.asarray(y, dtype=np.float32)),
            )
        return gt.numpy(), lt.numpy()

    # ------------------------------------------------------------------ saved model
    def save_params(self, folder: Path) -> dict[str, Any]:
        """The comparator's state dict (``cmpnn.pt``)."""
        if self.net is None:
            raise RuntimeError("SortNet.save_params called before fit")
        state = {k: v.detach().cpu() for k, v in self.net.state_dict().items()}
        torch.save(state, Path(folder) / CMPNN_FILE)
        return {"weights": CMPNN_FILE, "best_iteration": self.best_iteration_}

    def load_params(self, folder: Path, n_features: int) -> None:
        """The saved comparator (``weights_only=True``)."""
        net = self._new_net(int(n_features))
        net.load_state_dict(
            torch.load(Path(folder) / CMPNN_FILE, map_location="cpu", weights_only=True)
        )
        self.net = net

    # ------------------------------------------------------------------ training
    def _new_net(self, n_features: int) -> CmpNN:
        return CmpNN(n_features, self.n_hidden, self.hidden_activation)

    def _train_and_validate(
        self,
        net: CmpNN,
        x_train: torch.Tensor,
        tp: np.ndarray,
        x_vali: torch.Tensor | None,
        vp: np.ndarray,
        rng: np.random.Generator,
    ) -> dict[str, float]:
        """Train on ``TP`` for ``epochs_per_iter`` epochs; keep the epoch best on ``VP``."""
        n_t = x_train.shape[0]
        left, right = torch.from_numpy(tp // n_t), torch.from_numpy(tp % n_t)
        opt = self.optimizer.build(net.parameters())
        best_loss, best_state, loss_t = np.inf, None, np.nan
        for _ in range(self.epochs_per_iter):
            perm = torch.from_numpy(rng.permutation(len(tp)))
            total = 0.0
            for start in range(0, len(tp), self.batch_size):
                idx = perm[start : start + self.batch_size]
                loss = _pair_loss(net, x_train[left[idx]], x_train[right[idx]])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            loss_t = total / max(len(tp), 1)
            if x_vali is not None and len(vp):
                n_v = x_vali.shape[0]
                v_left, v_right = torch.from_numpy(vp // n_v), torch.from_numpy(vp % n_v)
                with torch.no_grad():
                    loss_v = float(_pair_loss(net, x_vali[v_left], x_vali[v_right]))
                if loss_v < best_loss:
                    best_loss, best_state = loss_v, copy.deepcopy(net.state_dict())
        if best_state is not None:
            net.load_state_dict(best_state)
        out = {"train_loss": loss_t}
        if np.isfinite(best_loss):
            out["vali_pair_loss"] = best_loss
        return out

    def _quality(self, scores: np.ndarray, data: QuerySet) -> float:
        from ltr_bench.metrics import evaluate

        value = evaluate(scores, data, names=(self.rank_quality,)).means[self.rank_quality]
        return float(value) if np.isfinite(value) else -np.inf

    # ------------------------------------------------------------------ ranking
    def _rank(
        self, data: QuerySet, net: CmpNN, *, with_wrong_pairs: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Soft-Borda scores ``[N]`` and (optionally) codes of mis-compared pairs.

        A pair ``(i, j)`` with ``label_i > label_j`` is mis-compared when
        ``N>(x_i, x_j) <= N<(x_i, x_j)``; its code is ``i * N + j``.
        """
        n = data.n_docs
        scores = np.zeros(n, dtype=np.float64)
        wrong: list[np.ndarray] = []
        if n == 0:
            return scores, np.zeros(0, dtype=np.int64)
        rng = np.random.default_rng(self.seed)  # same opponents on every call: deterministic
        labels = torch.from_numpy(data.labels.astype(np.int64))
        with torch.no_grad():
            a_all, c_all = net.halves(_features(data))
            chunks = _query_chunks(data, self.max_opponents, net.w_gt.shape[0], self.chunk_elements)
            for rows, mask in chunks:
                opp_pos, opp_mask = _opponents(mask, self.max_opponents, rng)
                rows_t = torch.from_numpy(rows)
                opp_rows = torch.gather(rows_t, 1, torch.from_numpy(opp_pos))
                valid = torch.from_numpy(
                    opp_mask[:, None, :]
                    & mask[:, :, None]
                    & (opp_pos[:, None, :] != np.arange(mask.shape[1])[None, :, None])
                )
                a_d, c_d = a_all[rows_t][:, :, None, :], c_all[rows_t][:, :, None, :]
                a_o, c_o = a_all[opp_rows][:, None, :, :], c_all[opp_rows][:, None, :, :]
                gt, lt = net.outputs_from_halves(a_d, c_d, a_o, c_o)  # [Qc, L, M]
                margin = torch.where(valid, gt - lt, torch.zeros((), dtype=gt.dtype))
                count = valid.sum(dim=2).clamp(min=1)
                chunk_scores = (margin.double().sum(dim=2) / count).numpy()
                scores[rows[mask]] = chunk_scores[mask]
                if with_wrong_pairs:
                    better = labels[rows_t][:, :, None] > labels[opp_rows][:, None, :]
                    bad = valid & better & (margin <= 0)
                    q, i, j = torch.nonzero(bad, as_tuple=True)
                    wrong.append((rows_t[q, i] * n + opp_rows[q, j]).numpy())
        codes = np.unique(np.concatenate(wrong)) if wrong else np.zeros(0, dtype=np.int64)
        return scores, codes.astype(np.int64)


def _features(data: QuerySet) -> torch.Tensor:
    """The features as a tensor; a copy: data may be read-only (the data cache's memory maps),
    which a tensor sharing its memory would make torch warn of."""
    return torch.from_numpy(np.array(data.features))


def _pair_loss(net: CmpNN, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Paper's squared error for pairs with ``x > y`` (target ``[1, 0]``), mean over the batch.

    The reversed pair ``<y, x>`` with target ``[0, 1]`` has the identical error by the weight
    sharing, so one orientation suffices.
    """
    gt, lt = net(x, y)
    return ((1.0 - gt) ** 2 + lt**2).mean()


def _grow(
    pairs: np.ndarray, new: np.ndarray, max_new: int, max_total: int, rng: np.random.Generator
) -> np.ndarray:
    """``pairs`` plus at most ``max_new`` of ``new`` (random), at most ``max_total`` in all."""
    if len(new) > max_new:
        new = np.sort(rng.choice(new, size=max_new, replace=False))
    keep = max_total - len(new)
    if len(pairs) > keep:
        pairs = np.sort(rng.choice(pairs, size=max(keep, 0), replace=False))
    return np.union1d(pairs, new)


def _query_chunks(
    data: QuerySet, max_opponents: int, pairs: int, budget: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Padded row indices ``[Qc, L]`` and masks of chunks of queries of similar length.

    Queries are visited shortest first so each chunk pads only to its own longest query; a chunk
    holds as many queries as fit ``Qc * L * min(L, max_opponents) * pairs <= budget``.
    """
    lengths = data.query_lengths
    cost = lengths * np.minimum(lengths, max_opponents) * pairs
    for idx in sorted_chunks(lengths, budget, cost):
        yield pad_index(data.offsets, idx)


def _opponents(
    mask: np.ndarray, max_opponents: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``[Qc, M]`` of each query's opponents and their validity mask.

    All documents when the query has at most ``max_opponents``; else a random sample of them.
    """
    width = mask.shape[1]
    if width <= max_opponents:
        pos = np.broadcast_to(np.arange(width), mask.shape).copy()
        return pos, mask.copy()
    keys = np.where(mask, rng.random(mask.shape), np.inf)
    pos = np.argsort(keys, axis=1, kind="stable")[:, :max_opponents]
    return pos, np.take_along_axis(mask, pos, axis=1)


CMPNN_FILE = "cmpnn.pt"
