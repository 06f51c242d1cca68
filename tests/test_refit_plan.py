"""ltr_bench.refit_plan: reading a finished sweep back into refit jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ltr_bench.errors import UserError
from ltr_bench.refit_plan import plan_refits
from ltr_bench.sweeper.search.space import format_value

SWEEP_TASK = """hydra:
  overrides:
    task:
    - model=direct_ranker
    - dataset=mq2008
    - protocol=letor_folds
    - dataset.fold=1,2
    - optimizer.lr=interval(0.0001,0.1)
    - activation=tanh,sigmoid
    - threads=1
    - hydra/sweeper=ltr_optuna
"""


def _study(name: str, fold: int | None, lr: float) -> dict[str, Any]:
    return {
        "name": "ltr_optuna",
        "study_name": name,
        "best_value": 0.7,
        "best_params": {"optimizer.lr": lr, "activation": "sigmoid"},
        "best_overrides": [f"optimizer.lr={lr}", "activation=sigmoid"],
        "study_overrides": [f"dataset.fold={fold}"] if fold else [],
    }


def test_refit_repeats_the_sweep_command_with_the_best_parameters(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "multirun.yaml").write_text(SWEEP_TASK)
    res = tmp_path / "optimization_results.yaml"
    res.write_text(yaml.safe_dump(_study("s", None, 0.001)))
    (refit,) = plan_refits(["optimizer.lr=0.5", "seed=3", f"refit_best={tmp_path}"])
    assert refit.study_name == "s"
    assert refit.output_dir == str(tmp_path / "refit" / "s" / "seed3") and refit.seed == 3
    assert refit.overrides == [
        # the sweep's fixed overrides (ranges and hydra keys dropped), then the user's
        "model=direct_ranker",
        "dataset=mq2008",
        "protocol=letor_folds",
        "threads=1",
        "seed=3",
        # the best parameters replace the user's optimizer.lr
        "optimizer.lr=0.001",
        "activation=sigmoid",
        "protocol.objective=final",
        "sweep.study_name=s",
        f"refit_best={res}",
        f"hydra.run.dir={tmp_path}/refit/s/seed3",
    ]
    # A second refit with the same seed gets a folder of its own: nothing is overwritten.
    (again,) = plan_refits(["seed=3", f"refit_best={tmp_path}"])
    assert again.output_dir == str(tmp_path / "refit" / "s" / "seed3-2")
    # Without seed= on the command line the refit runs with the sweep's seed (multirun.yaml).
    (tmp_path / "multirun.yaml").write_text(SWEEP_TASK + "seed: 5\n")
    (own,) = plan_refits([f"refit_best={tmp_path}"])
    assert own.seed == 5 and own.output_dir == str(tmp_path / "refit" / "s" / "seed5")
    assert plan_refits(["seed=1"]) is None


def test_a_refit_under_other_settings_has_folders_apart_from_the_sweeps_refits(
    tmp_path: Path,
) -> None:
    import json

    import yaml

    from ltr_bench.refit_plan import find_refits

    (tmp_path / "multirun.yaml").write_text(SWEEP_TASK)
    (tmp_path / "optimization_results.yaml").write_text(yaml.safe_dump(_study("s", None, 0.1)))
    (own,) = plan_refits(["seed=0", f"refit_best={tmp_path}"])
    (other,) = plan_refits(["seed=0", "eval=authors", f"refit_best={tmp_path}"], "refit-authors")
    assert own.output_dir == str(tmp_path / "refit" / "s" / "seed0")
    assert other.output_dir == str(tmp_path / "refit-authors" / "s" / "seed0")
    assert "eval=authors" in other.overrides
    for refit, value in ((own, 0.7), (other, 0.5)):
        config = {"sweep": {"study_name": "s"}, "seed": 0}
        (Path(refit.output_dir) / "results.json").write_text(
            json.dumps({"config": config, "value": value})
        )
    assert [r.results["value"] for r in find_refits(tmp_path)[0]] == [0.7]
    assert [r.results["value"] for r in find_refits(tmp_path, "refit-authors")[0]] == [0.5]


def test_refit_of_a_sweep_with_a_study_per_fold(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "multirun.yaml").write_text(SWEEP_TASK)
    (tmp_path / "optimization_results.yaml").write_text(
        yaml.safe_dump(
            {"name": "ltr_optuna", "studies": [_study("s-f1", 1, 0.01), _study("s-f2", 2, 0.02)]}
        )
    )
    both = plan_refits([f"refit_best={tmp_path}", "hydra.run.dir=out"])
    assert [r.study_name for r in both] == ["s-f1", "s-f2"]
    assert "dataset.fold=2" in both[1].overrides and "optimizer.lr=0.02" in both[1].overrides
    assert all(r.output_dir is None and r.overrides.count("hydra.run.dir=out") == 1 for r in both)
    assert [r.label for r in both] == ["dataset.fold=1", "dataset.fold=2"]
    # Long study names (the sweeper's default names are long) still get distinct folders.
    long = "x" * 200
    (tmp_path / "optimization_results.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "ltr_optuna",
                "studies": [_study(long + "-f1", 1, 0.01), _study(long + "-f2", 2, 0.02)],
            }
        )
    )
    dirs = [r.output_dir for r in plan_refits([f"refit_best={tmp_path}"])]
    assert len(set(dirs)) == 2 and all(len(Path(d).name) <= 120 for d in dirs)
    (tmp_path / "optimization_results.yaml").write_text(
        yaml.safe_dump(
            {"name": "ltr_optuna", "studies": [_study("s-f1", 1, 0.01), _study("s-f2", 2, 0.02)]}
        )
    )
    (only,) = plan_refits([f"+refit_best={tmp_path}", "dataset.fold=2"])
    assert only.study_name == "s-f2" and only.overrides.count("dataset.fold=2") == 1
    with pytest.raises(UserError, match="no study matches"):
        plan_refits([f"refit_best={tmp_path}", "dataset.fold=5"])


def test_refit_with_a_seed_list_repeats_every_study_per_seed(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "multirun.yaml").write_text(SWEEP_TASK)
    (tmp_path / "optimization_results.yaml").write_text(
        yaml.safe_dump(
            {"name": "ltr_optuna", "studies": [_study("s-f1", 1, 0.01), _study("s-f2", 2, 0.02)]}
        )
    )
    refits = plan_refits([f"refit_best={tmp_path}", "seed=range(0,3)", "threads=2"])
    assert [(r.study_name, r.seed) for r in refits] == [
        ("s-f1", 0),
        ("s-f1", 1),
        ("s-f1", 2),
        ("s-f2", 0),
        ("s-f2", 1),
        ("s-f2", 2),
    ]
    for r in refits:
        # one seed per run, where the user wrote the list; the rest as for one seed
        assert [a for a in r.overrides if a.startswith("seed=")] == [f"seed={r.seed}"]
        assert r.overrides.index(f"seed={r.seed}") < r.overrides.index("threads=2")
        assert r.output_dir == str(tmp_path / "refit" / r.study_name / f"seed{r.seed}")
    assert {r.label for r in refits} == {"dataset.fold=1", "dataset.fold=2"}
    # one seed is an ordinary override, not a list
    (one, _) = plan_refits([f"refit_best={tmp_path}", "seed=7"])
    assert one.seed == 7 and "seed=7" in one.overrides and one.output_dir.endswith("/seed7")
    with pytest.raises(UserError, match="integers"):
        plan_refits([f"refit_best={tmp_path}", "seed=a,b"])
    with pytest.raises(UserError, match="repeated"):
        plan_refits([f"refit_best={tmp_path}", "seed=1,1"])


def test_refit_summary_averages_seeds_within_a_study_before_the_folds() -> None:
    from ltr_bench.cli.refits import refit_summary

    rows = [
        ("dataset.fold=1", 0, {"ndcg@10": 0.70, "map": 0.60}),
        ("dataset.fold=1", 1, {"ndcg@10": 0.72, "map": 0.62}),
        ("dataset.fold=2", 0, {"ndcg@10": 0.74, "map": 0.64}),
        ("dataset.fold=2", 1, {"ndcg@10": 0.78, "map": 0.66}),
    ]
    text = refit_summary(rows)
    lines = text.splitlines()
    assert lines[0] == "refit test metrics per study (mean over seeds 0, 1)"
    table = {ln.split()[0]: ln.split()[1:] for ln in lines[2:] if ln.strip()}
    assert table["dataset.fold=1"] == ["0.7100", "0.6100"]
    assert table["dataset.fold=2"] == ["0.7600", "0.6500"]
    # mean over folds of the seed means: 0.735, SE = |0.76 - 0.71| / 2 = 0.025
    assert table["mean(SE)"] == ["0.735(25)", "0.630(20)"]
    # per seed: the mean over folds; their SD says how far one seed's figure moves
    assert table["seed=0"] == ["0.7200", "0.6200"] and table["seed=1"] == ["0.7500", "0.6400"]
    assert [float(v) for v in table["SD(seeds)"]] == pytest.approx([0.0212, 0.0141], abs=1e-4)
    # one seed per study: the plain table, no seed block
    plain = refit_summary([(label, None, m) for label, seed, m in rows if seed == 0])
    assert plain.splitlines()[0] == "refit test metrics per study" and "SD(seeds)" not in plain
    assert "0.720(20)" in plain


def test_refit_errors_are_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="refit_best=.*no such file or folder"):
        plan_refits(["refit_best=/no/such/file.yaml"])
    res = tmp_path / "optimization_results.yaml"
    res.write_text("best_value: 1\n")
    with pytest.raises(UserError, match="best_params"):
        plan_refits([f"refit_best={res}"])
    res.write_text("study_name: s\nbest_params: null\nbest_overrides: null\n")
    with pytest.raises(UserError, match="no completed trial"):
        plan_refits([f"refit_best={res}"])
    # A results file written with plain best_params (the old plugin's format) works too.
    res.write_text("best_params:\n  model.hidden: [64, 32]\n  optimizer.lr: 0.001\n")
    (r,) = plan_refits([f"refit_best={res}"])
    assert "model.hidden=[64,32]" in r.overrides and "optimizer.lr=0.001" in r.overrides


@pytest.mark.parametrize(
    "value",
    [
        0.001,
        1e-4,
        3,
        True,
        None,
        "tanh",
        [64, 32],
        "a b",
        "12-3",
        "/tmp/x y/z.yaml",
        [0.5, "relu"],
        "a\\b",
        {"k": [1, "x,y"]},
    ],
)
def test_override_values_round_trip_through_hydras_parser(value: Any) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    text = f"key={format_value(value)}"
    parsed = OverridesParser.create().parse_override(text).value()
    assert parsed == value


# Strings a study name, a path or a swept value may hold: backslashes, quotes, commas,
# brackets, '=', spaces, non-ASCII (no '${': that is an interpolation to Hydra, on purpose).
_tricky = st.text(st.sampled_from(list("ab\\'\",[]{}()=: \té€ß0-./")), min_size=1, max_size=16)


@settings(max_examples=150, deadline=None)
@given(name=_tricky, value=st.one_of(_tricky, st.lists(_tricky, max_size=3)))
def test_a_refit_receives_exactly_the_study_name_and_value_the_sweep_chose(
    tmp_path_factory: pytest.TempPathFactory, name: str, value: Any
) -> None:
    """plan_refits writes overrides Hydra parses back to the same strings (a backslash used to
    come back doubled: 'a\\b' -> 'a\\\\b')."""
    import yaml
    from hydra.core.override_parser.overrides_parser import OverridesParser

    folder = tmp_path_factory.mktemp("sweep")
    (folder / "optimization_results.yaml").write_text(
        yaml.safe_dump({"study_name": name, "best_params": {"model.x": value}}, allow_unicode=True)
    )
    (refit,) = plan_refits([f"refit_best={folder}"])
    parser = OverridesParser.create()
    parsed = {o.split("=", 1)[0]: parser.parse_override(o).value() for o in refit.overrides}
    assert parsed["sweep.study_name"] == name
    assert parsed["model.x"] == value
    assert parsed["refit_best"] == str(folder / "optimization_results.yaml")


def test_refit_workers_follow_refit_jobs_and_never_exceed_the_refits() -> None:
    import os

    from ltr_bench.cli.refits import refit_workers
    from ltr_bench.errors import UserError

    assert refit_workers(["refit_jobs=2"], 5) == 2
    assert refit_workers(["refit_jobs=8"], 3) == 3
    assert refit_workers(["refit_jobs=1"], 3) == 1
    assert refit_workers([], 20) == min(20, os.cpu_count() or 1)
    assert refit_workers(["refit_jobs=null"], 1) == 1
    for bad in ("0", "-1", "two"):
        with pytest.raises(UserError, match=f"refit_jobs={bad}"):
            refit_workers([f"refit_jobs={bad}"], 3)
