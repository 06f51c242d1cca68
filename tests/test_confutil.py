"""The one parser of group options: names, nodes, ``_target_`` and parameters, each mistake one
sentence naming its key; optimizers, activations and losses all go through it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from ltr_bench.config.util import META_KEYS, Option, option_params, parse_option
from ltr_bench.errors import UserError
from ltr_bench.losses import l2_pair_loss, resolve_loss
from ltr_bench.models.networks import make_activation, parse_optimizer

REGISTRY = {"adam": torch.optim.Adam}


def test_a_name_a_node_and_an_omegaconf_node_parse_alike() -> None:
    by_name = parse_option("Adam", "optimizer", REGISTRY, "optimizer")
    assert by_name == Option("optimizer", "Adam", torch.optim.Adam, {})
    node = {"name": "adam", "_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.1}
    for value in (node, OmegaConf.create(node)):
        option = parse_option(value, "optimizer", REGISTRY, "optimizer")
        assert (option.name, option.target, option.params) == (
            "adam",
            torch.optim.Adam,
            {"lr": 0.1},
        )
    assert option_params(node) == {"lr": 0.1} and "name" in META_KEYS


@pytest.mark.parametrize(
    "value, sentence",
    [
        ("rmsprop", r"^optimizer=rmsprop is not a known optimizer; use one of \['adam'\]$"),
        (3, r"^optimizer must be a optimizer name or a config node with '_target_', got 3$"),
        (
            {"name": "x", "_target_": "torch.optim.NoSuch"},
            r"^optimizer._target_=torch.optim.NoSuch cannot be imported \(Error loading",
        ),
        (
            {"name": "adam", "_target_": "torch.optim.Adam", "lr": "abc"},
            r"^optimizer.lr='abc' is not a number; give a number such as optimizer.lr=0.001$",
        ),
        (
            {"name": "adam", "_target_": "torch.optim.Adam", "lerning_rate": 0.1},
            r"^optimizer.lerning_rate is not a parameter of the 'adam' optimizer$",
        ),
    ],
)
def test_each_mistake_is_one_sentence_naming_its_key(value: object, sentence: str) -> None:
    with pytest.raises(UserError, match=sentence):
        parse_option(value, "optimizer", REGISTRY, "optimizer")


def test_optimizer_values_are_checked_by_torch_where_the_option_is_parsed() -> None:
    node = {"name": "adam", "_target_": "torch.optim.Adam", "lr": -1, "weight_decay": 0.0}
    with pytest.raises(UserError, match=r"^optimizer.lr=-1 is refused by adam \(Invalid learning"):
        parse_optimizer(node)
    option = parse_optimizer({**node, "lr": 0.01})
    param = torch.nn.Parameter(torch.ones(2))
    opt = option.build([param])
    assert type(opt) is torch.optim.Adam and opt.defaults["lr"] == 0.01
    # without an option, a ranker takes the conf/ tree's, never a copy in code
    conf = Path(__file__).resolve().parents[1] / "conf"
    adam = OmegaConf.load(conf / "optimizer" / "adam.yaml")
    assert parse_optimizer(None).params == {"lr": adam.lr, "weight_decay": adam.weight_decay}
    sortnet = OmegaConf.load(conf / "model" / "sortnet.yaml")
    assert parse_optimizer(None, defaults=("model=sortnet",)).params["lr"] == sortnet.optimizer.lr


def test_activations_and_losses_use_the_same_parser() -> None:
    assert isinstance(
        make_activation({"name": "elu", "_target_": "torch.nn.ELU", "alpha": 0.5}), torch.nn.ELU
    )
    with pytest.raises(UserError, match=r"^model.activation.alfa is not a parameter of the 'elu'"):
        make_activation({"name": "elu", "_target_": "torch.nn.ELU", "alfa": 0.5})
    fn, info = resolve_loss(
        {"name": "l2", "_target_": "ltr_bench.losses.pairwise.l2_pair_loss"}, "pair"
    )
    assert fn is l2_pair_loss and info.kind == "pair"
    with pytest.raises(UserError, match=r"^loss.margin='wide' is not a number; give a number"):
        resolve_loss({"name": "hinge", "margin": "wide"}, "pair")
