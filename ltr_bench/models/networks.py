"""Building blocks of the neural rankers: activation and optimizer registries, feature MLP, scorer.

Every neural ranker here computes a per-document score ``g(x) = w . nn(x) (+ b)``: a feature part
``nn`` (an MLP) followed by one output neuron. DirectRanker (ECML Sect. 3, Theorem 1) compares two
documents as ``r(x, y) = tau(g(x) - g(y))`` with the output neuron's bias removed; the listwise
rankers use ``g`` directly. The activation registry records which activations are antisymmetric
and sign-conserving, the condition Theorem 1 places on ``tau``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from ltr_bench.config.util import Option, parse_option
from ltr_bench.errors import UserError


class BipolarSigmoid(nn.Module):
    """``2 * sigmoid(x) - 1`` (= ``tanh(x / 2)``): the sigmoid mapped onto an antisymmetric range.

    The journal (Sect. 3) notes a sigmoid output can be used through ``h(x) = 2x - 1``; with this
    ``tau`` a DirectRanker with cross-entropy cost is exactly RankNet (ECML Sect. 3).
    """

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(0.5 * x)


class FastDropout(nn.Module):
    """Inverted dropout with masks from random bytes: cheaper than ``nn.Dropout`` on CPU.

    ``nn.Dropout`` draws one random number per element; here one 64-bit draw yields 8 mask bytes,
    and an element is kept when its byte is ``>= round(256 p)``. The drop rate is therefore ``p``
    rounded to a multiple of 1/256 (0.2 -> 51/256 = 0.199); kept elements are scaled by
    ``1 / (1 - rate)`` so expectations are preserved. Identity in eval mode.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.threshold = int(round(256 * float(p)))
        self.scale = 256.0 / (256 - self.threshold) if self.threshold < 256 else 0.0

    @property
    def rate(self) -> float:
        return self.threshold / 256

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.threshold == 0:
            return x
        n = x.numel()
        draws = torch.randint(
            -(2**63), 2**63 - 1, ((n + 7) // 8,), dtype=torch.int64, device=x.device
        )
        keep = draws.view(torch.uint8)[:n].view(x.shape) >= self.threshold
        return x * (keep.to(x.dtype) * self.scale)

    def extra_repr(self) -> str:
        return f"p={self.rate:.4f}"


@dataclass(frozen=True)
class Activation:
    """A registered activation: how to build it and whether ``tau(-x) = -tau(x)`` and
    ``sign(tau(x)) = sign(x)`` hold (required of DirectRanker's output activation)."""

    factory: Callable[[], nn.Module]
    antisymmetric: bool


ACTIVATIONS: dict[str, Activation] = {
    "tanh": Activation(nn.Tanh, True),
    "linear": Activation(nn.Identity, True),
    "identity": Activation(nn.Identity, True),
    "sigmoid2": Activation(BipolarSigmoid, True),
    "bipolar_sigmoid": Activation(BipolarSigmoid, True),
    "softsign": Activation(nn.Softsign, True),
    "hardtanh": Activation(nn.Hardtanh, True),
    "sigmoid": Activation(nn.Sigmoid, False),
    "relu": Activation(nn.ReLU, False),
    "leaky_relu": Activation(nn.LeakyReLU, False),
    "elu": Activation(nn.ELU, False),
    "selu": Activation(nn.SELU, False),
    "gelu": Activation(nn.GELU, False),
    "softplus": Activation(nn.Softplus, False),
}
NO_ACTIVATION = "none"  # the activation group's option for models without hidden layers


def activation_name(spec: str | Mapping[str, Any] | Option) -> str:
    """The registry name of an activation given as a name, a config node with ``name`` or a
    parsed :class:`~ltr_bench.config.util.Option`."""
    if isinstance(spec, Option):
        return spec.name.lower()
    name = spec.get("name") if isinstance(spec, Mapping) else spec
    return str(name).strip().lower()


def parse_activation(spec: Any, key: str = "model.activation") -> Option:
    """An activation option parsed once (:func:`~ltr_bench.config.util.parse_option`): a registry
    name (``"tanh"``) or a config node; a node with ``_target_`` (``{name: mish, _target_:
    torch.nn.Mish}``) builds activations outside the registry."""
    if isinstance(spec, Option):
        return spec
    factories = {name: a.factory for name, a in ACTIVATIONS.items()}
    return parse_option(spec, key, factories, "activation")


def make_activation(spec: Any, key: str = "model.activation") -> nn.Module:
    """A fresh activation module from a name, a config node or a parsed option."""
    return parse_activation(spec, key).build()


def check_antisymmetric(name: str, key: str = "model.output_activation") -> None:
    """Raise :class:`UserError` unless ``name`` is an antisymmetric, sign-conserving activation."""
    name = activation_name(name)
    if name not in ACTIVATIONS or not ACTIVATIONS[name].antisymmetric:
        allowed = sorted(n for n, a in ACTIVATIONS.items() if a.antisymmetric)
        raise UserError(
            f"{key}={name!r} is not antisymmetric and sign-conserving, so r(x, y) would not be a "
            f"ranking function (DirectRanker Theorem 1); use one of {allowed}"
        )


class FeatureMLP(nn.Module):
    """The feature part ``nn``: ``Linear -> activation -> dropout`` per hidden layer.

    With no hidden layers it is the identity (a linear scorer such as RankSVM). Weights use
    Glorot-uniform initialisation and biases start at zero (the TensorFlow defaults of the papers'
    implementation).
    """

    def __init__(
        self,
        n_features: int,
        hidden_sizes: Sequence[int] = (64, 32),
        activation: str | Mapping[str, Any] = "tanh",
        dropout: float = 0.0,
        bias: bool = True,
    ) -> None:
        super().__init__()
        hidden_sizes = [int(h) for h in hidden_sizes]
        if any(h < 1 for h in hidden_sizes):
            raise UserError(f"model.hidden_sizes={hidden_sizes} must be positive layer widths")
        if not 0.0 <= float(dropout) < 1.0:
            raise UserError(f"model.dropout={dropout} must be in [0, 1)")
        if hidden_sizes and activation_name(activation) == NO_ACTIVATION:
            raise UserError(
                "activation 'none' only fits models without hidden layers; pick a feature "
                f"activation (e.g. activation=tanh) for model.hidden_sizes={hidden_sizes}"
            )
        if not hidden_sizes and activation_name(activation) != NO_ACTIVATION:
            raise UserError(
                f"activation={activation_name(activation)} acts on no layer with "
                "model.hidden_sizes=[]; choose activation=none"
            )
        layers: list[nn.Module] = []
        width = int(n_features)
        for size in hidden_sizes:
            linear = nn.Linear(width, size, bias=bool(bias))
            nn.init.xavier_uniform_(linear.weight)
            if linear.bias is not None:
                nn.init.zeros_(linear.bias)
            layers += [linear, make_activation(activation)]
            if dropout > 0:
                layers.append(FastDropout(float(dropout)))
            width = size
        self.layers = nn.Sequential(*layers)
        self.out_features = width

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)


