"""SortNet's comparator CmpNN (Rigutini et al., Sect. 2) with dual-neuron weight sharing.

The comparator reads a pair ``<x, y>`` and outputs ``N>(x, y) ~ P(x > y)`` and
``N<(x, y) ~ P(x < y)``. Its hidden neurons come in dual pairs ``(i, i')`` whose input weights are
swapped between the x and y halves, whose output weights are swapped between ``o>`` and ``o<``,
and which share their bias (the two output biases are shared too). Each dual pair is stored once,
so ``N>(x, y) == N<(y, x)`` holds by construction, for any weights.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ltr_bench.errors import UserError

_ACTIVATIONS = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}


class CmpNN(nn.Module):
    """The SortNet comparator with dual-neuron weight sharing.

    Args:
        n_features: d, the length of one document's feature vector (the input has 2d nodes).
        n_hidden: number of hidden neurons; they form ``n_hidden // 2`` dual pairs (must be even).
        activation: hidden activation, ``sigmoid`` (paper), ``tanh`` or ``relu``.
    """

    def __init__(self, n_features: int, n_hidden: int = 20, activation: str = "sigmoid") -> None:
        super().__init__()
        if n_hidden < 2 or n_hidden % 2:
            raise UserError(f"model.n_hidden must be an even number >= 2, got {n_hidden}")
        if activation not in _ACTIVATIONS:
            raise UserError(
                f"model.hidden_activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}"
            )
        pairs = n_hidden // 2
        bound_in = 1.0 / np.sqrt(2 * n_features)
        bound_out = 1.0 / np.sqrt(n_hidden)
        self.activation = activation
        self._act = _ACTIVATIONS[activation]
        # Neuron i of each dual pair: v_x (weights from x), v_y (from y), shared bias b.
        self.v_x = nn.Parameter(torch.empty(pairs, n_features).uniform_(-bound_in, bound_in))
        self.v_y = nn.Parameter(torch.empty(pairs, n_features).uniform_(-bound_in, bound_in))
        self.b = nn.Parameter(torch.empty(pairs).uniform_(-bound_in, bound_in))
        # Output weights of neuron i to o> and o<; its dual i' uses them swapped. Shared bias.
        self.w_gt = nn.Parameter(torch.empty(pairs).uniform_(-bound_out, bound_out))
        self.w_lt = nn.Parameter(torch.empty(pairs).uniform_(-bound_out, bound_out))
        self.b_out = nn.Parameter(torch.zeros(()))

    def halves(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-document pre-activations: ``(v_x . x + b, v_y . x)``, each ``[..., pairs]``.

        The hidden input of neuron i on ``<x, y>`` is ``a(x) + c(y)``, of its dual ``a(y) + c(x)``;
        computing the halves once per document makes all-pairs comparison cheap.
        """
        return x @ self.v_x.T + self.b, x @ self.v_y.T

    def outputs_from_halves(
        self, a_x: torch.Tensor, c_x: torch.Tensor, a_y: torch.Tensor, c_y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N>(x, y), N<(x, y))`` from the halves of x and y (broadcasting)."""
        h = self._act(a_x + c_y)  # neurons i:  sigma(v_x . x + v_y . y + b)
        h_dual = self._act(a_y + c_x)  # duals i': sigma(v_y . x + v_x . y + b)
        z_gt = h @ self.w_gt + h_dual @ self.w_lt + self.b_out
        z_lt = h @ self.w_lt + h_dual @ self.w_gt + self.b_out
        return torch.sigmoid(z_gt), torch.sigmoid(z_lt)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(N>(<x, y>), N<(<x, y>))`` for batches ``x, y: [B, d]``."""
        a_x, c_x = self.halves(x)
        a_y, c_y = self.halves(y)
        return self.outputs_from_halves(a_x, c_x, a_y, c_y)
