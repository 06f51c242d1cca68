"""Every experiment at scale=quick through the ``ltr-bench`` command (in-process), outputs checked.

The synthetic experiments run in one multirun process (one job each); the LETOR tables run on a
generated five-fold LETOR folder (so nothing hides behind a skip) and, when present, on MQ2008.
Checked: the CSVs' columns and value ranges against the grid in the run's own experiment.yaml,
the PNGs, and the MLflow parent run with its artifacts (plus the tracked cell runs for tables).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
import yaml
from mlflow.tracking import MlflowClient

from ltr_bench.data.datasets import resolve_data_root
from tests.experiments.conftest import run_cli

SYNTHETIC = ["fig2a", "fig2b", "fig2c", "fig2d", "fig5_size", "fig5_ratio", "fig3"]
MEAN_SE = re.compile(r"^(\d+\.\d+)(\(\d+\))?$")


def _outputs(root: Path) -> dict[str, Path]:
    """Output folder per experiment name (from each job's experiment.yaml)."""
    out = {}
    for spec in root.glob("*/experiment.yaml"):
        out[yaml.safe_load(spec.read_text())["name"]] = spec.parent
    return out


def _is_png(path: Path) -> bool:
    return (
        path.is_file()
        and path.stat().st_size > 2000
        and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    )


def _parent_run(workdir: Path, mlflow_experiment: str, name: str):
    client = MlflowClient(f"sqlite:///{workdir}/mlflow.db")
    exp = client.get_experiment_by_name(mlflow_experiment)
    assert exp is not None, f"no MLflow experiment {mlflow_experiment}"
    runs = client.search_runs(
        [exp.experiment_id], f"tags.`ltr.role` = 'experiment' and tags.`ltr.experiment` = '{name}'"
    )
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    artifacts = {a.path for a in client.list_artifacts(runs[0].info.run_id)}
    return client, runs[0], artifacts


@pytest.fixture(scope="module")
def synthetic_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path], str]:
    workdir = tmp_path_factory.mktemp("synthetic")
    proc = run_cli(
        [
            "-m",
            f"experiment={','.join(SYNTHETIC)}",
            "scale=quick",
            f"hydra.sweep.dir={workdir}/multirun",
        ],
        workdir,
    )
    return workdir, _outputs(workdir / "multirun"), proc.stdout + proc.stderr


@pytest.mark.parametrize("name", [n for n in SYNTHETIC if n != "fig3"])
def test_sensitivity_experiment_outputs(synthetic_runs, name: str) -> None:
    workdir, outputs, log = synthetic_runs
    _check_sensitivity(workdir, outputs[name], name, log, "ndcg@20")


def _check_sensitivity(workdir: Path, out: Path, name: str, log: str, metric: str) -> None:
    spec = yaml.safe_load((out / "experiment.yaml").read_text())
    summary = pd.read_csv(out / "summary.csv")
    results = pd.read_csv(out / "results.csv")
    x = spec["x"]
    assert {"series", x, "model", metric, f"{metric}_se", "repetitions", "train_docs"} <= set(
        summary.columns
    )
    n_points = len(spec["values"]) * len(spec["series"]) * len(spec["models"])
    assert len(summary) == n_points and len(results) == n_points * spec["repetitions"]
    assert (summary["repetitions"] == spec["repetitions"]).all()
    assert summary[metric].between(0.0, 1.0).all() and (summary[f"{metric}_se"] >= 0).all()
    assert sorted(summary[x].unique().tolist()) == sorted(spec["values"])
    assert _is_png(out / f"{name}.png")
    assert f"{name}: " in log and "100%" in log  # the progress line
    _, run, artifacts = _parent_run(workdir, spec["mlflow_experiment"], name)
    assert {"summary.csv", "results.csv", f"{name}.png", "experiment.yaml"} <= artifacts
    assert any(k.startswith(metric.replace("@", "_at_")) for k in run.data.metrics)


