"""The leaderboard on any data, without training: its parts planned from the models, the data and
the protocol; their results keys; the Nadeau-Bengio ratio; a failed model's row; the progress
line; and a second run finding the finished parts in the key-addressed work folder."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ltr_bench.errors import UserError
from ltr_bench.experiments.leaderboard_page import Entry, Settings, page_body, split_ratio
from ltr_bench.experiments.leaderboard_plan import (
    DataFacts,
    choose_protocol,
    common_overrides,
    every_ledger_part,
    models_of,
    one_sentence,
    plan_parts,
)
from ltr_bench.experiments.leaderboard_progress import Eta
from tests.experiments.conftest import generated_letor
from tests.experiments.test_leaderboard_page import FOLDS, fake_rows
from tests.inprocess import run_ltr_bench

FOLDS_OWN = ["protocol=letor_folds", "dataset.fold=1,2,3,4,5", "hydra.sweeper.study_per=[x]"]
HOLDOUT_OWN = ["protocol=holdout", "protocol.train_labels=graded", "protocol.split=range(0,15)"]
VARIANTS = {"letor_folds": FOLDS_OWN, "holdout_multi": HOLDOUT_OWN}
LETOR = DataFacts("letor", "my_letor", (1, 2, 3, 4, 5), ("dataset.path=/data/my_letor",))


def _ledger_run():
    from ltr_bench.experiments.common import compose_run_config, scaled_spec
    from ltr_bench.experiments.ledger import parse_ledger

    runs, _ = parse_ledger(scaled_spec(compose_run_config(["experiment=claims"]), "full"))
    return runs["leaderboard_mq2008"]


def test_the_protocol_follows_the_data_and_the_users_choice() -> None:
    five = choose_protocol(LETOR, None, None, VARIANTS, all_folds=True)
    assert (five.variant, five.units, five.overrides) == ("letor_folds", 5, None)  # Table 1's own
    three = choose_protocol(
        DataFacts("letor", "x", (1, 2, 3)), None, None, VARIANTS, all_folds=True
    )
    assert three.units == 3 and "dataset.fold=1,2,3" in (three.overrides or ())
    assert three.describe("x") == "the three predefined x folds"
    none = DataFacts("synthetic", "synthetic", ())
    split = choose_protocol(none, None, None, VARIANTS, all_folds=True)
    assert (split.variant, split.units, split.overrides) == ("holdout_multi", 15, None)
    assert split.describe("s") == "15 hold-out splits by query of s (graded training labels)"
    six = choose_protocol(none, "holdout_multi", 6, VARIANTS, all_folds=True)
    assert six.overrides is not None and "protocol.n_splits=6" in six.overrides
    assert "protocol.split=range(0,6)" in six.overrides and six.units == 6
    with pytest.raises(UserError, match="has no predefined folds"):
        choose_protocol(none, "letor_folds", None, VARIANTS, all_folds=True)
    with pytest.raises(UserError, match="not one of Table 1's protocol variants"):
        choose_protocol(LETOR, "nope", None, VARIANTS, all_folds=True)


def test_one_part_per_model_on_other_data_and_the_ledgers_parts_on_mq2008() -> None:
    protocol = choose_protocol(LETOR, None, None, VARIANTS, all_folds=True)
    common = common_overrides(LETOR, protocol, None)
    variants = {"listnet_star_listmle": ["model=listnet_star", "loss=listmle"]}
    ledger = _ledger_run()
    parts = plan_parts(["direct_ranker", "listnet_star_listmle"], variants, common, LETOR, ledger)
    assert [p.run.name for p in parts] == ["letor.direct_ranker", "letor.listnet_star_listmle"]
    assert not any(p.ledger for p in parts)  # other data: none of the ledger's parts
    assert 'experiment.cell_overrides=["dataset.path=/data/my_letor"]' in parts[0].run.overrides
    assert models_of(parts[1].run.overrides) == ["listnet_star_listmle"]
    assert any(o.startswith("+experiment.model_variants=") for o in parts[1].run.overrides)
    # MQ2008 at Table 1's budget: the ledger's parts, a part used when one of its models is chosen
    mq = DataFacts("mq2008", "MQ2008", None)
    mq_common = common_overrides(mq, choose_protocol(mq, None, None, VARIANTS, True), None)
    assert mq_common == ledger.overrides
    every = [m for piece in ledger.pieces() for m in models_of(piece.overrides)]
    whole = plan_parts(every, {}, mq_common, mq, ledger)
    assert len(whole) == 10 and every_ledger_part(whole, ledger)
    some = plan_parts(["adarank", "ranksvm"], {}, mq_common, mq, ledger)
    assert [(p.run.name, p.labels) for p in some] == [
        ("leaderboard_mq2008.part1", ("adarank",)),
        ("leaderboard_mq2008.part3", ("ranksvm",)),
    ]
    assert not every_ledger_part(some, ledger)
    # another budget: the model's own part, not the ledger's
    other = plan_parts(["adarank"], {}, (*mq_common, "experiment.n_trials=10"), mq, ledger)
    assert [p.ledger for p in other] == [False]


def test_a_parts_key_depends_on_its_model_the_data_and_the_budget(tmp_path: Path) -> None:
    from ltr_bench.experiments.common import invocation_inputs
    from ltr_bench.experiments.ledger import run_spec_config
    from ltr_bench.experiments.results_key import results_key

    a = generated_letor(tmp_path / "a")
    b = generated_letor(tmp_path / "b", seed=1)

    def key(models: list[str], folder: Path, n_trials: int | None = None) -> str:
        data = DataFacts("letor", folder.name, (1, 2, 3, 4, 5), (f"dataset.path={folder}",))
        protocol = choose_protocol(data, None, None, VARIANTS, all_folds=False)
        part = plan_parts(models, {}, common_overrides(data, protocol, n_trials), data)[0]
        spec = run_spec_config(part.run, "quick", 0, ["threads=1"])
        return results_key(invocation_inputs("table1", "quick", 0, spec, ["threads=1"]))

    first = key(["adarank"], a)
    assert key(["adarank", "lambdamart"], a) == first  # the other models leave it
    moved = tmp_path / "moved"
    a.rename(moved)
    assert key(["adarank"], moved) == first  # the files' sha256 stand for the path
    assert key(["adarank"], b) != first  # other files
    assert key(["adarank"], moved, n_trials=3) != first  # another budget


def test_the_ratio_comes_from_the_splits_sizes_when_the_rows_have_them() -> None:
    rows = fake_rows({"direct_ranker": 0.72, "lambdamart": 0.74})
    assert split_ratio(rows) is None  # rows that predate recording the sizes
    sized = rows.assign(n_test_queries=150, n_train_queries=600)
    assert split_ratio(sized) == pytest.approx(0.25)
    uneven = sized.assign(n_test_queries=[100 if f == FOLDS[0] else 150 for f in sized["fold"]])
    assert split_ratio(uneven) == pytest.approx((100 / 600 + 4 * 150 / 600) / 5)


def test_a_failed_model_is_a_row_with_its_sentence_and_stays_out_of_the_tests() -> None:
    reason = (
        "exit 2 (log /w/x.log): table1 / ltr-bench: error: `ltr-bench -m ...` failed (exit 2; "
        "log /w/s.log): ltr-bench: error: model xgboost needs the gbdt extra: pip install "
        "'ltr-bench[gbdt]'"
    )
    sentence = one_sentence(reason)
    assert sentence == "model xgboost needs the gbdt extra: pip install 'ltr-bench[gbdt]'"
    rows = fake_rows({"direct_ranker": 0.72, "lambdamart": 0.74, "ranknet": 0.70})
    entries = [
        Entry("direct_ranker", "RankNet*", 1),
        Entry("lambdamart", "LambdaMART", 2),
        Entry("ranknet", "RankNet", 3),
        Entry("xgboost", "XGBoost", 4, f"failed: {sentence} (part 4: `ltr-bench ...`)"),
    ]
    page = page_body(rows, entries, [], Settings(stat_metrics=("ndcg@10",)))
    assert "4 models, 3 measured." in page
    assert f"| XGBoost | xgboost | – | – | – | – | – | 0 | – | – | 4 | failed: {sentence}" in page
    assert "over 3 models and 5 folds" in page
    assert "Not in the test (no rows; see the table above): XGBoost (failed)." in page


def test_the_progress_line_estimates_per_model_and_fold() -> None:
    eta = Eta(total=20)
    assert eta.line(1, 4, "a", 5).endswith("ETA after the first part is timed")
    eta.finished(5, 300.0)  # one model over five folds in five minutes
    line = eta.line(2, 4, "b, c", 5)
    assert "5 of 20 model-folds done" in line and "~1.0 min per model and fold" in line
    assert "this part ~10.0 min" in line and "all ~15.0 min left" in line


def test_a_second_run_finds_the_finished_parts_in_the_work_folder(tmp_path: Path) -> None:
    """A part's bundle in ``<work_dir>/bundles`` (as a finished part leaves it) is read, the
    missing part is "not yet run" with the command that runs it, and nothing goes to docs/."""
    from omegaconf import OmegaConf

    from ltr_bench.experiments.common import invocation_inputs
    from ltr_bench.experiments.ledger import run_spec_config
    from ltr_bench.experiments.ledger.bundles import write_bundle
    from ltr_bench.experiments.results_key import results_key

    data = generated_letor(tmp_path / "my_letor")
    facts = DataFacts("letor", "my_letor", (1, 2, 3, 4, 5), (f"dataset.path={data}",))
    protocol = choose_protocol(facts, None, None, VARIANTS, all_folds=True)
    part = plan_parts(["adarank"], {}, common_overrides(facts, protocol, None), facts)[0]
    forwarded = ["threads=1", "tracking=none"]
    spec = run_spec_config(part.run, "full", 0, forwarded)
    inputs = invocation_inputs("table1", "full", 0, spec, forwarded)
    rows = fake_rows({"adarank": 0.7}).assign(variant="letor_folds", dataset="letor")
    rows.to_csv(tmp_path / "refits.csv", index=False)
    record = {
        "name": part.run.name,
        "experiment": "table1",
        "scale": "full",
        "seed": 0,
        "key": results_key(inputs),
        "inputs": inputs,
        "command": "ltr-bench experiment=table1 ...",
        "overrides": list(part.run.overrides),
        "forwarded": forwarded,
        "spec": OmegaConf.to_container(spec),
        "git_commit": "0123456789abcdef",
        "started": "2026-01-01 00:00 UTC",
        "wall_s": 60.0,
        "machine": {"os": "Linux", "cpu_model": "test CPU", "cpus_logical": 2},
    }
    work = tmp_path / "work"
    write_bundle(work / "bundles", record, {"refits.csv": tmp_path / "refits.csv"})
    res = run_ltr_bench(
        "experiment=leaderboard",
        "dataset=letor",
        f"dataset.path={data}",
        "experiment.models=[adarank,lambdamart]",
        f"experiment.work_dir={work}",
        "experiment.execute=false",
        *forwarded,
        f"hydra.run.dir={tmp_path / 'out'}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    page = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "# Leaderboard: 2 rankers on the five my_letor folds (full)" in page
    assert "| wall time |" in page and "| git commit |" in page
    assert "2 models, 1 measured." in page
    assert "30 TPE trials scored by 5-fold inner cross-validation" in page
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv").set_index("label")
    assert board.loc["adarank", "status"] == "measured"
    assert board.loc["lambdamart", "status"].startswith("not yet run (part 2: `ltr-bench ")
    assert "'experiment.parts=[2]'" in board.loc["lambdamart", "status"]
    assert "the protocol's" not in page and "LETOR's folds: one test part" in page
    assert not (tmp_path / "docs").exists()
