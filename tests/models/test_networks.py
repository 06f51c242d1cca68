"""Activation registry, feature MLP and the fast dropout of the neural rankers."""

from __future__ import annotations

import pytest
import torch

from ltr_bench.errors import UserError
from ltr_bench.models.networks import (
    ACTIVATIONS,
    FastDropout,
    FeatureMLP,
    Scorer,
    check_antisymmetric,
    make_activation,
)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_antisymmetry_flags_are_true(name: str) -> None:
    x = torch.linspace(-4, 4, 81, dtype=torch.float64)
    f = make_activation(name)
    odd = torch.allclose(f(-x), -f(x), atol=1e-12)
    sign = torch.equal(torch.sign(f(x)), torch.sign(x))
    assert ACTIVATIONS[name].antisymmetric == (odd and sign)
    if ACTIVATIONS[name].antisymmetric:
        check_antisymmetric(name)
    else:
        with pytest.raises(UserError, match="antisymmetric"):
            check_antisymmetric(name)


def test_make_activation_from_config_node() -> None:
    assert isinstance(make_activation({"name": "mish", "_target_": "torch.nn.Mish"}), torch.nn.Mish)
    assert isinstance(make_activation({"name": "tanh"}), torch.nn.Tanh)


def test_an_activation_fits_hidden_layers_only() -> None:
    with pytest.raises(UserError, match=r"^activation=tanh acts on no layer with model.hidden"):
        FeatureMLP(5, [], "tanh")  # RankSVM with activation=tanh: the group would be unused
    with pytest.raises(UserError, match=r"^activation 'none' only fits models without hidden"):
        FeatureMLP(5, [3], {"name": "none"})


def test_feature_mlp_shapes_and_linear_scorer() -> None:
    mlp = FeatureMLP(5, [4, 3], "relu", dropout=0.5, bias=False)
    assert mlp.out_features == 3 and all(
        getattr(m, "bias", None) is None for m in mlp.modules() if isinstance(m, torch.nn.Linear)
    )
    linear = Scorer(FeatureMLP(5, [], "none"), output_bias=False)  # RankSVM: g(x) = w . x
    x = torch.randn(7, 5)
    torch.testing.assert_close(linear(x), x @ linear.output.weight[0])


def test_fast_dropout_rate_scale_and_gradient() -> None:
    drop = FastDropout(0.2)
    assert drop.rate == 51 / 256
    x = torch.ones(200_000, requires_grad=True)
    torch.manual_seed(0)
    y = drop(x)
    kept = y != 0
    assert abs(1 - kept.float().mean().item() - 51 / 256) < 0.005
    assert torch.allclose(y[kept], torch.tensor(256 / 205))  # inverted dropout keeps the mean
    assert abs(y.mean().item() - 1.0) < 0.01
    y.sum().backward()
    torch.testing.assert_close(x.grad, y.detach())  # gradient = mask * scale
    torch.manual_seed(0)
    torch.testing.assert_close(drop(x), y)  # seeded by torch's global generator
    drop.eval()
    assert drop(x) is x
    assert FastDropout(0.0)(x) is x