def test_label_noise_lowers_ndcg_at_quick_scale(synthetic_runs) -> None:
    summary = pd.read_csv(synthetic_runs[1]["fig2c"] / "summary.csv").set_index("sigma")
    assert summary.loc[0.0, "ndcg@20"] > summary.loc[0.75, "ndcg@20"] + 0.05


def test_label_ratio_is_the_share_kept(synthetic_runs) -> None:
    summary = pd.read_csv(synthetic_runs[1]["fig5_ratio"] / "summary.csv")
    ratios = summary.groupby("keep_fraction")["relevant_ratio"].mean()
    assert ratios.is_monotonic_increasing and abs(ratios.loc[1.0] - 1.0) < 0.1  # 3 vs 3 classes


def test_neighbours_experiment_outputs(synthetic_runs) -> None:
    workdir, outputs, _ = synthetic_runs
    out = outputs["fig3"]
    spec = yaml.safe_load((out / "experiment.yaml").read_text())
    acc = _check_accuracy(out, spec)
    assert (acc["n_classes"] == spec["data"]["n_classes"]).all()
    assert (acc["accuracy_list"] > acc["chance"]).all()  # the peaks carry class information
    seq = pd.read_csv(out / "neighbours_synthetic.csv")
    assert len(seq) == spec["panels"]["synthetic"]["list_size"] - 1
    assert (seq["r"] >= -1e-9).all()  # neighbours in model order: r(d_n, d_n+1) >= 0
    assert seq["boundary"].sum() == spec["data"]["n_classes"] - 1
    assert _is_png(out / "fig3_synthetic.png")
    _, _, artifacts = _parent_run(workdir, spec["mlflow_experiment"], "fig3")
    assert {
        "summary.csv",
        "accuracy.csv",
        "neighbours_synthetic.csv",
        "fig3_synthetic.png",
    } <= artifacts


def _check_accuracy(out: Path, spec: dict) -> pd.DataFrame:
    acc = pd.read_csv(out / "accuracy.csv")
    assert len(acc) == spec["repetitions"] * len(spec["panels"])
    assert set(acc["panel"]) == set(spec["panels"])
    for col in ("accuracy_list", "accuracy_test", "chance", "oracle"):
        assert acc[col].between(0.0, 1.0).all()
    for panel in spec["panels"]:
        assert _is_png(out / f"{spec['name']}_{panel}.png")
    return acc


@pytest.mark.heavy
def test_letor_variants_of_the_figures_on_a_generated_letor_folder(
    tmp_path: Path, letor_dir: Path
) -> None:
    proc = run_cli(
        [
            "-m",
            "experiment=fig3_letor,fig5_size_letor,fig5_ratio_letor",
            "scale=quick",
            f'++experiment.data.overrides=["dataset=letor","dataset.path={letor_dir}"]',
            f"hydra.sweep.dir={tmp_path}/multirun",
        ],
        tmp_path,
    )
    outputs = _outputs(tmp_path / "multirun")
    for name in ("fig5_size_letor", "fig5_ratio_letor"):
        _check_sensitivity(tmp_path, outputs[name], name, proc.stdout + proc.stderr, "ndcg@10")
    spec = yaml.safe_load((outputs["fig3_letor"] / "experiment.yaml").read_text())
    acc = _check_accuracy(outputs["fig3_letor"], spec)
    assert (acc["n_list"] >= 6).all()  # the largest test query of each fold


def _cell_values(table: pd.DataFrame) -> list[float]:
    values = []
    for cell in table.drop(columns="row").to_numpy().ravel():
        m = MEAN_SE.match(str(cell))
        assert m, f"not a mean(SE) cell: {cell!r}"
        values.append(float(m.group(1)))
    return values