class Scorer(nn.Module):
    """``g(x) = w . nn(x) (+ b)``: feature part plus the output neuron's linear map, ``[B, F] -> [B]``.

    The output activation is applied by the ranker (to ``g(x) - g(y)`` for DirectRanker), because
    sorting by ``g`` equals sorting by ``r`` (Theorem 1).
    """

    def __init__(self, features: FeatureMLP, output_bias: bool = False) -> None:
        super().__init__()
        self.features = features
        self.output = nn.Linear(features.out_features, 1, bias=bool(output_bias))
        nn.init.xavier_uniform_(self.output.weight)
        if self.output.bias is not None:
            nn.init.zeros_(self.output.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.output(self.features(x)).squeeze(-1)


# ====================================================================== optimizers
OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "sgd": torch.optim.SGD,
}


def parse_optimizer(value: Any, key: str = "optimizer", defaults: tuple[str, ...] = ()) -> Option:
    """The optimizer group's option (a registry name -- adam, adamw, sgd -- or a node ``{name,
    _target_, lr, ...}``), parsed and checked once, where a ranker reads its config. Without one
    (a ranker built in Python), the node the ``conf/`` tree composes with the overrides
    ``defaults`` (e.g. ``("model=sortnet",)``): defaults live in ``conf/`` only.

    :func:`~ltr_bench.config.util.parse_option` checks the keys (``optimizer.lr='abc'``); torch
    checks its own values (``lr >= 0``, ``betas`` in [0, 1), ...) in the optimizer's constructor,
    so the option is built once over a one-element parameter and a refusal becomes one sentence
    naming the key (``optimizer.lr=-1 is refused by adam ...``) before any data is read or run
    tracked, not an error inside ``fit``. :meth:`Option.build` then never fails on a value.
    """
    if isinstance(value, Option):  # parsed and checked already
        return value
    if value is None:
        from ltr_bench.config.tree import default_node

        value = default_node("optimizer", defaults)
    option = parse_option(value, key, OPTIMIZERS, "optimizer")
    try:
        option.build([torch.nn.Parameter(torch.zeros(1))])
    except (TypeError, ValueError) as err:
        why = " ".join(str(err).split()) or type(err).__name__
        named = [k for k, v in option.params.items() if str(v) in why]
        if len(named) == 1:
            k = named[0]
            raise UserError(
                f"{key}.{k}={option.params[k]} is refused by {option.name} ({why})"
            ) from None
        raise UserError(
            f"{key}={option.name} rejects its parameters {option.params} ({why})"
        ) from None
    return option


def build_optimizer(value: Any, param_groups: Any) -> torch.optim.Optimizer:
    """A torch optimiser over ``param_groups`` (parameters or groups) from a parsed optimizer
    option (or a raw one, parsed here; see :func:`parse_optimizer`)."""
    option = value if isinstance(value, Option) else parse_optimizer(value)
    return option.build(param_groups)
