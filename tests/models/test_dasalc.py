"""ltr_bench.models.dasalc: the log1p transform, padding kept out of scores and batch statistics,
permutation equivariance, noise only in training, the ensemble's mean, seeded members, a short fit
that learns, the saved model scoring as ``score`` does, and the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models import DASALC
from ltr_bench.models.dasalc import LOG1P_CLIP, DASALCNet, Ensemble, GaussianNoise, log1p_signed
from tests.models.neural_toy import ndcg10, random_ndcg10, toy_splits
from tests.models.test_attention_ranker import (
    CONF,
    check_padding_masked,
    check_permutation_equivariant,
    check_saved_model_scores_as_score,
    check_scores_ignore_other_queries,
    composed,
    padded_pair,
)

SMALL: dict[str, Any] = dict(
    hidden_sizes=[32, 32],
    activation="relu",
    dropout=0.1,
    input_noise_std=0.2,
    attention_width=16,
    n_attention_layers=1,
    n_heads=2,
    n_ensemble=2,
    epochs=8,
    early_stopping_patience=4,
    batch_size=8,
    optimizer={"name": "adam", "lr": 0.004},
    trainer={"enable_progress_bar": False},
)


@pytest.fixture(scope="module")
def splits() -> tuple[QuerySet, QuerySet, QuerySet]:
    return toy_splits(60)


@pytest.fixture(scope="module")
def fitted(splits: tuple[QuerySet, QuerySet, QuerySet]) -> DASALC:
    train, vali, _ = splits
    ranker = DASALC(seed=0, **SMALL)
    ranker.fit(train, vali)
    return ranker


def member(noise: float = 0.0, dropout: float = 0.0) -> DASALCNet:
    torch.manual_seed(0)
    return DASALCNet(
        8,
        hidden_sizes=[16, 16],
        dropout=dropout,
        input_noise_std=noise,
        attention_width=8,
        n_attention_layers=2,
        n_heads=2,
    )


def test_log1p_is_signed_and_clipped() -> None:
    x = torch.tensor([-3.0, -0.5, 0.0, 0.5, 3.0, 1e20, -1e20])
    expected = torch.tensor(
        [-np.log(4.0), -np.log(1.5), 0.0, np.log(1.5), np.log(4.0), LOG1P_CLIP, -LOG1P_CLIP]
    )
    torch.testing.assert_close(log1p_signed(x), expected.float())


def test_padding_is_masked_in_eval_and_permutation_equivariant() -> None:
    scorer = DASALC(**SMALL).build_scorer(8).eval()
    check_padding_masked(scorer)
    check_permutation_equivariant(scorer)


def test_padding_enters_no_batch_statistics_in_training() -> None:
    """Training mode (batch statistics, no noise, no dropout): the padding's values change
    nothing, and a query's scores are those of the same real documents without padding."""
    net = member().train()
    x, mask = padded_pair()
    junk = x.clone()
    junk[~mask] = -junk[~mask]
    with torch.no_grad():
        scores, other = net(x, mask), net(junk, mask)
        assert torch.all(scores[~mask] == 0)
        torch.testing.assert_close(other[mask], scores[mask], rtol=0, atol=1e-5)
        # the same 8 real documents as one query of 5 and one of 3, without padding cells
        flat = torch.cat([x[0], x[1, :3]])[None]
        one = net(flat, torch.ones(1, 8, dtype=torch.bool))[0]
    assert not torch.allclose(one, scores[mask], atol=1e-4)  # attention sees other documents
    net.context = _NoContext()  # type: ignore[assignment]
    with torch.no_grad():
        torch.testing.assert_close(
            net(flat, torch.ones(1, 8, dtype=torch.bool))[0], net(x, mask)[mask], atol=1e-5, rtol=0
        )