def _check_table2(workdir: Path, out: Path, n_folds: int) -> None:
    spec = yaml.safe_load((out / "experiment.yaml").read_text())
    table = pd.read_csv(out / "table2.csv")
    assert table["row"].tolist() == list(spec["rows"])
    assert len(table.columns) == 1 + len(spec["columns"]) * len(spec["datasets"])
    assert all(0.0 <= v <= 1.0 for v in _cell_values(table))
    cells = pd.read_csv(out / "cells.csv")
    assert len(cells) == len(spec["rows"]) * len(spec["columns"]) * n_folds
    assert cells["test/ndcg@10"].between(0, 1).all()
    assert _is_png(out / "table2.png")
    client, run, artifacts = _parent_run(workdir, spec["mlflow_experiment"], "table2")
    assert {"table2.csv", "table2.md", "cells.csv", "table2.png", "summary.csv"} <= artifacts
    protocol_runs = client.search_runs([run.info.experiment_id], "tags.`ltr.role` = 'protocol'")
    assert len(protocol_runs) == len(spec["rows"]) * len(spec["columns"])
    assert {r.info.run_id for r in protocol_runs} == set(cells["mlflow_run_id"])


@pytest.mark.heavy
def test_tables_2_and_3_on_a_generated_letor_folder(tmp_path: Path, letor_dir: Path) -> None:
    # ++: a multirun checks its fixed overrides before an experiment is chosen
    run_cli(
        [
            "-m",
            "experiment=table2,table3",
            "scale=quick",
            "++experiment.datasets=[letor]",
            f'++experiment.cell_overrides=["dataset.path={letor_dir}"]',
            f"hydra.sweep.dir={tmp_path}/multirun",
        ],
        tmp_path,
    )
    outputs = _outputs(tmp_path / "multirun")
    _check_table2(tmp_path, outputs["table2"], n_folds=2)
    out = outputs["table3"]
    spec = yaml.safe_load((out / "experiment.yaml").read_text())
    table = pd.read_csv(out / "table3.csv")
    assert table["row"].tolist() == list(spec["rows"])
    cells = pd.read_csv(out / "cells.csv")
    assert (cells["time_fit_s"] > 0).all() and (cells["time_read_s"] > 0).all()
    assert (out / "report" / "table3.md").is_file() and (out / "report" / "table1.md").is_file()
    _, _, artifacts = _parent_run(tmp_path, spec["mlflow_experiment"], "table3")
    assert {"table3.csv", "table3.png", "report"} <= artifacts


@pytest.mark.heavy
def test_table1_sweeps_refits_and_reports_on_a_generated_letor_folder(
    tmp_path: Path, letor_dir: Path
) -> None:
    run_cli(
        [
            "experiment=table1",
            "scale=quick",
            "experiment.datasets=[letor]",
            f'experiment.cell_overrides=["dataset.path={letor_dir}"]',
            '+experiment.extra_refits={authors:["eval=authors"]}',
            f"hydra.run.dir={tmp_path}/out",
        ],
        tmp_path,
    )
    out = tmp_path / "out"
    spec = yaml.safe_load((out / "experiment.yaml").read_text())
    refits = pd.read_csv(out / "refits.csv")
    # the extra refit: the same studies once more under eval=authors, untracked (counted below)
    authors = pd.read_csv(out / "refits-authors.csv")
    assert sorted(authors["study"].unique()) == sorted(refits["study"].unique())
    assert authors["mlflow_run_id"].isna().all()
    for path in out.glob("sweeps/*/*/*/refit-authors/*/*/results.json"):
        assert json.loads(path.read_text())["config"]["eval"]["name"] == "authors"
    assert set(refits["variant"]) == set(spec["run_variants"])
    assert set(refits["model"]) == set(spec["models"])
    assert refits["test/ndcg@10"].between(0, 1).all() and refits["test/map"].between(0, 1).all()
    table = pd.read_csv(out / "table1.csv")
    assert sorted(table["row"]) == sorted(spec["models"])
    assert all(0.0 <= v <= 1.0 for v in _cell_values(table))
    for variant in spec["run_variants"]:
        report = out / "report" / variant
        assert (report / "table1.csv").is_file() and (report / "report.md").is_file()
        assert any(_is_png(p) for p in (report / "pvalues").glob("*.png"))
    client, run, artifacts = _parent_run(tmp_path, spec["mlflow_experiment"], "table1")
    assert {"table1.csv", "refits.csv", "table1.png", "report"} <= artifacts
    for variant in spec["run_variants"]:  # every cell is an ordinary tracked refit run
        exp = client.get_experiment_by_name(f"{spec['mlflow_experiment']}_{variant}")
        refit_runs = client.search_runs([exp.experiment_id], "tags.`ltr.refit` = 'true'")
        assert len(refit_runs) == len(refits[refits["variant"] == variant]["study"].unique())


