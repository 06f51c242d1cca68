"""AdaRank (Xu & Li, 2007) with the journal's Appendix A speed-up, in NumPy.

Weak rankers are single features, ``h_k(x) = x_k``. Each round picks the feature with the best
query-weighted performance ``sum_q P_t(q) E(h_k, q)``, gives it the weight
``alpha_t = 0.5 ln(sum_q P_t(q) (1 + E(h_t, q)) / sum_q P_t(q) (1 - E(h_t, q)))``, forms
``f_t = sum_s alpha_s h_s`` and re-weights the queries by ``P_{t+1}(q) ~ exp(-E(f_t, q))``, where
``E`` is a per-query ranking metric (NDCG@10 by default, or MAP, ...).

Speed-up (RankNet revisited, Appendix A): a weak ranker's ranking of a query never changes, so the
matrix ``E(h_k, q)`` for all features and queries is computed once, vectorised on padded
``[queries x features, docs]`` blocks with :func:`ltr_bench.metrics.metric_padded` (NumPy). A
round then costs one matrix-vector product for the selection plus one vectorised evaluation of
``f_t``.

Degeneracies of plain AdaRank and how they are handled:

* **The same feature again and again.** The weights depend only on ``f_t``'s ranking; when adding
  the chosen feature once more does not change that ranking, the weights and hence the choice
  repeat forever. As in RankLib, ``max_consecutive`` caps how many times in a row one feature may
  be chosen: a feature chosen that many consecutive times is left out of the next selection
  (``None`` = no cap).
* **Infinite alpha.** When the chosen feature is perfect (``E = 1``) on every query with weight,
  the denominator of ``alpha`` is 0. It is clipped at ``1e-12`` (alpha about 14, so the perfect
  feature dominates ``f_t``), and training stops once ``f_t`` itself reaches ``E = 1`` on every
  training query: the weights are then uniform and nothing is left to learn.
* **Queries without relevant documents** have no defined ``E``; they are left out of training
  (they would keep the largest weight forever without teaching anything).

``alpha`` is never negative because ``0 <= E <= 1``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ltr_bench.data.padding import pad_index, sorted_chunks
from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models.base import Ranker

_DENOMINATOR_FLOOR = 1e-12


class AdaRank(Ranker):
    """AdaRank with precomputed weak-ranker performance.

    Args:
        rounds: boosting rounds (paper's Table 4: 100).
        metric: the per-query performance measure ``E`` (any name accepted by
            :func:`ltr_bench.metrics.parse_metric`, e.g. ``"ndcg@10"``, ``"map"``).
        early_stopping: patience in rounds on the validation ``metric`` (Table 4: 10 or 20); the
            best round's model is kept. ``None`` or 0 (the papers' "False") trains all rounds and keeps the last model.
        max_consecutive: most times one feature may be chosen in a row (RankLib: 2, 5, 10);
            ``None`` disables the cap.
        relevance_threshold: labels >= this count as relevant (MAP, P@k, query filtering).
        chunk_elements: memory budget (array elements) of one padded evaluation block.
        name: the model config's name (kept for tracking, unused in training).
        seed: kept for the common interface (AdaRank is deterministic).
    """

    def __init__(
        self,
        *,
        rounds: int = 100,
        metric: str = "ndcg@10",
        early_stopping: int | None = None,
        max_consecutive: int | None = 5,
        relevance_threshold: float = 1,
        chunk_elements: int = 1 << 21,
        name: str | None = None,
        seed: int = 0,
    ) -> None:
        from ltr_bench.metrics import parse_metric

        super().__init__(seed=seed, name=name)
        if int(rounds) < 1:
            raise UserError(f"model.rounds must be >= 1, got {rounds}")
        if early_stopping is not None and int(early_stopping) < 0:
            raise UserError(
                f"model.early_stopping must be >= 1, or 0 / null for none, got {early_stopping}"
            )
        if max_consecutive is not None and int(max_consecutive) < 1:
            raise UserError(f"model.max_consecutive must be >= 1 or null, got {max_consecutive}")
        self.rounds = int(rounds)
        self.metric = parse_metric(metric).name
        self.early_stopping = (
            int(early_stopping) if early_stopping else None
        )  # 0 = off, as in the papers' code
        self.max_consecutive = None if max_consecutive is None else int(max_consecutive)
        self.relevance_threshold = float(relevance_threshold)
        self.chunk_elements = int(chunk_elements)
        self.weights_: np.ndarray | None = None  # [F] summed alpha per feature
        self.features_: list[int] = []  # chosen feature per round (of the kept model)
        self.alphas_: list[float] = []
        self.best_round_: int | None = None

    # ------------------------------------------------------------------ public API
    def fit(self, train: QuerySet, vali: QuerySet | None = None, *, logger: Any = None) -> AdaRank:
        """Boost ``rounds`` single-feature weak rankers; ``logger`` is ignored."""
        keep = self._has_relevant(train)
        if not keep.any():
            raise UserError("AdaRank needs training queries with at least one relevant document")
        train = train.select_queries(keep)
        layout = _PaddedLayout(train, self.chunk_elements)
        perf = self.weak_ranker_performance(train, layout)  # [F, Q]
        use_vali = vali is not None and bool(self._has_relevant(vali).any())
        vali_layout = (
            _PaddedLayout(vali, self.chunk_elements) if use_vali and vali is not None else None
        )

        n_features, n_queries = perf.shape
        weights = np.zeros(n_features)
        p = np.full(n_queries, 1.0 / n_queries)
        chosen: list[int] = []
        alphas: list[float] = []
        best_value, best_len, since_best = -np.inf, 0, 0
        self.history = []
        for t in range(1, self.rounds + 1):
            k = self._select(perf @ p, chosen)
            if k is None:
                break
            alpha = _alpha(p, perf[k])
            weights[k] += alpha
            chosen.append(k)
            alphas.append(alpha)
            e_f = self._per_query(train, layout, weights)
            p = np.exp(-e_f)
            p /= p.sum()
            record = {"round": t, "feature": k, "alpha": alpha}
            record[f"train_{self.metric}"] = float(e_f.mean())
            if use_vali and vali is not None and vali_layout is not None:
                value = float(np.nanmean(self._per_query(vali, vali_layout, weights)))
                record[f"vali_{self.metric}"] = value
                if value > best_value:
                    best_value, best_len, since_best = value, t, 0
                else:
                    since_best += 1
            self.history.append(record)
            if np.all(e_f >= 1.0):
                break  # f_t is perfect on every training query
            if self.early_stopping is not None and use_vali and since_best >= self.early_stopping:
                break
        if self.early_stopping is not None and use_vali and best_len > 0:
            chosen, alphas = chosen[:best_len], alphas[:best_len]
            self.best_round_ = best_len
        else:
            self.best_round_ = len(chosen)
        self.features_, self.alphas_ = chosen, alphas
        self.weights_ = np.zeros(n_features)
        np.add.at(self.weights_, np.asarray(chosen, dtype=np.int64), np.asarray(alphas))
        return self

    def score(self, data: QuerySet) -> np.ndarray:
        """``f(x) = sum_t alpha_t x_{k_t}``."""
        if self.weights_ is None:
            raise RuntimeError("AdaRank.score called before fit")
        return _combined_scores(data.features, self.weights_)

    # ------------------------------------------------------------------ saved model
    def save_params(self, folder: Path) -> dict[str, Any]:
        """The combined weight vector and the rounds' chosen features and alphas (``weights.npz``)."""
        if self.weights_ is None:
            raise RuntimeError("AdaRank.save_params called before fit")
        np.savez(
            Path(folder) / WEIGHTS_FILE,
            weights=np.asarray(self.weights_, dtype=np.float64),
            features=np.asarray(self.features_, dtype=np.int64),
            alphas=np.asarray(self.alphas_, dtype=np.float64),
        )
        return {"weights": WEIGHTS_FILE, "rounds": len(self.features_)}

    def load_params(self, folder: Path, n_features: int) -> None:
        with np.load(Path(folder) / WEIGHTS_FILE, allow_pickle=False) as npz:
            weights = npz["weights"]
            self.features_ = [int(k) for k in npz["features"]]
            self.alphas_ = [float(a) for a in npz["alphas"]]
        if weights.shape != (int(n_features),):
            raise UserError(
                f"{Path(folder) / WEIGHTS_FILE} holds {weights.shape[0]} weights, "
                f"the saved model says {n_features} features"
            )
        self.weights_ = weights
        self.best_round_ = len(self.features_)

    def weak_ranker_performance(
        self, data: QuerySet, layout: _PaddedLayout | None = None
    ) -> np.ndarray:
        """``[F, Q]`` matrix of ``E(h_k, q)``: the metric of ranking query q by feature k alone.

        Computed once (Appendix A) on padded ``[queries x features, docs]`` blocks.
        """
        from ltr_bench.metrics import metric_padded

        layout = layout or _PaddedLayout(data, self.chunk_elements)
        n_f = data.n_features
        out = np.zeros((n_f, data.n_queries))
        for queries, rows, mask in layout.chunks:
            qc, width = rows.shape
            labels = np.broadcast_to(data.labels[rows][:, None, :], (qc, n_f, width))
            masks = np.broadcast_to(mask[:, None, :], (qc, n_f, width))
            step = max(1, self.chunk_elements // max(qc * width, 1))
            for f0 in range(0, n_f, step):  # feature blocks bound the memory of one call
                f1 = min(n_f, f0 + step)
                x = data.features[rows, f0:f1]  # [Qc, L, f1 - f0]
                scores = np.ascontiguousarray(x.transpose(0, 2, 1), dtype=np.float64)
                values = metric_padded(
                    self.metric,
                    scores.reshape(qc * (f1 - f0), width),
                    np.ascontiguousarray(labels[:, f0:f1]).reshape(-1, width),
                    np.ascontiguousarray(masks[:, f0:f1]).reshape(-1, width),
                    relevance_threshold=self.relevance_threshold,
                    no_relevant="zero",
                )
                out[f0:f1, queries] = values.reshape(qc, f1 - f0).T
        return out

    # ------------------------------------------------------------------ internals
    def _select(self, weighted_perf: np.ndarray, chosen: list[int]) -> int | None:
        """The best feature, skipping one chosen ``max_consecutive`` times in a row."""
        candidates = weighted_perf.copy()
        m = self.max_consecutive
        if m is not None and len(chosen) >= m and len(set(chosen[-m:])) == 1:
            candidates[chosen[-1]] = -np.inf
        if not np.isfinite(candidates).any():
            return None
        return int(np.argmax(candidates))

    def _per_query(self, data: QuerySet, layout: _PaddedLayout, weights: np.ndarray) -> np.ndarray:
        """``[Q]`` metric of ranking by ``features @ weights`` (NaN: no relevant document)."""
        from ltr_bench.metrics import metric_padded

        scores = _combined_scores(data.features, weights)
        out = np.full(data.n_queries, np.nan)
        for queries, rows, mask in layout.chunks:
            out[queries] = metric_padded(
                self.metric,
                scores[rows],
                data.labels[rows].astype(np.float64),
                mask,
                relevance_threshold=self.relevance_threshold,
            )
        return out

    def _has_relevant(self, data: QuerySet) -> np.ndarray:
        """``[Q]`` True for queries with a document with ``label >= relevance_threshold``."""
        rel = (data.labels >= self.relevance_threshold).astype(np.int64)
        return np.add.reduceat(rel, data.offsets[:-1]) > 0 if data.n_docs else np.zeros(0, bool)


def _combined_scores(features: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``features @ weights`` in float64, touching only the features with a weight."""
    used = np.flatnonzero(weights)
    if len(used) == 0:
        return np.zeros(features.shape[0])
    return features[:, used].astype(np.float64) @ weights[used]


def _alpha(p: np.ndarray, e: np.ndarray) -> float:
    """``0.5 ln(sum P (1 + E) / sum P (1 - E))`` with the denominator floored (perfect rankers)."""
    num = float(p @ (1.0 + e))
    den = float(p @ (1.0 - e))
    return 0.5 * float(np.log(num / max(den, _DENOMINATOR_FLOOR)))


class _PaddedLayout:
    """Chunks of queries of similar length, padded: ``(query indices, rows [Qc, L], mask)``.

    Built once per data set and reused every round, so a round's evaluation is a few
    vectorised metric calls rather than a loop over queries. Queries are taken shortest first,
    so that ``count * longest <= budget`` per chunk (:func:`~ltr_bench.data.padding.sorted_chunks`).
    """

    def __init__(self, data: QuerySet, budget: int) -> None:
        self.chunks = [
            (idx, *pad_index(data.offsets, idx))
            for idx in sorted_chunks(data.query_lengths, budget)
        ]


WEIGHTS_FILE = "weights.npz"
