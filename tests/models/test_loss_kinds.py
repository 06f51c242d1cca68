"""One way to add a loss: a function marked with its kind and cost, used through config only.

The list loss below lives in this test module and nowhere else; ``loss._target_`` points a run's
config at it (no registry, no name list, no model config touched), and the model's kind check
accepts it for list models and rejects it, in one sentence, for pair models.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from hydra.utils import get_method
from omegaconf import OmegaConf
from torch import Tensor

from ltr_bench.errors import UserError
from ltr_bench.losses import builtin_losses, list_loss, loss_info, pair_loss
from ltr_bench.models import DirectRanker, ListNet

CONF = Path(__file__).resolve().parents[2] / "conf"
PAIR_LOSSES = ", ".join(builtin_losses("pair"))  # the sentences list the registry's names
CALLS: list[tuple[int, ...]] = []
HERE = __name__  # tests.models.test_loss_kinds


@list_loss(cost_power=1)
def top1_hinge_loss(scores: Tensor, labels: Tensor, mask: Tensor, *, margin: float = 1.0) -> Tensor:
    """Hinge between each query's best-labelled document and every other one (a toy list loss)."""
    CALLS.append(tuple(scores.shape))
    neg = torch.finfo(scores.dtype).min
    best = labels.masked_fill(~mask, -1).argmax(dim=1, keepdim=True)
    s_best = scores.gather(1, best)
    worse = mask & (labels < labels.gather(1, best))
    gap = torch.clamp_min(margin - (s_best - scores), 0.0).masked_fill(~worse, 0.0)
    return gap.sum() / worse.sum().clamp_min(1) + 0.0 * scores.masked_fill(~mask, neg).amax()


def not_marked(scores: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    return scores.sum()


def test_kinds_and_costs_are_carried_by_the_functions() -> None:
    assert loss_info(top1_hinge_loss).kind == "list" and loss_info(top1_hinge_loss).cost_power == 1
    pair, lists = builtin_losses("pair"), builtin_losses("list")
    assert sorted([*pair, *lists]) == sorted(builtin_losses()) and not set(pair) & set(lists)
    assert all(loss_info(f).cost_power == 0 for f in pair.values())
    assert all(loss_info(f).cost_power >= 1 for f in lists.values())
    assert (loss_info(lists["listnet"]).cost_power, loss_info(lists["lambda"]).cost_power) == (1, 2)
    assert loss_info(pair_loss(lambda r, label_hi=None, weight=None: r.mean())).kind == "pair"
    with pytest.raises(ValueError):
        list_loss(cost_power=0)


def test_the_registry_is_what_conf_loss_offers() -> None:
    """Every conf/loss option but none names a built-in loss by its short name and _target_."""
    options = {p.stem: OmegaConf.load(p) for p in (CONF / "loss").glob("*.yaml")}
    assert options.pop("none").keys() == {"name"}
    assert sorted(options) == sorted(builtin_losses())
    for name, node in options.items():
        assert node.name == name and get_method(node._target_) is builtin_losses()[name]


def test_a_new_list_loss_is_used_through_config_only(tmp_path, cli) -> None:
    CALLS.clear()
    result = cli(
        "model=listnet",
        f"loss._target_={HERE}.top1_hinge_loss",
        "+loss.margin=0.5",
        "dataset.n_train=300",
        "dataset.n_vali=100",
        "dataset.n_test=100",
        "dataset.n_features=8",
        "dataset.docs_per_query=20",
        "model.hidden_sizes=[8]",
        "model.epochs=2",
        "tracking=none",
        "threads=1",
        "trainer.enable_progress_bar=false",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert CALLS, "the config's _target_ was not the loss that trained"
    assert "test" in result.stdout and "ndcg@10" in result.stdout  # the run's results table
    # the loss's own cost power is what the model uses to size its query batches
    ranker = ListNet(loss={"name": "x", "_target_": f"{HERE}.top1_hinge_loss", "margin": 0.5})
    fn, info = ranker.resolve_loss()
    assert info.cost_power == 1 and fn.keywords == {"margin": 0.5}


def test_wrong_kind_or_unmarked_function_is_one_sentence() -> None:
    with pytest.raises(
        UserError,
        match=r"^loss=mine is a list loss, but this model trains with pair "
        rf"losses; choose a pair loss, one of \[{PAIR_LOSSES}\], or drop",
    ):
        DirectRanker(loss={"name": "mine", "_target_": f"{HERE}.top1_hinge_loss"})
    with pytest.raises(UserError, match="is not marked as a loss; decorate it with"):
        ListNet(loss={"name": "x", "_target_": f"{HERE}.not_marked"})
    with pytest.raises(UserError, match=r"loss.margin is not a parameter"):
        ListNet(
            loss={
                "name": "listnet",
                "_target_": "ltr_bench.losses.listwise.listnet_loss",
                "margin": 1,
            }
        )


def test_cli_rejects_a_wrong_combination_before_any_run(tmp_path, cli) -> None:
    for args, needle in (
        (
            ["model=lambdamart", "loss=listnet"],
            "model=lambdamart does not use loss=listnet; choose one of [none] or drop the override",
        ),
        (
            ["model=ranknet", "loss=listnet"],
            "loss=listnet is a list loss, but this model trains with pair losses; choose a pair loss, "
            f"one of [{PAIR_LOSSES}], or drop the override",
        ),
    ):
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 2
        assert result.stderr.strip().splitlines() == [f"ltr-bench: error: {needle}"]
    assert not (tmp_path / "mlflow.db").exists()  # failed before any run was created
