"""ltr_bench.saved_model: a logged model is the scoring pipeline, and scores as the run did.

Each family (neural, LambdaMART, AdaRank, SortNet) runs once in-process on tiny synthetic data
with a SQLite MLflow store; the test captures the scores the run evaluated on its test split and
the raw test documents, loads ``runs:/<fold run>/model`` through ``mlflow.pyfunc`` and checks the
pyfunc scores of the raw features equal them to 1e-6.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hydra import compose, initialize_config_module
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import open_dict

from ltr_bench import runner
from ltr_bench.config.tree import CONFIG_MODULE
from ltr_bench.data.queryset import QuerySet
from ltr_bench.data.synthetic import make_synthetic
from ltr_bench.data.transforms import Preprocessing
from ltr_bench.errors import UserError
from ltr_bench.saved_model import (
    ScoringPipeline,
    feature_columns,
    folder_size,
    load_pipeline,
    pack_knots,
    save_pipeline,
    unpack_knots,
)

TINY_DATA = [
    "dataset.n_train=400",
    "dataset.n_vali=100",
    "dataset.n_test=200",
    "dataset.n_features=8",
    "dataset.docs_per_query=20",
    "threads=1",
]
FAMILIES = {
    "neural": ["model=direct_ranker", "model.epochs=2", "trainer.enable_progress_bar=false"],
    "lambdamart": ["model=lambdamart", "model.n_estimators=15"],
    "adarank": ["model=adarank", "model.rounds=8"],
    "sortnet": [
        "model=sortnet",
        "model.max_iter=2",
        "model.epochs_per_iter=1",
        "model.max_opponents=8",
    ],
}


def compose_cfg(tmp: Path, *overrides: str) -> Any:
    with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
        cfg = compose("config", overrides=[*TINY_DATA, *overrides])
    with open_dict(cfg):
        cfg.tracking.tracking_uri = f"sqlite:///{tmp}/mlflow.db"
    return cfg


def run_capturing_test(
    cfg: Any, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, np.ndarray, QuerySet]:
    """Run ``cfg``; return its result, the scores it evaluated on test and the raw test split."""
    seen: dict[str, Any] = {}
    prepare, evaluate_split = runner.prepare, runner.evaluate_split

    def spy_prepare(
        cfg_: Any,
        protocol: Any,
        threshold: int,
        train: Any,
        vali: Any,
        test: Any,
        *a: Any,
        **k: Any,
    ) -> Any:
        seen["raw_test"] = test
        return prepare(cfg_, protocol, threshold, train, vali, test, *a, **k)

    def spy_evaluate(cfg_: Any, scores: np.ndarray, data: QuerySet, where: str) -> Any:
        if where == "test":
            seen["scores"] = np.asarray(scores, dtype=np.float64)
        return evaluate_split(cfg_, scores, data, where)

    # the outer loop's own names: it prepares and evaluates each fold
    monkeypatch.setattr(runner.outer, "prepare", spy_prepare)
    monkeypatch.setattr(runner.outer, "evaluate_split", spy_evaluate)
    result = runner.run(
        cfg,
        output_dir=Path(str(cfg.tracking.tracking_uri)[len("sqlite:///") :]).parent,
        verbose=False,
    )
    return result, seen["scores"], seen["raw_test"]


def frame(data: QuerySet) -> Any:
    import pandas as pd

    df = pd.DataFrame(data.features, columns=feature_columns(data.n_features))
    df.insert(0, "qid", data.qid.astype(np.int64))
    return df


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_pyfunc_scores_raw_features_as_the_run_scored_test(
    family: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    cfg = compose_cfg(tmp_path, *FAMILIES[family])
    result, run_scores, raw_test = run_capturing_test(cfg, monkeypatch)
    fold_run = result.folds[0].mlflow_run_id
    mlflow.set_tracking_uri(str(cfg.tracking.tracking_uri))
    try:
        model = mlflow.pyfunc.load_model(f"runs:/{fold_run}/model")
        client = mlflow.MlflowClient()
        (logged,) = client.search_logged_models([client.get_run(fold_run).info.experiment_id])
    finally:
        mlflow.set_tracking_uri(None)
    # the run's test documents: its query filters applied to the raw split, features untouched
    pipeline = model._model_impl.pipeline
    kept = pipeline.evaluation_data(raw_test)
    assert kept.n_docs == len(run_scores)
    scores = model.predict(frame(kept))
    np.testing.assert_allclose(scores, run_scores, rtol=0, atol=1e-6)
    wide = frame(kept).astype(
        {c: np.float64 for c in feature_columns(8)}
    )  # float64 frames pass too
    np.testing.assert_allclose(model.predict(wide), run_scores, rtol=0, atol=1e-6)
    assert model.metadata.signature.inputs.input_names()[:2] == ["qid", "f1"]
    assert logged.source_run_id == fold_run and logged.name == "model"  # the UI's "Logged models"
    # nothing but the pipeline: no pickle, no training data
    assert pipeline.info["run_id"] == fold_run and pipeline.n_features == 8


def test_scores_do_not_depend_on_row_order_or_missing_qid(tmp_path: Path) -> None:
    """LambdaMART and the quantile transform score rows independently: with or without qid,
    shuffled rows get their own scores back in input order."""
    pipeline = _fitted_pipeline(tmp_path, n_train=400, model="lambdamart")
    data = make_synthetic(n_docs=60, n_features=8, docs_per_query=10, seed=3)
    base = pipeline.score_arrays(data.features, data.qid)
    perm = np.random.default_rng(0).permutation(data.n_docs)
    np.testing.assert_array_equal(
        pipeline.score_arrays(data.features[perm], data.qid[perm]), base[perm]
    )
    np.testing.assert_array_equal(pipeline.score_arrays(data.features), base)


def _fitted_pipeline(tmp: Path, n_train: int, model: str = "direct_ranker") -> ScoringPipeline:
    cfg = (
        compose_cfg(
            tmp,
            f"model={model}",
            "model.epochs=1",
            "trainer.enable_progress_bar=false",
            f"dataset.n_train={n_train}",
        )
        if model == "direct_ranker"
        else compose_cfg(
            tmp, f"model={model}", "model.n_estimators=10", f"dataset.n_train={n_train}"
        )
    )
    train = make_synthetic(n_docs=n_train, n_features=8, docs_per_query=20, seed=1)
    pre = runner.build_preprocessing(cfg).fit(train)
    ranker = runner.build_ranker(cfg)
    ranker.fit(pre.apply(train, "train"), None)
    prepared = runner.Prepared(pre.apply(train, "train"), None, None, pre)
    return runner.scoring_pipeline(cfg, prepared, ranker, 2, {"model": model})


def test_artifact_size_does_not_grow_with_training_documents(tmp_path: Path) -> None:
    sizes = {}
    for n in (2_000, 16_000):  # both above n_quantiles=1000, so the knot table has one shape
        folder = save_pipeline(_fitted_pipeline(tmp_path / str(n), n), tmp_path / f"saved{n}")
        sizes[n] = folder_size(folder)
        assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == [
            "pipeline.json",
            "preprocessing.npz",
            "scorer.pt",
        ]
    # 8x the training documents: the same parameters; only the knots' compressed size varies
    assert sizes[16_000] < 1.25 * sizes[2_000], sizes
    assert max(sizes.values()) < 100_000


def test_saved_pipeline_round_trip_and_no_overwrite(tmp_path: Path) -> None:
    pipeline = _fitted_pipeline(tmp_path, 400)
    folder = save_pipeline(pipeline, tmp_path / "m")
    loaded = load_pipeline(folder)
    data = make_synthetic(n_docs=100, n_features=8, docs_per_query=20, seed=5)
    np.testing.assert_allclose(loaded.score(data), pipeline.score(data), rtol=0, atol=1e-6)
    x, y = data.features[:5], data.features[5:10]  # DirectRanker's r(x, y) works when loaded
    np.testing.assert_allclose(
        loaded.ranker.compare(x, y), pipeline.ranker.compare(x, y), atol=1e-6
    )
    with pytest.raises(FileExistsError):
        save_pipeline(pipeline, folder)
    with pytest.raises(UserError, match="has 5 features but the model was trained on 8"):
        loaded.score_arrays(np.zeros((3, 5)))


def test_loading_constructs_only_rankers_and_unpickles_nothing(tmp_path: Path) -> None:
    import json

    folder = save_pipeline(_fitted_pipeline(tmp_path, 400), tmp_path / "m")
    doc = json.loads((folder / "pipeline.json").read_text())
    doc["ranker"]["spec"]["_target_"] = "collections.OrderedDict"
    (folder / "pipeline.json").write_text(json.dumps(doc))
    with pytest.raises(UserError, match="'collections.OrderedDict' is not an ltr_bench Ranker"):
        load_pipeline(folder)
    # a state dict file holding an arbitrary object is refused (torch weights_only=True)
    folder2 = save_pipeline(_fitted_pipeline(tmp_path / "b", 400), tmp_path / "m2")
    torch.save({"x": _Evil()}, folder2 / "ranker" / "scorer.pt")
    with pytest.raises(Exception, match="[Ww]eights only load failed|Unsupported global"):
        load_pipeline(folder2)


class _Evil:
    pass


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 50), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_knot_packing_is_bit_exact(n_q: int, n_features: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    q = np.sort(
        rng.choice([0.0, -0.0, 1.5, -3.25e300, 7e-310, rng.normal()], size=(n_q, n_features)),
        axis=0,
    )
    q = np.maximum.accumulate(q + 0.0, axis=0)
    back, stats = unpack_knots(pack_knots(q))
    assert back.shape == q.shape and stats is None
    assert (back.view(np.int64) == q.view(np.int64)).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(1, 60), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_knots_from_the_fits_order_statistics_are_bit_exact(
    n_rows: int, n_quantiles: int, n_features: int, seed: int
) -> None:
    """A saved model stores the training values the knots interpolate, not the knots: the knots
    rebuilt from them are the fit's, bit for bit (ties, signed zeros, tiny and huge values)."""
    from ltr_bench.data.transforms import QuantileNormal

    rng = np.random.default_rng(seed)
    pool = np.array(
        [0.0, -0.0, 1.0, 0.5, -2.0, 3e30, 1e-40, rng.normal(), rng.normal()], dtype=np.float32
    )
    X = np.where(
        rng.random((n_rows, n_features)) < 0.5,
        rng.choice(pool, (n_rows, n_features)),
        rng.normal(size=(n_rows, n_features)).astype(np.float32),
    )
    t = QuantileNormal(n_quantiles=n_quantiles).fit(X)
    packed = pack_knots(t.quantiles_, t.order_stats_)
    assert "order_xz" in packed  # the order statistics reproduce the knots
    back, stats = unpack_knots(packed)
    assert (back.view(np.int64) == t.quantiles_.view(np.int64)).all()
    assert stats is not None and np.array_equal(stats[1], t.order_stats_[1])
    # Order statistics that do not give the knots back are not used: the knots are stored.
    wrong = (t.order_stats_[0], t.order_stats_[1] + np.float32(1))
    back2, _ = unpack_knots(pack_knots(t.quantiles_, wrong))
    assert (back2.view(np.int64) == t.quantiles_.view(np.int64)).all()


