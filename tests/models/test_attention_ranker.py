"""ltr_bench.models.attention_ranker: a document's score depends on its own query's documents
only (padding masked, other queries ignored, permutation-equivariant), the seed fixes the run,
a short fit learns, any list loss trains it, the saved model scores as ``score`` does, and the
config composes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_dir

from ltr_bench.data.queryset import QuerySet
from ltr_bench.errors import UserError
from ltr_bench.models import AttentionRanker
from tests.models.neural_toy import ndcg10, random_ndcg10, toy_splits

CONF = Path(__file__).resolve().parents[2] / "conf"
SCORE_BATCH = 1 << 16  # the rankers' default score_batch_size
# A small, fast ranker for the toy data.
SMALL: dict[str, Any] = dict(
    hidden_sizes=[16],
    activation="linear",
    n_blocks=1,
    n_heads=2,
    dim_feedforward=32,
    epochs=8,
    early_stopping_patience=4,
    batch_size=8,
    optimizer={"name": "adam", "lr": 0.004},
    trainer={"enable_progress_bar": False},
)


def composed(*overrides: str) -> Any:
    with initialize_config_dir(config_dir=str(CONF), version_base=None):
        return compose(config_name="config", overrides=list(overrides))


@pytest.fixture(scope="module")
def splits() -> tuple[QuerySet, QuerySet, QuerySet]:
    return toy_splits(60)


@pytest.fixture(scope="module")
def fitted(splits: tuple[QuerySet, QuerySet, QuerySet]) -> AttentionRanker:
    train, vali, _ = splits
    ranker = AttentionRanker(seed=0, **SMALL)
    ranker.fit(train, vali)
    return ranker


def padded_pair(n_features: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two queries of 5 and 3 documents padded to ``[2, 5, F]``; the padding holds junk."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 5, n_features, generator=g)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    x[~mask] = 1e3 * torch.randn(int((~mask).sum()), n_features, generator=g)
    return x, mask


def check_padding_masked(scorer: Any) -> None:
    """The scores of each query alone equal its scores inside a padded batch with another."""
    x, mask = padded_pair(scorer.n_features)
    with torch.no_grad():
        both = scorer(x, mask)
        alone_a = scorer(x[:1], mask[:1])
        alone_b = scorer(x[1:, :3], mask[1:, :3])
        junk = x.clone()
        junk[~mask] = -junk[~mask]
        other = scorer(junk, mask)
    torch.testing.assert_close(both[0], alone_a[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(both[1, :3], alone_b[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(other[mask], both[mask], rtol=0, atol=1e-5)


def check_permutation_equivariant(scorer: Any) -> None:
    x, mask = padded_pair(scorer.n_features, seed=1)
    perm = torch.tensor([3, 0, 4, 1, 2])
    with torch.no_grad():
        base = scorer(x[:1], mask[:1])[0]
        permuted = scorer(x[:1, perm], mask[:1])[0]
    torch.testing.assert_close(permuted, base[perm], rtol=0, atol=1e-5)


def check_scores_ignore_other_queries(ranker: Any, data: QuerySet) -> None:
    """``score`` of a query alone equals its score among all queries, and equals the scorer's
    forward pass on the query."""
    full = ranker.score(data)
    for q in (0, 3, data.n_queries - 1):
        part = data.select_queries([q])
        lo, hi = data.offsets[q], data.offsets[q + 1]
        np.testing.assert_allclose(ranker.score(part), full[lo:hi], rtol=0, atol=1e-6)
    lo, hi = data.offsets[2], data.offsets[3]
    x = torch.as_tensor(data.features[lo:hi])[None]
    with torch.no_grad():
        direct = ranker.scorer_.eval()(x, torch.ones(x.shape[:2], dtype=torch.bool))[0]
    np.testing.assert_allclose(full[lo:hi], direct.double().numpy(), rtol=0, atol=1e-6)


def check_saved_model_scores_as_score(
    model: str, overrides: list[str], tmp: Path, train: QuerySet, test: QuerySet
) -> None:
    """A ranker fitted from the model config, saved as a run saves it and loaded back through
    MLflow's pyfunc loader, scores a raw frame (qid + features, rows shuffled) as
    ``ranker.score`` scored the preprocessed documents."""
    import pandas as pd

    from ltr_bench import runner
    from ltr_bench.saved_model import _load_pyfunc, feature_columns, save_pipeline

    cfg = composed(f"model={model}", "dataset.n_features=8", *overrides)
    pre = runner.build_preprocessing(cfg).fit(train)
    ranker = runner.build_ranker(cfg).fit(pre.apply(train, "train"), None)
    prepared = runner.Prepared(pre.apply(train, "train"), None, None, pre)
    pipeline = runner.scoring_pipeline(cfg, prepared, ranker, 1, {"model": model})
    expected = ranker.score(pipeline.transform(test))
    np.testing.assert_array_equal(pipeline.score(test), expected)
    loaded = _load_pyfunc(str(save_pipeline(pipeline, tmp / "model")))
    assert type(loaded.pipeline.ranker) is type(ranker)
    frame = pd.DataFrame(test.features, columns=feature_columns(test.n_features))
    frame.insert(0, "qid", test.qid.astype(np.int64))
    np.testing.assert_allclose(loaded.predict(frame), expected, rtol=0, atol=1e-6)
    perm = np.random.default_rng(0).permutation(test.n_docs)
    shuffled = frame.iloc[perm].reset_index(drop=True)
    np.testing.assert_allclose(loaded.predict(shuffled), expected[perm], rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------- the scorer
def test_padding_is_masked_and_scores_are_permutation_equivariant() -> None:
    torch.manual_seed(0)
    ranker = AttentionRanker(**SMALL)
    for norm_first in (True, False):
        ranker.norm_first = norm_first
        scorer = ranker.build_scorer(8).eval()
        check_padding_masked(scorer)
        check_permutation_equivariant(scorer)


def test_scores_depend_on_the_other_documents_of_the_query() -> None:
    """Context-aware: changing one document changes the others' scores (a per-document scorer's
    would not change)."""
    torch.manual_seed(0)
    scorer = AttentionRanker(**SMALL).build_scorer(8).eval()
    x, mask = padded_pair()
    changed = x.clone()
    changed[0, 4] += 3.0
    with torch.no_grad():
        before, after = scorer(x[:1], mask[:1])[0], scorer(changed[:1], mask[:1])[0]
    assert not torch.allclose(before[:4], after[:4], atol=1e-4)


def test_bad_heads_are_a_user_error() -> None:
    with pytest.raises(UserError, match="model.n_heads=3 must divide"):
        AttentionRanker(hidden_sizes=[16], n_heads=3)
    with pytest.raises(UserError, match="the feature count"):
        AttentionRanker(hidden_sizes=[], activation="none", n_heads=3).build_scorer(8)
    with pytest.raises(UserError, match="model.n_blocks"):
        AttentionRanker(n_blocks=0)


# ---------------------------------------------------------------------------------- training
def test_short_fit_beats_random(fitted: AttentionRanker, splits: Any) -> None:
    test = splits[2]
    assert ndcg10(fitted.score(test), test) > random_ndcg10(test) + 0.25
    assert fitted.history and "vali_ndcg@10" in fitted.history[0]


def test_the_seed_fixes_the_scores(fitted: AttentionRanker, splits: Any) -> None:
    train, vali, test = splits
    again = AttentionRanker(seed=0, **SMALL).fit(train, vali)
    np.testing.assert_array_equal(again.score(test), fitted.score(test))
    other = AttentionRanker(seed=1, **SMALL).fit(train, vali)
    assert not np.allclose(other.score(test), fitted.score(test))


def test_scores_ignore_other_queries(fitted: AttentionRanker, splits: Any) -> None:
    check_scores_ignore_other_queries(fitted, splits[2])
    base = fitted.score(splits[2])
    fitted.score_batch_size = 25  # one query per forward pass (queries hold 5-40 documents)
    try:
        np.testing.assert_allclose(fitted.score(splits[2]), base, rtol=0, atol=1e-6)
    finally:
        fitted.score_batch_size = SCORE_BATCH
    x = splits[2].features[:7]  # a bare array is one query
    one = QuerySet.from_arrays(x, np.zeros(7, np.int32), np.zeros(7, np.int64))
    np.testing.assert_array_equal(fitted.score(x), fitted.score(one))
    with pytest.raises(UserError, match="features but the model was trained on 8"):
        fitted.score(np.zeros((3, 5), dtype=np.float32))


def list_loss_options() -> list[str]:
    """The options of conf/loss/ whose function is a list loss (the kind decides, not a name)."""
    from hydra.utils import get_method
    from omegaconf import DictConfig, OmegaConf

    from ltr_bench.losses import loss_info

    names = []
    for path in sorted((CONF / "loss").glob("*.yaml")):
        node = OmegaConf.load(path)
        target = node.get("_target_") if isinstance(node, DictConfig) else None
        info = loss_info(get_method(target)) if target else None
        if info is not None and info.kind == "list":
            names.append(path.stem)
    return names


@pytest.mark.parametrize("loss", list_loss_options())
def test_any_list_loss_trains_it(loss: str, splits: Any) -> None:
    cfg = composed("model=attention_ranker", f"loss={loss}")
    train, vali, test = splits
    ranker = AttentionRanker(seed=0, **{**SMALL, "epochs": 4, "loss": cfg.loss}).fit(train, vali)
    assert ndcg10(ranker.score(test), test) > random_ndcg10(test) + 0.2


def test_a_pair_loss_is_refused() -> None:
    with pytest.raises(UserError):
        AttentionRanker(loss="logistic")


def test_saved_model_scores_as_score(splits: Any, tmp_path: Path) -> None:
    small = ["model.hidden_sizes=[16]", "model.n_blocks=1", "model.dim_feedforward=32"]
    small += ["model.epochs=2", "trainer.enable_progress_bar=false"]
    check_saved_model_scores_as_score("attention_ranker", small, tmp_path, splits[0], splits[2])


# ---------------------------------------------------------------------------------- config
def test_config_composes_and_builds_the_ranker() -> None:
    cfg = composed("model=attention_ranker", "seed=4")
    assert cfg.loss.name == "listnet" and cfg.optimizer.name == "adam"
    assert cfg.activation.name == "linear" and cfg.optimizer.lr == 0.001
    from hydra.utils import instantiate

    ranker = instantiate(cfg.model)
    assert type(ranker) is AttentionRanker and ranker.name == "attention_ranker"
    assert ranker.seed == 4 and ranker.n_blocks == 2 and ranker.hidden_sizes == [64]
    other = instantiate(composed("model=attention_ranker", "loss=lambda", "model.n_heads=4").model)
    assert other.loss["name"] == "lambda" and other.n_heads == 4


def test_search_space_names_the_model_and_its_source() -> None:
    from omegaconf import OmegaConf

    space = OmegaConf.load(CONF / "search" / "attention_ranker.yaml")
    assert space.search_space.model == "attention_ranker" and "allRank" in space.search_space.source
    params = space.hydra.sweeper.params
    assert {"model.n_blocks", "model.n_heads", "model.attention_dropout"} <= set(params)