class _NoContext(torch.nn.Module):
    """A stand-in for the attention that ignores the other documents (for the check above)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.ones(x.shape[:-1] + (8,))


def test_noise_is_applied_in_training_only() -> None:
    noise = GaussianNoise(0.5)
    x = torch.zeros(1000)
    assert torch.equal(noise.eval()(x), x)
    assert 0.4 < float(noise.train()(x).std()) < 0.6
    net = member(noise=1.0)
    x, mask = padded_pair()
    with torch.no_grad():
        net.eval()
        assert torch.equal(net(x, mask), net(x, mask))
        net.train()
        assert not torch.allclose(net(x, mask)[mask], net(x, mask)[mask])
        quiet = member(noise=0.0).train()
        torch.testing.assert_close(quiet(x, mask), quiet(x, mask))


def test_the_ensemble_averages_its_members() -> None:
    scorer = DASALC(**{**SMALL, "n_ensemble": 3}).build_scorer(8).eval()
    assert isinstance(scorer, Ensemble) and len(scorer.members) == 3
    x, mask = padded_pair()
    with torch.no_grad():
        each = torch.stack([m(x, mask) for m in scorer.members])
        torch.testing.assert_close(scorer(x, mask), each.mean(dim=0))
        torch.testing.assert_close(scorer.member_scores(x, mask), each)
    assert not torch.allclose(each[0], each[1])  # members start from their own seeds


def test_member_i_is_seeded_by_the_seed_and_its_index() -> None:
    one = DASALC(**{**SMALL, "n_ensemble": 1}, seed=5).build_scorer(8)
    three = DASALC(**{**SMALL, "n_ensemble": 3}, seed=5).build_scorer(8)
    for k, v in one.members[0].state_dict().items():
        torch.testing.assert_close(three.members[0].state_dict()[k], v)
    other = DASALC(**{**SMALL, "n_ensemble": 1}, seed=6).build_scorer(8)
    w = "members.0.output.weight"
    assert not torch.equal(other.state_dict()[w], one.state_dict()[w])


def test_bad_values_are_user_errors() -> None:
    with pytest.raises(UserError, match="model.n_heads=3 must divide"):
        DASALC(**{**SMALL, "n_heads": 3})
    with pytest.raises(UserError, match="model.n_ensemble=0"):
        DASALC(**{**SMALL, "n_ensemble": 0})
    with pytest.raises(UserError, match="model.input_noise_std"):
        DASALC(**{**SMALL, "input_noise_std": -1.0})


# ---------------------------------------------------------------------------------- training
def test_short_fit_beats_random(fitted: DASALC, splits: Any) -> None:
    test = splits[2]
    assert ndcg10(fitted.score(test), test) > random_ndcg10(test) + 0.25


def test_the_seed_fixes_the_scores(fitted: DASALC, splits: Any) -> None:
    train, vali, test = splits
    again = DASALC(seed=0, **SMALL).fit(train, vali)
    np.testing.assert_array_equal(again.score(test), fitted.score(test))


def test_scores_ignore_other_queries(fitted: DASALC, splits: Any) -> None:
    check_scores_ignore_other_queries(fitted, splits[2])


def test_another_list_loss_trains_it(splits: Any) -> None:
    train, vali, test = splits
    ranker = DASALC(seed=0, **{**SMALL, "loss": "lambda", "epochs": 4}).fit(train, vali)
    assert ndcg10(ranker.score(test), test) > random_ndcg10(test) + 0.2


def test_saved_model_scores_as_score(splits: Any, tmp_path: Path) -> None:
    small = ["model.hidden_sizes=[16,16]", "model.attention_width=8", "model.n_ensemble=2"]
    small += ["model.epochs=2", "trainer.enable_progress_bar=false"]
    check_saved_model_scores_as_score("dasalc", small, tmp_path, splits[0], splits[2])


# ---------------------------------------------------------------------------------- config
def test_config_composes_and_builds_the_ranker() -> None:
    from hydra.utils import instantiate

    cfg = composed("model=dasalc", "seed=2")
    assert cfg.loss.name == "listnet" and cfg.activation.name == "relu"
    ranker = instantiate(cfg.model)
    assert type(ranker) is DASALC and ranker.name == "dasalc" and ranker.seed == 2
    assert ranker.n_ensemble == 3 and ranker.input_noise_std == 1.5
    assert instantiate(composed("model=dasalc", "model.n_ensemble=5").model).n_ensemble == 5


def test_search_space_names_the_model_and_its_sources() -> None:
    from omegaconf import OmegaConf

    space = OmegaConf.load(CONF / "search" / "dasalc.yaml")
    assert space.search_space.model == "dasalc" and "TF-Ranking" in space.search_space.source
    assert "model.input_noise_std" in space.hydra.sweeper.params


def test_the_search_tunes_one_member_and_the_refit_trains_the_ensemble(tmp_path: Path) -> None:
    """search=dasalc fixes ``model.n_ensemble=1`` for its trials only: a refit planned from the
    sweep's files leaves it out, so the refit trains the model config's members."""
    import yaml

    from ltr_bench.refit_plan import plan_refits

    search = yaml.safe_load((CONF / "search" / "dasalc.yaml").read_text())
    params = search["hydra"]["sweeper"]["params"]
    assert params["model.n_ensemble"] == 1
    assert composed("model=dasalc").model.n_ensemble > 1
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    task = ["model=dasalc", "search=dasalc", "dataset=mq2008"]
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": task}}}))
    best = {"model.dropout": 0.4, "optimizer.lr": 0.001}
    results = {"study_name": "s", "study_overrides": [], "best_params": best}
    (sweep / "optimization_results.yaml").write_text(yaml.safe_dump(results))
    (refit,) = plan_refits([f"refit_best={sweep}"]) or []
    assert "model=dasalc" in refit.overrides and "model.dropout=0.4" in refit.overrides
    assert not any(o.startswith("model.n_ensemble") for o in refit.overrides)
