"""The claims ledger: each check on hand-made tables (every verdict path), the ledger's validation
(the full claim list composes at both scales without running anything), and the ledger end to end
at scale=quick on three claims: one experiment run for two claims, a not-testable one, and a
second invocation that re-uses the tracked run instead of training again."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from ltr_bench.errors import UserError
from ltr_bench.experiments import checks
from ltr_bench.experiments.checks import CheckError, parse_mean_se

# ------------------------------------------------------------------------------ hand-made tables
# A summary.csv as the synthetic experiments write it: one row per point, mean and SE.
SUMMARY = pd.DataFrame(
    {
        "series": ["a"] * 3 + ["b"] * 3,
        "sigma": [0.0, 0.25, 0.75] * 2,
        "model": ["M"] * 6,
        "ndcg@20": [0.98, 0.97, 0.85, 0.90, 0.80, 0.60],
        "ndcg@20_se": [0.002, 0.003, 0.004, 0.01, 0.01, 0.02],
    }
)
# Per-fold rows as cells.csv / refits.csv hold them: means and SEs over the folds.
FOLDS = pd.DataFrame(
    {
        "model": ["A"] * 3 + ["B"] * 3 + ["C"] * 3,
        "fold": [1, 2, 3] * 3,
        "score": [0.70, 0.72, 0.74, 0.60, 0.61, 0.62, 0.50, 0.55, 0.60],
        "time": [1.0, 1.1, 0.9, 5.0, 5.2, 4.8, 2.0, 2.0, 2.0],
    }
)
T = {"summary.csv": SUMMARY, "folds.csv": FOLDS}


def test_parse_mean_se_reads_the_papers_notation() -> None:
    assert parse_mean_se("0.720(12)") == pytest.approx((0.720, 0.012))
    assert parse_mean_se("2215(351)") == pytest.approx((2215.0, 351.0))
    assert parse_mean_se("67(6)") == pytest.approx((67.0, 6.0))
    assert parse_mean_se("0.356(104)") == pytest.approx((0.356, 0.104))
    mean, se = parse_mean_se("0.507")
    assert mean == 0.507 and math.isnan(se)
    with pytest.raises(CheckError):
        parse_mean_se("about 0.7")


def test_threshold_holds_fails_and_has_nothing_to_judge() -> None:
    out = checks.threshold(
        T, file="summary.csv", column="ndcg@20", where={"sigma": 0.75, "series": "a"}, at_least=0.80
    )
    assert out.holds is True and out.ours == "0.8500(40)"  # the row's own SE, not one over rows
    assert (
        checks.threshold(
            T,
            file="summary.csv",
            column="ndcg@20",
            where={"sigma": 0.75, "series": "b"},
            at_least=0.80,
        ).holds
        is False
    )
    assert (
        checks.threshold(
            T, file="summary.csv", column="ndcg@20", where={"sigma": 0.5}, at_least=0.80
        ).holds
        is None
    )
    # several rows: mean and SE over them (folds); ranges and lists select
    out = checks.threshold(T, file="folds.csv", column="score", where={"model": "A"}, at_most=0.75)
    m, se = np.mean([0.70, 0.72, 0.74]), np.std([0.70, 0.72, 0.74], ddof=1) / math.sqrt(3)
    assert out.holds is True and out.ours == checks.format_mean_se(m, se)
    assert (
        checks.threshold(
            T,
            file="summary.csv",
            column="ndcg@20",
            where={"sigma": {"min": 0.2, "max": 0.8}, "series": ["a"]},
            at_least=0.92,
        ).holds
        is False
    )  # mean of 0.97 and 0.85: 0.91


def test_a_check_naming_a_missing_file_or_column_raises_check_error() -> None:
    with pytest.raises(CheckError, match="no column 'ndcg@10'"):
        checks.threshold(T, file="summary.csv", column="ndcg@10", at_least=0.5)
    with pytest.raises(CheckError, match="no other.csv"):
        checks.threshold(T, file="other.csv", column="x", at_least=0.5)


def test_within_se_uses_the_combined_standard_error() -> None:
    # ours A: 0.72(12); paper 0.70(1): |0.02| / sqrt(0.01155^2 + 0.01^2) = 1.31 sigma
    out = checks.within_se(T, file="folds.csv", where={"model": "A"}, paper={"score": "0.70(1)"})
    assert out.holds is False and "1.3σ" in out.ours
    assert (
        checks.within_se(
            T, file="folds.csv", where={"model": "A"}, paper={"score": "0.70(1)"}, n_se=1.5
        ).holds
        is True
    )
    # per model, nested; a model the table lacks leaves nothing to judge
    ok = checks.within_se(
        T,
        file="folds.csv",
        by="model",
        paper={"A": {"score": "0.72(1)"}, "B": {"score": "0.61(1)"}},
    )
    assert ok.holds is True
    assert (
        checks.within_se(
            T,
            file="folds.csv",
            by="model",
            paper={"A": {"score": "0.72(1)"}, "Z": {"score": "0.5(1)"}},
        ).holds
        is None
    )


def test_above_and_below_compare_labels_per_group() -> None:
    assert checks.above(T, file="folds.csv", column="score", by="model", top=["A"]).holds is True
    assert checks.above(T, file="folds.csv", column="score", by="model", top=["B"]).holds is False
    assert (
        checks.above(T, file="folds.csv", column="score", by="model", top=["B"], others=["C"]).holds
        is True
    )
    assert checks.below(T, file="folds.csv", column="time", by="model", top=["A"]).holds is True
    assert checks.below(T, file="folds.csv", column="time", by="model", top=["C"]).holds is False
    # per group: series a above b at every sigma; a tolerance lets near-ties pass
    frame = SUMMARY.assign(ndcg=SUMMARY["ndcg@20"])
    out = checks.above({"s": frame}, file="s", column="ndcg", by="series", top=["a"], per="sigma")
    assert out.holds is True and "3/3 sigma" in out.ours
    tie = pd.DataFrame({"x": [1, 1, 2, 2], "s": ["a", "b"] * 2, "v": [1.0, 1.0, 0.9, 0.8]})
    assert checks.above({"t": tie}, file="t", column="v", by="s", top=["a"], per="x").holds is False
    assert (
        checks.above(
            {"t": tie}, file="t", column="v", by="s", top=["a"], per="x", tolerance=0.005
        ).holds
        is True
    )
    assert (
        checks.above(
            {"t": tie}, file="t", column="v", by="s", top=["a"], per="x", min_share=0.5
        ).holds
        is True
    )
    assert checks.above({"t": tie}, file="t", column="v", by="s", top=["z"]).holds is None


def test_trend_change_ratio_gap_and_exceeds() -> None:
    assert (
        checks.trend(
            T, file="summary.csv", column="ndcg@20", x="sigma", direction="decreasing", per="series"
        ).holds
        is True
    )
    assert (
        checks.trend(
            T, file="summary.csv", column="ndcg@20", x="sigma", direction="increasing", per="series"
        ).holds
        is False
    )
    assert (
        checks.trend(
            T,
            file="summary.csv",
            column="ndcg@20",
            x="sigma",
            direction="decreasing",
            where={"sigma": 0.0},
        ).holds
        is None
    )  # one point is no trend
    with pytest.raises(CheckError):
        checks.trend(T, file="summary.csv", column="ndcg@20", x="sigma", direction="up")

    small = dict(file="summary.csv", column="ndcg@20", x="sigma", where={"series": "a"})
    assert checks.change(T, start=0.0, end=0.25, at_least=-0.02, **small).holds is True  # -0.01
    assert checks.change(T, start=0.25, end=0.75, at_least=-0.02, **small).holds is False  # -0.12
    assert checks.change(T, start=0.0, end=0.5, at_least=-0.02, **small).holds is None

    spread = checks.ratio(T, file="folds.csv", column="time", by="model", at_most=2.0)
    assert spread.holds is False and "B" in spread.ours and "= 5" in spread.ours  # 5.0 / 1.0
    assert (
        checks.ratio(
            T,
            file="folds.csv",
            column="time",
            by="model",
            numerator="C",
            denominator="A",
            at_least=1.5,
            at_most=2.5,
        ).holds
        is True
    )

    # ECML Sect. 5.1: best and worst on MQ2008 NDCG@10, LambdaMART 0.723(7) vs RankNet 0.716(11),
    # are "0.54 sigma" apart: the gap in combined standard errors.
    table1 = pd.DataFrame(
        {
            "model": ["lambdamart", "ranknet", "adarank"],
            "ndcg": [0.723, 0.716, 0.722],
            "ndcg_se": [0.007, 0.011, 0.010],
        }
    )
    out = checks.gap({"t": table1}, file="t", column="ndcg", by="model", at_most=2.0)
    assert out.holds is True and out.ours.startswith("0.54σ (lambdamart")
    assert (
        checks.gap(
            {"t": table1},
            file="t",
            column="ndcg",
            by="model",
            a="ranknet",
            b="lambdamart",
            at_least=0.0,
        ).holds
        is False
    )

    acc = pd.DataFrame(
        {"panel": ["p", "p"], "acc": [0.90, 0.92], "chance": [0.5, 0.5], "oracle": [0.99, 0.99]}
    )
    assert checks.exceeds({"a": acc}, file="a", column="acc", other="chance").holds is True
    assert (
        checks.exceeds({"a": acc}, file="a", column="acc", other="oracle", margin=-0.05).holds
        is False
    )
    assert (
        checks.exceeds(
            {"a": acc}, file="a", column="acc", other="chance", where={"panel": "q"}
        ).holds
        is None
    )


def test_a_list_of_columns_holds_only_if_every_column_holds() -> None:
    both = checks.above(T, file="folds.csv", column=["score", "time"], by="model", top=["A"])
    assert both.holds is False and both.ours.startswith("score: ")
    assert checks.above(T, file="folds.csv", column=["score"], by="model", top=["A"]).holds is True


# ------------------------------------------------------------------------------ the ledger's config
def test_the_full_claim_list_composes_and_validates() -> None:
    """Every run's experiment spec composes (about 1 s each), every check's arguments fit."""
    from ltr_bench.experiments.common import compose_run_config, scaled_spec
    from ltr_bench.experiments.ledger import parse_ledger, validate_ledger

    cfg = compose_run_config(["experiment=claims", "scale=full"])
    ledger = validate_ledger(scaled_spec(cfg, "full"), "full")
    ids = [c.id for c in ledger.claims]
    assert len(ids) == len(set(ids)) >= 40
    testable = [c for c in ledger.claims if not c.not_testable]
    assert all(p.name in ledger.specs for c in testable for p in ledger.runs[c.run].pieces())
    # every table and figure of the papers has claims, and MQ2007 / MSLR-WEB10K ones need their data
    runs = {ledger.runs[c.run].experiment for c in testable}
    assert {
        "fig2a",
        "fig2b",
        "fig2c",
        "fig2d",
        "fig3",
        "fig5_size",
        "fig5_ratio",
        "table1",
        "table2",
        "table3",
    } <= runs
    needs = {d for c in testable for d in ledger.runs[c.run].datasets}
    assert {"mq2008", "mq2007", "mslr_web10k"} <= needs
    assert 0.25 in list(ledger.specs["fig2c"]["values"])  # the papers' "~5 % mislabelling" point
    # Table 1: one invocation per dataset and variant, so each variant runs and is tracked alone,
    # and every Table 1 claim reads the invocation of the variant it checks
    for claim in testable:
        for piece in ledger.runs[claim.run].pieces():
            spec = ledger.specs[piece.name]
            if piece.experiment == "table1":
                assert list(spec["run_variants"]) == [claim.check["where"]["variant"]], claim.id
                assert list(spec["datasets"]) == list(ledger.runs[claim.run].datasets), claim.id
    # each Table 1 run is in parts that split the six models: together every model, each once
    # (the leaderboard, an extension, runs Table 1 for more models: its own test file checks it)
    for name, run in ledger.runs.items():
        if name.startswith("table1_") and f"{name}.part1" in ledger.specs:
            models = [m for p in run.pieces() for m in ledger.specs[p.name]["models"]]
            assert len(run.parts) == 2 and sorted(models) == sorted(
                ["direct_ranker", "ranknet", "listnet_star", "listnet", "lambdamart", "adarank"]
            ), name
    quick_runs, quick_claims = parse_ledger(scaled_spec(cfg, "quick"))
    assert quick_runs["fig2c"].overrides == () and len(quick_claims) == len(ledger.claims)
    assert scaled_spec(cfg, "quick").judge is False  # quick verdicts read "too small to judge"


def _ledger(**data):
    base = {
        "runs": {"r": {"experiment": "fig2c"}},
        "claims": [
            {
                "id": "c",
                "source": "s",
                "statement": "t",
                "paper": "p",
                "run": "r",
                "check": {
                    "_target_": "ltr_bench.experiments.checks.threshold",
                    "file": "summary.csv",
                    "column": "ndcg@20",
                    "at_least": 0.5,
                },
            }
        ],
    }
    base.update(data)
    return base


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"run": "nope"}, "run nope is not in experiment.runs"),
        (
            {
                "check": {
                    "_target_": "ltr_bench.experiments.checks.threshold",
                    "file": "x",
                    "column": "y",
                    "at_leest": 1,
                }
            },
            "unexpected keyword argument 'at_leest'",
        ),
        ({"check": {"_target_": "ltr_bench.experiments.checks.nope"}}, "is not a function"),
        ({"check": None}, "needs `run` and `check`, or `not_testable"),
        ({"statement": ""}, "needs `statement`"),
        ({"colour": "red"}, "unknown key"),
    ],
)
def test_a_broken_claim_is_one_sentence_naming_it(change: dict, message: str) -> None:
    from ltr_bench.experiments.ledger import validate_ledger

    data = _ledger()
    data["claims"][0].update(change)
    with pytest.raises(UserError, match=message):
        validate_ledger(data, "quick")


def test_a_ledger_problem_outside_one_claim_is_named() -> None:
    from ltr_bench.experiments.ledger import select_claims, validate_ledger

    with pytest.raises(UserError, match="used twice"):
        validate_ledger(_ledger(claims=_ledger()["claims"] * 2), "quick")
    with pytest.raises(UserError, match="runs.r .* does not compose"):
        validate_ledger(_ledger(runs={"r": {"experiment": "fig9"}}), "quick")
    with pytest.raises(UserError, match="not a dataset config"):
        validate_ledger(
            _ledger(runs={"r": {"experiment": "fig2c", "datasets": ["mq2099"]}}), "quick"
        )
    ledger = validate_ledger(_ledger(), "quick")
    assert select_claims(ledger.claims, ["r"]) == ledger.claims  # a run name selects its claims
    with pytest.raises(UserError, match="neither claim ids nor run names"):
        select_claims(ledger.claims, ["zzz"])


@pytest.fixture
def ran(tmp_path: Path) -> Any:
    """An invocation of run ``r`` that ran and wrote SUMMARY as its summary.csv."""
    from ltr_bench.experiments.ledger import Invocation, RunSpec, Tables

    SUMMARY.to_csv(tmp_path / "summary.csv", index=False)
    return Invocation(RunSpec("r", "fig2c"), status="ran", tables=Tables(tmp_path))


def test_verdicts_at_full_and_quick_scale(ran: Any) -> None:
    from ltr_bench.experiments.ledger import Invocation, RunSpec, judge, markdown, parse_ledger

    _, (claim,) = parse_ledger(_ledger())
    inv = ran
    assert judge(claim, inv, True, "full")["verdict"] == "holds"
    assert (
        judge(claim, inv, False, "quick")["verdict"]
        == "too small to judge (scale=quick; would hold)"
    )
    high = parse_ledger(
        _ledger(
            claims=[
                {
                    **_ledger()["claims"][0],
                    "check": {**_ledger()["claims"][0]["check"], "at_least": 0.99},
                }
            ]
        )
    )[1][0]
    assert judge(high, inv, True, "full")["verdict"] == "does not hold"
    missing = parse_ledger(
        _ledger(
            claims=[
                {
                    **_ledger()["claims"][0],
                    "check": {**_ledger()["claims"][0]["check"], "file": "results.csv"},
                }
            ]
        )
    )[1][0]
    assert (
        judge(missing, inv, True, "full")["verdict"]
        == "not judged: the experiment wrote no results.csv"
    )
    broken = parse_ledger(
        _ledger(
            claims=[
                {
                    **_ledger()["claims"][0],
                    "check": {**_ledger()["claims"][0]["check"], "at_least": "high"},
                }
            ]
        )
    )[1][0]
    assert judge(broken, inv, True, "full")["verdict"].startswith(
        "not judged: the check failed: TypeError"
    )
    failed = Invocation(RunSpec("r", "fig2c"), status="failed", reason="exit 1")
    assert judge(claim, failed, True, "full")["verdict"] == "not judged: exit 1"
    absent = Invocation(RunSpec("r", "fig2c"), status="absent", reason="MQ2007 absent from /data")
    assert (
        judge(claim, absent, True, "full")["verdict"]
        == "not testable here: MQ2007 absent from /data"
    )
    # a claim's note goes with its row and under the table in claims.md
    noted = parse_ledger(_ledger(claims=[{**_ledger()["claims"][0], "note": "read with care"}]))[1][
        0
    ]
    rows = pd.DataFrame([judge(noted, inv, True, "full"), judge(claim, inv, True, "full")])
    assert list(rows["note"]) == ["read with care", ""]
    assert "## Notes\n\n- `c`: read with care\n" in markdown(rows, [], "full", "header")
    # a claim that does not hold without a note is flagged: every failure gets its likeliest reason
    from ltr_bench.experiments.ledger.pages import UNEXPLAINED

    bare = markdown(pd.DataFrame([judge(high, inv, True, "full")]), [], "full", "header")
    assert f"## Notes\n\n- `c`: {UNEXPLAINED}\n" in bare


def test_a_claims_evidence_is_measured_and_shown_with_its_note(ran: Any) -> None:
    from ltr_bench.experiments.ledger import judge, markdown, parse_ledger, validate_ledger

    check = _ledger()["claims"][0]["check"]
    evidence = {"label": "above 0.99", "check": {**check, "at_least": 0.99}}
    data = _ledger(claims=[{**_ledger()["claims"][0], "note": "why", "evidence": evidence}])
    _, (claim,) = parse_ledger(data)
    inv = ran
    row = judge(claim, inv, True, "full")
    ours_there = judge(
        parse_ledger(_ledger(claims=[{**data["claims"][0], "check": evidence["check"]}]))[1][0],
        inv,
        True,
        "full",
    )["ours"]
    assert row["verdict"] == "holds" and row["evidence"] == f"above 0.99: {ours_there}"
    assert f"- `c`: why Measured (above 0.99: {ours_there}).\n" in markdown(
        pd.DataFrame([row]), [], "full", "header"
    )
    for bad, message in (
        ({"check": evidence["check"]}, "`evidence` needs a `label`"),
        ({"label": "x", "check": {"file": "summary.csv"}}, "`evidence.check` needs a `_target_`"),
        ({"label": "x", "check": {**check, "at_leest": 1}}, "unexpected keyword argument"),
    ):
        broken = _ledger(claims=[{**_ledger()["claims"][0], "evidence": bad}])
        with pytest.raises(UserError, match=message):
            validate_ledger(broken, "quick")


def test_each_reason_in_the_ledger_names_its_kind() -> None:
    """A note that explains a failure starts with one of the four kinds of reason."""
    import yaml

    conf = Path(__file__).resolve().parents[2] / "conf" / "experiment" / "claims.yaml"
    notes = {c["id"]: c["note"] for c in yaml.safe_load(conf.read_text())["claims"] if "note" in c}
    assert len(notes) >= 20
    kinds = ("convention", "budget", "data", "a real disagreement")
    for cid, note in notes.items():
        assert note.startswith("Likeliest reason: "), cid
        kind = note.removeprefix("Likeliest reason: ")
        assert kind.startswith(kinds), cid
        assert "Evidence" in note, cid


# ------------------------------------------------------------------------------ a run in parts
PARTS = [["experiment.values=[0.0]"], ["experiment.values=[0.75]"]]


def test_a_run_in_parts_is_one_invocation_per_part_each_composed() -> None:
    from ltr_bench.experiments.ledger import validate_ledger

    ledger = validate_ledger(_ledger(runs={"r": {"experiment": "fig2c", "parts": PARTS}}), "quick")
    pieces = ledger.runs["r"].pieces()
    assert [p.name for p in pieces] == ["r.part1", "r.part2"]
    assert [list(ledger.specs[p.name]["values"]) for p in pieces] == [[0.0], [0.75]]
    assert ledger.runs["r"].command("quick") == (
        "ltr-bench experiment=fig2c scale=quick 'experiment.values=[0.0]'; "
        "ltr-bench experiment=fig2c scale=quick 'experiment.values=[0.75]'"
    )
    for bad in (["experiment.values=[0.0]"], [[]], [[1]], "x"):
        with pytest.raises(UserError, match=r"runs.r.parts: expected a list of override lists"):
            validate_ledger(_ledger(runs={"r": {"experiment": "fig2c", "parts": bad}}), "quick")
    with pytest.raises(UserError, match=r"runs.r.parts: a part is listed twice"):
        validate_ledger(
            _ledger(runs={"r": {"experiment": "fig2c", "parts": [*PARTS, PARTS[0]]}}), "quick"
        )


def test_a_run_in_parts_is_judged_on_the_union_of_its_parts_tables_once_all_have_run(
    tmp_path: Path,
) -> None:
    from ltr_bench.experiments.ledger import (
        Invocation,
        RunSpec,
        Tables,
        combine,
        judge,
        parse_ledger,
    )

    for name, models in (("one", ["A", "C"]), ("two", ["B"])):
        (tmp_path / name).mkdir()
        FOLDS[FOLDS["model"].isin(models)].to_csv(tmp_path / name / "folds.csv", index=False)
    run = RunSpec("r", "table1", parts=(("experiment.models=[A,C]",), ("experiment.models=[B]",)))
    one, two = run.pieces()
    done = [
        Invocation(
            one,
            "k1",
            "e",
            status="reused",
            run_id="id1",
            provenance="p1",
            tables=Tables(tmp_path / "one"),
        ),
        Invocation(two, "k2", "e", status="ran", run_id="id2", tables=Tables(tmp_path / "two")),
    ]
    both = combine(run, done)
    assert both.status == "ran" and both.run_id == "id1, id2" and both.parts == done
    assert list(both.tables["folds.csv"]["model"].unique()) == ["A", "C", "B"]
    # "A above the others" reads every model: the union of both parts
    claim = parse_ledger(
        _ledger(
            claims=[
                {
                    **_ledger()["claims"][0],
                    "check": {
                        "_target_": "ltr_bench.experiments.checks.above",
                        "file": "folds.csv",
                        "column": "score",
                        "by": "model",
                        "top": ["A"],
                    },
                }
            ]
        )
    )[1][0]
    assert judge(claim, both, True, "full")["verdict"] == "holds"
    assert "(closest: A vs B " in judge(claim, both, True, "full")["ours"]  # B is from part 2
    # one part not run yet: the run is not judged (a partial table could pass "above the others"
    # on the models it has), and the verdict says which part is missing
    waiting = Invocation(
        two, "k2", "e", status="not run", reason="no tracked run yet and experiment.execute=false"
    )
    partial = combine(run, [done[0], waiting])
    assert judge(claim, partial, True, "full")["verdict"] == (
        "not yet run: part 2/2 (r.part2): no tracked run yet and experiment.execute=false"
    )
    absent = combine(
        run, [Invocation(one, status="absent", reason="MQ2008 absent from /d"), waiting]
    )
    assert (
        judge(claim, absent, True, "full")["verdict"] == "not testable here: MQ2008 absent from /d"
    )


# ------------------------------------------------------------------------------ end to end
# Three cheap claims replace the ledger's list (its runs stay: fig2c, table1_mq2007_folds are used).
def _experiment_runs(db: Path, mlflow_experiment: str, name: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{db}")
    exp = client.get_experiment_by_name(mlflow_experiment)
    if exp is None:
        return []
    return client.search_runs(
        [exp.experiment_id], f"tags.`ltr.role` = 'experiment' and tags.`ltr.experiment` = '{name}'"
    )


CLAIMS = (
    "[{id: noise, source: 'Fig. 2c', statement: 'NDCG@20 >= 0.5 at sigma 0.75', paper: '>= 0.80',"
    " run: fig2c, check: {_target_: ltr_bench.experiments.checks.threshold, file: summary.csv,"
    " column: 'ndcg@20', where: {sigma: 0.75}, at_least: 0.5}},"
    " {id: small-noise, source: 'Fig. 2c', statement: 'marginal drop to sigma 0.25', paper: marginal,"
    " run: fig2c, check: {_target_: ltr_bench.experiments.checks.change, file: summary.csv,"
    " column: 'ndcg@20', x: sigma, start: 0.0, end: 0.25, at_least: -0.02}},"
    " {id: mq2007, source: 'Table 1', statement: 'MQ2007 values', paper: '0.540(12)', run: table1_mq2007_folds,"
    " check: {_target_: ltr_bench.experiments.checks.threshold, file: refits.csv, column: x,"
    " at_least: 0}}]"
)


def _ledger_cli(workdir: Path, out: str, *extra: str) -> None:
    from ltr_bench.cli.main import main

    main(
        [
            "experiment=claims",
            "scale=quick",
            f"experiment.claims={CLAIMS}",
            "threads=1",
            f"tracking.tracking_uri=sqlite:///{workdir}/mlflow.db",
            f"hydra.run.dir={workdir / out}",
            *extra,
        ]
    )


@pytest.mark.heavy
def test_the_ledger_runs_each_experiment_once_and_reuses_tracked_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_in_process: None
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(
        "LTR_DATA", str(tmp_path / "no_data")
    )  # MQ2007 absent, whatever the machine has
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    (tmp_path / "no_data").mkdir()
    db = tmp_path / "mlflow.db"

    _ledger_cli(tmp_path, "first")
    table = pd.read_csv(tmp_path / "first" / "claims.csv")
    verdicts = dict(zip(table["id"], table["verdict"]))
    assert verdicts["noise"].startswith("too small to judge (scale=quick; would ")
    assert verdicts["small-noise"].startswith(
        "too small to judge: no rows in summary.csv"
    )  # no 0.25
    assert verdicts["mq2007"] == "not testable here: MQ2007 absent from $LTR_DATA"  # not its path
    noise = table.set_index("id").loc["noise"]
    assert re.fullmatch(r"0\.\d+\(\d+\)", noise["ours"])  # the measured NDCG@20 at sigma 0.75
    runs = _experiment_runs(db, "paper_figures_quick", "fig2c")
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"  # two claims, one run
    assert noise["mlflow_run"] == runs[0].info.run_id
    assert (tmp_path / "first" / "runs" / "fig2c" / "summary.csv").is_file()
    md = (tmp_path / "first" / "claims.md").read_text()
    assert "| statement | paper's value | ours | verdict |" in md and "MQ2007 absent" in md
    assert re.search(
        rf"{runs[0].info.run_id} \(paper_figures_quick; \d{{4}}-\d\d-\d\d \d\d:\d\d UTC", md
    )

    _ledger_cli(tmp_path, "second")
    again = pd.read_csv(tmp_path / "second" / "claims.csv")
    assert len(_experiment_runs(db, "paper_figures_quick", "fig2c")) == 1  # re-used, not re-run
    assert not (tmp_path / "second" / "runs").exists()
    assert (
        again["run_status"].fillna("") == table["run_status"].fillna("").replace("ran", "reused")
    ).all()
    assert again.set_index("id").loc["noise", "ours"] == noise["ours"]
    ledgers = _experiment_runs(db, "paper_claims_quick", "claims")
    assert len(ledgers) == 2
    from mlflow.tracking import MlflowClient

    artifacts = {
        a.path for a in MlflowClient(f"sqlite:///{db}").list_artifacts(ledgers[0].info.run_id)
    }
    assert {"claims.md", "claims.csv", "summary.csv"} <= artifacts

    # another seed is another invocation; with execute=false nothing is trained
    _ledger_cli(tmp_path, "third", "seed=1", "experiment.execute=false")
    third = pd.read_csv(tmp_path / "third" / "claims.csv").set_index("id")
    assert (
        third.loc["noise", "verdict"]
        == "not yet run: no tracked run or bundle yet and experiment.execute=false"
    )
    assert len(_experiment_runs(db, "paper_figures_quick", "fig2c")) == 1


def test_provenance_says_when_a_run_started_how_long_it_took_and_its_commit() -> None:
    from types import SimpleNamespace

    from ltr_bench import tracking_keys as keys
    from ltr_bench.experiments.ledger import provenance

    start = 1_795_000_000_000  # ms since the epoch
    run = SimpleNamespace(
        info=SimpleNamespace(start_time=start, end_time=start + 52 * 60_000 + 20_000),
        data=SimpleNamespace(tags={keys.TAG_GIT_COMMIT: "0123456789abcdef"}),
    )
    assert provenance(run) == "2026-11-18 11:06 UTC, 52 min, commit 0123456789"
    run.info.end_time, run.data.tags = start + 42_000, {}
    assert provenance(run) == "2026-11-18 11:06 UTC, 42 s"
    run.info.end_time = None  # still running or killed: no duration
    assert provenance(run) == "2026-11-18 11:06 UTC"
    assert provenance(None) == ""


PARTS_CLAIM = (
    "[{id: drop, source: 'Fig. 2c', statement: 'NDCG@20 changes from sigma 0 to 0.75',"
    " paper: some, run: noise_parts, check: {_target_: ltr_bench.experiments.checks.change,"
    " file: summary.csv, column: 'ndcg@20', x: sigma, start: 0.0, end: 0.75, at_least: -1.0}}]"
)
PARTS_RUN = (
    "+experiment.runs.noise_parts={experiment: fig2c, parts: "
    "[['experiment.values=[0.0]'], ['experiment.values=[0.75]']]}"
)


@pytest.mark.heavy
def test_a_run_in_parts_runs_each_part_once_and_judges_their_union(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli_in_process: None
) -> None:
    """Each part is its own tracked invocation (fig2c at one sigma each); the claim needs both."""
    from ltr_bench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    db = tmp_path / "mlflow.db"

    def ledger(out: str, *extra: str) -> pd.DataFrame:
        main(
            [
                "experiment=claims",
                "scale=quick",
                f"experiment.claims={PARTS_CLAIM}",
                PARTS_RUN,
                "threads=1",
                f"tracking.tracking_uri=sqlite:///{db}",
                f"hydra.run.dir={tmp_path / out}",
                *extra,
            ]
        )
        return pd.read_csv(tmp_path / out / "claims.csv").set_index("id")

    first = ledger("first")
    assert first.loc["drop", "verdict"].startswith("too small to judge (scale=quick; would ")
    # the change from sigma 0 (part 1) to sigma 0.75 (part 2): only the union has both ends
    assert re.fullmatch(
        r"0\.\d+\(\d+\) -> 0\.\d+\(\d+\) \([+-]0\.\d{4}, [+-]\d+\.\dσ\)", first.loc["drop", "ours"]
    )
    runs = _experiment_runs(db, "paper_figures_quick", "fig2c")
    assert len(runs) == 2 and {r.info.status for r in runs} == {"FINISHED"}
    assert set(first.loc["drop", "mlflow_run"].split(", ")) == {r.info.run_id for r in runs}
    for k, sigma in ((1, 0.0), (2, 0.75)):
        part = pd.read_csv(tmp_path / "first" / "runs" / f"noise_parts.part{k}" / "summary.csv")
        assert list(part["sigma"].unique()) == [sigma]
    md = (tmp_path / "first" / "claims.md").read_text()
    assert (
        "| noise_parts.part1 | `ltr-bench experiment=fig2c scale=quick 'experiment.values=[0.0]'` | ran |"
        in md
    )

    again = ledger("second", "experiment.execute=false")
    assert (
        again.loc["drop", "run_status"] == "reused"
        and again.loc["drop", "ours"] == first.loc["drop", "ours"]
    )
    assert len(_experiment_runs(db, "paper_figures_quick", "fig2c")) == 2  # re-used, not re-run


def test_the_counts_line_agrees_in_number() -> None:
    from ltr_bench.experiments.ledger.verdicts import counts_line

    rows = pd.DataFrame({"verdict": ["holds", "holds", "does not hold"]})
    assert counts_line(rows) == "3 claims: 2 hold, 1 does not hold"
    rows = pd.DataFrame({"verdict": ["holds", "does not hold", "does not hold"]})
    assert counts_line(rows) == "3 claims: 1 holds, 2 do not hold"


def test_a_run_spec_composed_once_per_experiment_equals_its_own_composition() -> None:
    """The ledger composes each experiment once and applies a run's ``experiment.*`` overrides to
    a copy as Hydra would: the same spec as composing the run's command, interpolations (a
    budget the sweep overrides read), added keys and the scale's values included."""
    from omegaconf import OmegaConf

    from ltr_bench.experiments.ledger import RunSpec, run_spec_config

    runs = [
        RunSpec("a", "table1", ("experiment.datasets=[mq2008]", "experiment.n_trials=7")),
        RunSpec(
            "b",
            "table1",
            (
                "experiment.models=[v]",
                '+experiment.model_variants={v:["model=listnet_star","loss=listmle"]}',
            ),
        ),
        RunSpec("c", "fig2c", ("experiment.values=[0.0,0.75]",)),
        RunSpec("d", "fig3_letor", ('experiment.data.overrides=["dataset=mslr_web10k"]',)),
    ]
    for scale in ("full", "quick"):
        composed: dict = {}
        for run in runs:
            alone = OmegaConf.to_container(run_spec_config(run, scale, 0, ["threads=1"]))
            shared = run_spec_config(run, scale, 0, ["threads=1"], composed)
            assert OmegaConf.to_container(shared) == alone, (run.name, scale)
        assert len(composed) == 3  # table1, fig2c, fig3_letor
    a = run_spec_config(runs[0], "full", 0, [], {})
    assert a.n_trials == 7 and "hydra.sweeper.n_trials=7" in a.sweep_overrides
