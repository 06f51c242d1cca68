"""ltr_bench.cli.predict (``ltr-bench-predict``): scores, TREC run file, metrics, one-sentence errors.

One run (LambdaMART on tiny synthetic data, registered as ``tiny``) is shared by the module; its
test split is written as a LETOR file, so predicting it must give the run's test metrics.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ltr_bench.cli.predict import main, trec_ranks
from ltr_bench.data.letor import load_letor
from ltr_bench.data.queryset import QuerySet
from tests.test_saved_model import compose_cfg, run_capturing_test


def write_letor(path: Path, data: QuerySet, docids: bool = True) -> Path:
    with open(path, "w") as fh:
        for i in range(data.n_docs):
            feats = " ".join(f"{j + 1}:{v:.9g}" for j, v in enumerate(data.features[i]))
            tail = f" #docid = D{i:04d} inc = 1" if docids else ""
            fh.write(f"{data.labels[i]} qid:{data.qid[i]} {feats}{tail}\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("predict")
    mp = pytest.MonkeyPatch()
    try:
        cfg = compose_cfg(
            tmp, "model=lambdamart", "model.n_estimators=15", "tracking.register_model=tiny"
        )
        result, scores, raw_test = run_capturing_test(cfg, mp)
    finally:
        mp.undo()
    return {
        "tmp": tmp,
        "uri": str(cfg.tracking.tracking_uri),
        "result": result,
        "run_id": result.folds[0].mlflow_run_id,
        "test": write_letor(tmp / "test.txt", raw_test),
        "raw_test": raw_test,
    }


def predict(trained: dict[str, Any], *args: str) -> int:
    try:
        main([*args, "--tracking-uri", trained["uri"]])
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_predict_writes_scores_trec_run_and_the_runs_test_metrics(
    trained: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert (
        trained["result"].folds[0].model_uri == f"runs:/{trained['run_id']}/model"
    )  # as the run prints it
    code = predict(
        trained, trained["result"].folds[0].model_uri, str(trained["test"]), "--out", str(out)
    )
    assert code == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    data = load_letor(trained["test"], with_docids=True, use_cache=False)
    rows = list(csv.DictReader(open(out / "test.scores.tsv"), delimiter="\t"))
    assert len(rows) == data.n_docs and rows[0]["docid"] == "D0000"
    trec = [line.split() for line in (out / "test.run").read_text().splitlines()]
    assert len(trec) == data.n_docs and all(
        len(t) == 6 and t[1] == "Q0" and t[5] == "lambdamart" for t in trec
    )
    # per query: ranks 1..n, scores non-increasing down the ranks
    by_q: dict[str, list[tuple[int, float]]] = {}
    for q, _, _, rank, score, _ in trec:
        by_q.setdefault(q, []).append((int(rank), float(score)))
    for ranked in by_q.values():
        assert [r for r, _ in ranked] == list(range(1, len(ranked) + 1))
        assert all(a[1] >= b[1] for a, b in zip(ranked, ranked[1:]))
    # the run's test metrics, to the printed precision and exactly in metrics.csv
    (row,) = list(csv.DictReader(open(out / "metrics.csv")))
    for name, value in trained["result"].folds[0].metrics["test"].items():
        assert float(row[name]) == pytest.approx(value, abs=1e-6)
    assert "eval=run" in printed and "ndcg@10" in printed


def test_registered_model_latest_and_local_folder_give_the_same_scores(
    trained: dict[str, Any], tmp_path: Path
) -> None:
    import mlflow

    assert (
        predict(trained, "models:/tiny/latest", str(trained["test"]), "--out", str(tmp_path / "a"))
        == 0
    )
    mlflow.set_tracking_uri(trained["uri"])
    try:
        local = mlflow.artifacts.download_artifacts(
            f"runs:/{trained['run_id']}/model", dst_path=str(tmp_path / "dl")
        )
    finally:
        mlflow.set_tracking_uri(None)
    assert (
        predict(
            trained, local, str(trained["test"]), "--out", str(tmp_path / "b"), "--eval", "graded"
        )
        == 0
    )
    a = (tmp_path / "a" / "test.scores.tsv").read_text()
    assert a == (tmp_path / "b" / "test.scores.tsv").read_text()
    assert list(csv.DictReader(open(tmp_path / "b" / "metrics.csv")))[0]["eval"] == "graded"


def test_docids_default_to_line_numbers(trained: dict[str, Any], tmp_path: Path) -> None:
    plain = write_letor(tmp_path / "plain.txt", trained["raw_test"], docids=False)
    assert (
        predict(
            trained, f"runs:/{trained['run_id']}/model", str(plain), "--out", str(tmp_path / "o")
        )
        == 0
    )
    ids = [line.split()[2] for line in (tmp_path / "o" / "plain.run").read_text().splitlines()]
    assert sorted(map(int, ids)) == list(range(1, trained["raw_test"].n_docs + 1))


def _local_model_with_spec(trained: dict[str, Any], tmp_path: Path, **extra: Any) -> Path:
    """A local copy of the trained model whose pipeline.json ranker spec gets ``extra`` keys."""
    import json

    import mlflow

    mlflow.set_tracking_uri(trained["uri"])
    try:
        folder = Path(
            mlflow.artifacts.download_artifacts(
                f"runs:/{trained['run_id']}/model", dst_path=str(tmp_path / "model")
            )
        )
    finally:
        mlflow.set_tracking_uri(None)
    (pipeline,) = folder.rglob("pipeline.json")
    doc = json.loads(pipeline.read_text())
    doc["ranker"]["spec"].update(extra)
    pipeline.write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize(
    "case, expected",
    [
        ("missing_file", "does not exist"),
        ("unknown_run", "was not found in"),
        ("unknown_name", "was not found in"),
        ("not_a_model", "is neither a folder nor a model URI"),
        ("features", "has 5 features but the model was trained on 8"),
        ("bad_line", "bad.txt:2: "),
        ("exists", "exists; choose another --out"),
        ("bad_spec", "pipeline.json: the ranker spec"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(
    case: str,
    expected: str,
    trained: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, data = f"runs:/{trained['run_id']}/model", str(trained["test"])
    out = tmp_path / "o"
    if case == "missing_file":
        data = str(tmp_path / "nope.txt")
    elif case == "unknown_run":
        model = "runs:/0123456789abcdef0123456789abcdef/model"
    elif case == "unknown_name":
        model = "models:/no_such_model/latest"
    elif case == "not_a_model":
        model = "nonsense"
    elif case == "features":
        raw = trained["raw_test"]
        data = str(write_letor(tmp_path / "f5.txt", raw.with_features(raw.features[:, :5])))
    elif case == "bad_line":
        lines = Path(data).read_text().splitlines()
        lines[1] = "1 qid:x 1:abc"
        data = str(tmp_path / "bad.txt")
        Path(data).write_text("\n".join(lines) + "\n")
    elif case == "exists":
        out.mkdir()
        (out / "test.run").write_text("keep me")
    elif case == "bad_spec":  # pipeline.json edited by hand: an argument the ranker does not take
        model = str(_local_model_with_spec(trained, tmp_path, no_such_argument=1))
        capsys.readouterr()  # the download's progress bar
    code = predict(trained, model, data, "--out", str(out))
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("ltr-bench-predict: error: ") and expected in err and "\n" not in err
    assert "Traceback" not in err


def test_trec_ranks_break_ties_by_document_order() -> None:
    data = QuerySet.from_arrays(np.zeros((5, 1)), np.zeros(5), np.array([1, 1, 1, 2, 2]))
    ranks = trec_ranks(data, np.array([0.5, 0.9, 0.5, 0.1, 0.1]))
    assert ranks.tolist() == [2, 1, 3, 1, 2]