def test_standard_and_per_query_preprocessing_round_trip(tmp_path: Path) -> None:
    from ltr_bench.models import AdaRank

    train = make_synthetic(n_docs=300, n_features=6, docs_per_query=20, seed=0)
    test = make_synthetic(n_docs=100, n_features=6, docs_per_query=20, seed=9)
    for transform in ("standard", "per_query", "none"):
        pre = Preprocessing(feature_transform=transform, relevance_threshold=2).fit(train)
        ranker = AdaRank(rounds=5, relevance_threshold=2).fit(pre.apply(train, "train"))
        p = ScoringPipeline(
            pre,
            ranker,
            6,
            2,
            {"_target_": "ltr_bench.models.AdaRank", "rounds": 5, "relevance_threshold": 2},
        )
        loaded = load_pipeline(save_pipeline(p, tmp_path / transform))
        np.testing.assert_array_equal(loaded.score(test), p.score(test))


def test_a_ranker_without_save_params_logs_no_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from ltr_bench.tracking.tracker import Tracker

    tracker = Tracker(f"sqlite:///{tmp_path}/mlflow.db", "t")
    pipeline = ScoringPipeline(None, object(), 3, 1, {"_target_": "x.Y"})
    with tracker.run("m", {}) as rid:
        runner.log_model(tracker, rid, pipeline)
    assert tracker.client.list_artifacts(rid) == []
    assert tracker.client.search_logged_models([tracker.experiment_id]) == []
    assert "no model logged" in caplog.text and "save_params" in caplog.text