@pytest.mark.heavy
def test_table1s_sweeps_in_process_give_what_their_own_processes_give(
    tmp_path: Path, letor_dir: Path
) -> None:
    """``experiment.in_process`` (the quick scale's default) against a process per sweep: the same
    folds, refits and metrics (studies are named after their store's path), the sweep's output in
    its log either way."""
    refits, studies = {}, {}
    for in_process in ("true", "false"):
        work = tmp_path / in_process
        work.mkdir()
        run_cli(
            [
                "experiment=table1",
                "scale=quick",
                "experiment.datasets=[letor]",
                "experiment.models=[adarank]",
                f"experiment.in_process={in_process}",
                f'experiment.cell_overrides=["dataset.path={letor_dir}"]',
                f"hydra.run.dir={work}/out",
            ],
            work,
        )
        found = pd.read_csv(work / "out" / "refits.csv")
        columns = ["fold", "model", "vali/ndcg@10", "test/ndcg@10", "test/map"]
        refits[in_process] = found.sort_values("fold")[columns].reset_index(drop=True)
        (log,) = (work / "out").glob("sweeps/*/*/adarank/sweep.log")
        studies[in_process] = log.read_text().count("[HYDRA] Trial 0 of study")  # the sweeper's
    pd.testing.assert_frame_equal(refits["true"], refits["false"])
    assert studies["true"] == studies["false"] > 0


def _mq2008_present() -> bool:
    return (resolve_data_root() / "MQ2008" / "Fold5" / "test.txt").is_file()


@pytest.mark.realdata
@pytest.mark.slow  # the same checks as on the generated LETOR folder above; real data adds time
@pytest.mark.skipif(not _mq2008_present(), reason="MQ2008 not in the data root ($LTR_DATA)")
def test_table2_on_mq2008(tmp_path: Path) -> None:
    run_cli(["experiment=table2", "scale=quick", f"hydra.run.dir={tmp_path}/out"], tmp_path)
    _check_table2(tmp_path, tmp_path / "out", n_folds=2)


@pytest.mark.realdata
@pytest.mark.slow
@pytest.mark.skipif(not _mq2008_present(), reason="MQ2008 not in the data root ($LTR_DATA)")
def test_table1_on_mq2008(tmp_path: Path) -> None:
    run_cli(["experiment=table1", "scale=quick", f"hydra.run.dir={tmp_path}/out"], tmp_path)
    table = pd.read_csv(tmp_path / "out" / "table1.csv")
    assert all(0.3 <= v <= 1.0 for v in _cell_values(table))


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["experiment=fig2c", "scale=huge"],
            "scale=huge is not a scale of this experiment; choose one of [full, quick]",
        ),
        (
            ["experiment=fig5_models"],  # a base shared by experiments is not an option
            "experiment=fig5_models is not an option of the config group 'experiment'",
        ),
    ],
)
def test_experiment_input_errors_are_one_sentence(
    tmp_path: Path, cli, args: list[str], message: str
) -> None:
    proc = cli(*args, cwd=tmp_path)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
