"""Training losses of the neural rankers: pure tensor functions, one per paper equation, and
their one registry (:mod:`~ltr_bench.losses.registry`).

- :mod:`~ltr_bench.losses.pairwise`: pair losses ``loss(r, label_hi, weight)`` on the ranker's
  outputs for sampled pairs, more relevant document first;
- :mod:`~ltr_bench.losses.listwise`: list losses ``loss(scores, labels, mask)`` on padded
  ``[Q, L]`` query batches (ListNet, LambdaRank, ListMLE, ApproxNDCG, NeuralNDCG, LambdaLoss).

**Adding a loss** is one function (here or in any importable module) plus one config file:
decorate it with :func:`pair_loss` or :func:`list_loss` -- that marks its kind (which models can
train with it) and, for list losses, its cost (how its work grows with the query length, which
sizes the query batches) -- and write ``conf/loss/<name>.yaml`` with ``name`` and ``_target_``
(the function's import path) plus its parameters. A model checks the kind, never a list of names.
"""

from __future__ import annotations

from ltr_bench.losses.listwise import *  # noqa: F403
from ltr_bench.losses.listwise import __all__ as _listwise
from ltr_bench.losses.pairwise import *  # noqa: F403
from ltr_bench.losses.pairwise import __all__ as _pairwise
from ltr_bench.losses.registry import *  # noqa: F403
from ltr_bench.losses.registry import __all__ as _registry

__all__ = [*_registry, *_pairwise, *_listwise]
