"""The leaderboard's extension claim: the ``equivalent_to_best`` check, the claim as the ledger
lists it (an extension, on the run whose parts are the leaderboard's rows) and its verdict on a
fake union of the parts' tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from omegaconf import OmegaConf

from ltr_bench.experiments import checks
from ltr_bench.stats import bayesian_correlated_ttest
from tests.experiments.test_leaderboard_page import FOLDS, fake_rows

CLAIM_ID = "ext-leaderboard-mq2008-ranknet-star-rope"


def _args(**kw):
    base = dict(
        file="refits.csv",
        column="test/ndcg@10",
        by="model",
        a="direct_ranker",
        others=["lambdamart", "ranknet"],
        test_train_ratio=1 / 3,
    )
    return {**base, **kw}


def test_equivalent_to_best_tests_against_the_other_with_the_highest_mean() -> None:
    near = {"refits.csv": fake_rows({"direct_ranker": 0.72, "lambdamart": 0.7205, "ranknet": 0.6})}
    out = checks.equivalent_to_best(near, **_args())
    assert out.holds is True and out.ours.startswith("best of 2: lambdamart 0.69")
    wide = near["refits.csv"].pivot_table(index="model", columns="fold", values="test/ndcg@10")
    direct = bayesian_correlated_ttest(
        wide.loc["direct_ranker"], wide.loc["lambdamart"], test_train_ratio=1 / 3, rope=0.01
    )
    assert f"P(within ±0.01) {direct.p_equivalent:.2f}" in out.ours
    far = {"refits.csv": fake_rows({"direct_ranker": 0.70, "lambdamart": 0.75, "ranknet": 0.6})}
    assert checks.equivalent_to_best(far, **_args()).holds is False
    # the field is judged whole: a model without rows leaves the claim unjudged
    assert checks.equivalent_to_best(near, **_args(others=["lambdamart", "nope"])).holds is None


@pytest.fixture(scope="module")
def ledger_run():
    """The ledger's extension claim, the leaderboard's run, each part's spec, and Table 1's."""
    from ltr_bench.experiments.common import compose_run_config, invocation_key, scaled_spec
    from ltr_bench.experiments.ledger import parse_ledger, run_spec_config

    spec = scaled_spec(compose_run_config(["experiment=claims", "scale=full"]), "full")
    runs, claims = parse_ledger(spec)
    claim = next(c for c in claims if c.id == CLAIM_ID)

    def keys(name: str) -> list[tuple[str, object]]:
        out = []
        for piece in runs[name].pieces():
            s = run_spec_config(piece, "full", 0, ["threads=1"])
            out.append((invocation_key("table1", "full", 0, s, ["threads=1"]), s))
        return out

    return claim, runs[claim.run], keys(claim.run), keys("table1_mq2008_folds")


def test_the_claim_is_an_extension_on_every_model_of_the_leaderboard(ledger_run) -> None:
    from ltr_bench.experiments.common import compose_run_config, scaled_spec
    from ltr_bench.experiments.model_variants import model_entries

    claim, run, parts, table1 = ledger_run
    assert claim.source.startswith("Extension (ours, not a paper's claim)")
    labels = [label for _, s in parts for label in model_entries(s)]
    assert len(labels) == len(set(labels)) == 17
    assert sorted([claim.check["a"], *claim.check["others"]]) == sorted(labels)
    # Table 1's two MQ2008 five-fold parts are the leaderboard's first two: the same invocations
    assert [k for k, _ in parts[:2]] == [k for k, _ in table1]
    assert all(list(s.run_variants) == ["letor_folds"] for _, s in parts)
    board = scaled_spec(compose_run_config(["experiment=leaderboard"]), "full")
    assert board.ledger_run == claim.run and board.claim == claim.id
    assert board.baseline == claim.check["a"]
    # null: the splits' own sizes, else (the committed rows predate them) the claim's ratio
    assert board.test_train_ratio is None and claim.check["test_train_ratio"] == 0.333
    assert set(labels) <= set(OmegaConf.to_container(board.names))


def _judge(claim, rows: pd.DataFrame) -> dict:
    """The ledger's verdict on ``rows`` as the union of the run's parts."""
    from ltr_bench.experiments.ledger import Invocation, RunSpec, judge

    inv = Invocation(RunSpec(claim.run, "table1"), "k", status="bundle")
    inv.tables = {"refits.csv": rows}
    return judge(claim, inv, True, "full")


def test_the_claim_is_judged_on_the_union_of_the_parts(ledger_run) -> None:
    claim, *_ = ledger_run
    others = list(claim.check["others"])
    levels = {"direct_ranker": 0.720, **{o: 0.70 for o in others}}
    close = fake_rows({**levels, "catboost": 0.7204})
    row = _judge(claim, close)
    assert row["verdict"] == "holds" and "best of 16: catboost" in row["ours"]
    ahead = fake_rows({**levels, "catboost": 0.76})
    assert _judge(claim, ahead)["verdict"] == "does not hold"
    partial = close[close["model"] != "dasalc"]
    assert _judge(claim, partial)["verdict"].startswith("not judged: no rows of model=['dasalc']")
    assert len(FOLDS) == 5 and np.isfinite(close["test/ndcg@10"]).all()
