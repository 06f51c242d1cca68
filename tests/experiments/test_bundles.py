"""Results bundles of the claims ledger: written with their provenance, verified before use, and
re-used by a ledger with ``experiment.execute=false`` in a clean MLflow store (nothing trained);
a corrupt or mismatched bundle is one sentence naming the file (exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from ltr_bench.errors import UserError
from ltr_bench.experiments.ledger.bundles import (
    MAX_FILE_BYTES,
    PROVENANCE,
    REQUIRED,
    SUFFIXES,
    folder,
    read_bundle,
    write_bundle,
)
from tests.experiments.test_claims import SUMMARY, _experiment_runs
from tests.inprocess import run_ltr_bench

# One claim on fig2c's summary.csv (quick scale: a verdict "too small to judge (... would ...)").
CLAIM = (
    "[{id: noise, source: 'Fig. 2c', statement: 'NDCG@20 >= 0.5 at sigma 0.75', paper: '>= 0.80',"
    " run: fig2c, check: {_target_: ltr_bench.experiments.checks.threshold, file: summary.csv,"
    " column: 'ndcg@20', where: {sigma: 0.75}, at_least: 0.5}}]"
)


def _fig2c_quick() -> tuple[str, dict, dict]:
    """The results key, resolved spec and deciding inputs of the ledger's fig2c run at quick
    scale."""
    from omegaconf import OmegaConf

    from ltr_bench.experiments.common import invocation_inputs
    from ltr_bench.experiments.ledger import RunSpec, run_spec_config
    from ltr_bench.experiments.results_key import results_key

    spec = run_spec_config(RunSpec("fig2c", "fig2c"), "quick", 0, [])
    inputs = invocation_inputs("fig2c", "quick", 0, spec, [])
    return results_key(inputs), OmegaConf.to_container(spec), inputs


def _record(key: str, spec: dict, inputs: dict) -> dict:
    """A bundle's provenance as the ledger writes it (the tables' hashes are added on writing)."""
    return {
        "name": "fig2c",
        "experiment": "fig2c",
        "scale": "quick",
        "seed": 0,
        "key": key,
        "inputs": inputs,
        "command": "ltr-bench experiment=fig2c scale=quick seed=0",
        "overrides": [],
        "forwarded": [],
        "spec": spec,
        "git_commit": "0123456789abcdef",
        "started": "2026-01-01 00:00 UTC",
        "wall_s": 12.0,
        "machine": {"os": "Linux", "cpu_model": "test CPU", "cpus_logical": 2},
        "source": "a test",
    }


@pytest.fixture(scope="module")
def fig2c() -> tuple[str, dict, dict]:
    return _fig2c_quick()


def _write(tmp_path: Path, fig2c: tuple[str, dict, dict]) -> Path:
    key, spec, inputs = fig2c
    tables = tmp_path / "tables"
    tables.mkdir(exist_ok=True)
    SUMMARY[SUMMARY["series"] == "a"].to_csv(tables / "summary.csv", index=False)
    (tables / "big.csv").write_text("x\n" + "1\n" * (MAX_FILE_BYTES // 2 + 1))
    bundle = write_bundle(
        tmp_path / "bundles",
        _record(key, spec, inputs),
        {"summary.csv": tables / "summary.csv", "big.csv": tables / "big.csv"},
    )
    return bundle.path


def test_a_bundle_keeps_small_tables_and_its_provenance(
    tmp_path: Path, fig2c: tuple[str, dict, dict]
) -> None:
    key, _, _ = fig2c
    where = _write(tmp_path, fig2c)
    assert where == folder(tmp_path / "bundles", "quick", "fig2c", key)
    assert where.name == f"fig2c-{key[:12]}"
    record = json.loads((where / PROVENANCE).read_text())
    assert all(k in record for k in REQUIRED)
    assert set(record["files"]) == {"summary.csv"} and "big.csv" in record["left_out"]
    assert sorted(p.name for p in where.iterdir()) == [PROVENANCE, "summary.csv"]
    bundle = read_bundle(tmp_path / "bundles", "quick", "fig2c", key)
    assert bundle is not None and bundle.record["key"] == key
    assert read_bundle(tmp_path / "bundles", "quick", "fig2c", "f" * 20) is None  # another key
    assert not list((tmp_path / "bundles" / "quick").glob(".*tmp"))  # written in one rename


def _edit_key(p: Path) -> None:
    record = json.loads((p / PROVENANCE).read_text())
    record["key"] = "0" * 20
    (p / PROVENANCE).write_text(json.dumps(record))


def _edit_inputs(p: Path) -> None:
    record = json.loads((p / PROVENANCE).read_text())
    record["inputs"]["spec"]["repetitions"] = 99
    (p / PROVENANCE).write_text(json.dumps(record))


def _wrong_type(p: Path) -> None:
    record = json.loads((p / PROVENANCE).read_text())
    record["files"] = list(record["files"])
    (p / PROVENANCE).write_text(json.dumps(record))


def _drop_field(p: Path) -> None:
    record = json.loads((p / PROVENANCE).read_text())
    del record["git_commit"]
    (p / PROVENANCE).write_text(json.dumps(record))


@pytest.mark.parametrize(
    ("damage", "file", "message"),
    [
        (lambda p: (p / PROVENANCE).unlink(), PROVENANCE, "the file is missing"),
        (lambda p: (p / PROVENANCE).write_text("{not json"), PROVENANCE, "not readable as JSON"),
        (_drop_field, PROVENANCE, r"fields \['git_commit'\] are missing"),
        (_wrong_type, PROVENANCE, r"fields \['files'\] have the wrong type"),
        (_edit_key, PROVENANCE, "it records invocation fig2c .* not the one its folder"),
        (_edit_inputs, PROVENANCE, "its recorded inputs give key"),
        (
            lambda p: (p / "summary.csv").write_text("sigma\n0.75\n"),
            "summary.csv",
            "differs from its sha256",
        ),
        (lambda p: (p / "summary.csv").unlink(), "summary.csv", "the table is missing"),
        (lambda p: (p / "model.pkl").write_bytes(b"\0"), "model.pkl", "not listed in"),
    ],
)
def test_a_corrupt_or_mismatched_bundle_is_one_sentence_naming_the_file(
    tmp_path: Path, fig2c: tuple[str, dict, dict], damage, file: str, message: str
) -> None:
    key, _, _ = fig2c
    where = _write(tmp_path, fig2c)
    damage(where)
    with pytest.raises(UserError, match=message) as err:
        read_bundle(tmp_path / "bundles", "quick", "fig2c", key)
    text = str(err.value)
    assert text.startswith(f"results bundle {where / file}: ") and "\n" not in text
    assert "delete its folder" in text


def test_every_invocation_key_survives_the_bundles_json() -> None:
    """A committed bundle's recorded inputs give back its key for every run of the full ledger
    (they are written as JSON and hashed again when read)."""
    from ltr_bench.experiments.common import compose_run_config, invocation_inputs, scaled_spec
    from ltr_bench.experiments.ledger import validate_ledger
    from ltr_bench.experiments.results_key import results_key

    cfg = compose_run_config(["experiment=claims", "scale=full"])
    spec = scaled_spec(cfg, "full")
    assert spec.bundles_dir == "docs/results/bundles"
    assert scaled_spec(cfg, "quick").bundles_dir is None  # quick runs keep no bundles
    ledger = validate_ledger(spec, "full")
    memo: dict = {}
    for name, run_spec in ledger.specs.items():
        inputs = invocation_inputs(str(run_spec.name), "full", 0, run_spec, ["threads=1"], memo)
        back = json.loads(json.dumps(inputs, indent=1, sort_keys=True))
        assert results_key(back) == results_key(inputs), name


def _ledger(workdir: Path, bundles: Path, out: str, *extra: str):
    return run_ltr_bench(
        "experiment=claims",
        "scale=quick",
        f"experiment.claims={CLAIM}",
        f"experiment.bundles_dir={bundles}",
        "threads=1",
        f"tracking.tracking_uri=sqlite:///{workdir}/mlflow.db",
        f"hydra.run.dir={workdir / out}",
        *extra,
        cwd=workdir,
    )


def test_a_fresh_clone_rejudges_from_a_bundle_without_training(
    tmp_path: Path, fig2c: tuple[str, dict, dict]
) -> None:
    """``execute=false`` in a clean store: the verdict comes from the bundle's table."""
    where = _write(tmp_path, fig2c)
    clone = tmp_path / "clone"
    clone.mkdir()
    res = _ledger(clone, tmp_path / "bundles", "out", "experiment.execute=false")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "re-using results bundle" in res.stdout
    row = pd.read_csv(clone / "out" / "claims.csv").set_index("id").loc["noise"]
    assert row["verdict"] == "too small to judge (scale=quick; would hold)"
    assert row["ours"] == "0.8500(40)" and row["run_status"] == "bundle"
    assert row["bundle"].endswith(where.name)
    assert not (clone / "out" / "runs").exists()  # nothing ran
    assert _experiment_runs(clone / "mlflow.db", "paper_figures_quick", "fig2c") == []
    md = (clone / "out" / "claims.md").read_text()
    assert f"| bundle | bundle {where}" in md
    assert not (where / "claims.md").exists() or "noise" in (where / "claims.md").read_text()


def test_without_a_bundle_a_claim_is_not_yet_run_and_a_corrupt_one_stops_the_ledger(
    tmp_path: Path, fig2c: tuple[str, dict, dict]
) -> None:
    from ltr_bench.experiments.results_key import results_key

    key, spec, inputs = fig2c
    bundles = tmp_path / "bundles"
    # a bundle of the same invocation made with other inputs: never used, its difference named
    other = json.loads(json.dumps(inputs))
    other["spec"]["repetitions"] = 7
    (tmp_path / "t").mkdir()
    SUMMARY.to_csv(tmp_path / "t" / "summary.csv", index=False)
    stale = write_bundle(
        bundles,
        _record(results_key(other), spec, other),
        {"summary.csv": tmp_path / "t" / "summary.csv"},
    ).path
    res = _ledger(tmp_path, bundles, "none", "experiment.execute=false")
    assert res.returncode == 0, res.stderr[-2000:]
    verdict = pd.read_csv(tmp_path / "none" / "claims.csv").set_index("id").loc["noise", "verdict"]
    assert verdict.startswith(
        "not yet run: no tracked run or bundle yet and experiment.execute=false (bundle "
        f"{stale.name} is stale: made with `repetitions=7` then, `repetitions=2` now"
    )
    shutil.rmtree(stale)
    where = _write(tmp_path, fig2c)
    (where / "summary.csv").write_text("edited\n")
    res = _ledger(tmp_path, bundles, "corrupt", "experiment.execute=false")
    assert res.returncode == 2
    assert f"results bundle {where / 'summary.csv'}: the table differs" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.heavy
def test_a_ledger_invocation_writes_its_bundle_and_a_clean_store_reuses_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cli_in_process: None,
    fig2c: tuple[str, dict, dict],
) -> None:
    """The tiny fig2c run at quick scale: bundle written (tables, provenance, claims.md); the
    tracked run exported as a bundle by a ledger that trains nothing; re-judged from that bundle
    alone in another folder with another store."""
    from ltr_bench.cli.main import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    bundles = tmp_path / "bundles"
    main(
        [
            "experiment=claims",
            "scale=quick",
            f"experiment.claims={CLAIM}",
            f"experiment.bundles_dir={bundles}",
            "threads=1",
            f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
            f"hydra.run.dir={tmp_path / 'first'}",
        ]
    )
    first = pd.read_csv(tmp_path / "first" / "claims.csv").set_index("id").loc["noise"]
    (where,) = (bundles / "quick").iterdir()
    key, _, _ = fig2c
    assert where.name == f"fig2c-{key[:12]}"
    files = sorted(p for p in where.rglob("*") if p.is_file())
    assert {p.name for p in files} == {"claims.md", PROVENANCE, "results.csv", "summary.csv"}
    assert all(p.suffix in SUFFIXES and p.stat().st_size <= MAX_FILE_BYTES for p in files)
    record = json.loads((where / PROVENANCE).read_text())
    assert all(k in record for k in REQUIRED) and record["key"] == key
    assert record["command"].startswith("ltr-bench experiment=fig2c scale=quick")
    assert record["wall_s"] > 0 and record["machine"]["cpus_logical"] >= 1
    assert record["mlflow_run"] == first["mlflow_run"] and record["claims"] == ["noise"]
    page = (where / "claims.md").read_text()
    assert page.startswith("<!-- generated by ltr_bench.provenance")
    assert "| command | `ltr-bench experiment=fig2c scale=quick" in page and first["ours"] in page

    # the same store without that bundle: the tracked run is re-used and exported as a bundle
    exported = tmp_path / "exported"
    res = _ledger(tmp_path, exported, "export", "experiment.execute=false")
    assert res.returncode == 0, res.stderr[-2000:]
    (copy,) = (exported / "quick").iterdir()
    assert copy.name == where.name
    again = json.loads((copy / PROVENANCE).read_text())
    assert again["files"] == record["files"]  # the same tables, read back from MLflow
    assert again["source"].startswith(f"tracked MLflow run {first['mlflow_run']}")
    assert len(_experiment_runs(tmp_path / "mlflow.db", "paper_figures_quick", "fig2c")) == 1

    clone = tmp_path / "clone"
    clone.mkdir()
    res = _ledger(clone, exported, "again", "experiment.execute=false")
    assert res.returncode == 0, res.stderr[-2000:]
    row = pd.read_csv(clone / "again" / "claims.csv").set_index("id").loc["noise"]
    assert row["ours"] == first["ours"] and row["verdict"] == first["verdict"]
    assert row["run_status"] == "bundle"
    assert _experiment_runs(clone / "mlflow.db", "paper_figures_quick", "fig2c") == []


def test_data_fingerprints_are_the_files_sha256_and_differences_are_named(
    tmp_path: Path, letor_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ltr_bench.data.cache import sha256_file
    from ltr_bench.experiments.fingerprints import DataSelection, data_fingerprints
    from ltr_bench.experiments.results_key import differences

    shutil.copytree(letor_dir, tmp_path / "MQ2008")
    monkeypatch.setenv("LTR_DATA", str(tmp_path))
    monkeypatch.setenv("LTR_CACHE", str(tmp_path / "cache"))
    prints = data_fingerprints([DataSelection("mq2008"), DataSelection("mq2007")])
    files = prints["mq2008"]
    assert len(files) == 15
    assert files["Fold3/vali.txt"] == sha256_file(tmp_path / "MQ2008" / "Fold3" / "vali.txt")
    assert prints["mq2007"] is None  # MQ2007 is not in this data root
    assert data_fingerprints([]) == {}  # generated data: its parameters are in the key
    recorded = {"data": json.loads(json.dumps(prints))}
    assert differences(recorded, {"data": prints}) == []
    recorded["data"]["mq2008"]["Fold1/train.txt"] = "0" * 64
    assert differences(recorded, {"data": prints}) == [
        "dataset mq2008: files Fold1/train.txt differ (sha256)"
    ]


COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "results" / "bundles"


def _committed_files() -> list[tuple[str, str, str]]:
    """(scale, bundle folder, file) for every file a committed bundle's provenance.json hashes."""
    out = []
    for prov in sorted(COMMITTED.glob(f"*/*/{PROVENANCE}")):
        record = json.loads(prov.read_text())
        out += [(prov.parent.parent.name, prov.parent.name, name) for name in record["files"]]
    return out


@pytest.mark.parametrize(("scale", "bundle", "name"), _committed_files())
def test_every_file_a_committed_bundle_hashes_is_verified(
    tmp_path: Path, scale: str, bundle: str, name: str
) -> None:
    """The displayed tables (table1.csv, table2.csv ...) as much as the rows the claims read
    (refits.csv): an edit of any file provenance.json hashes stops the ledger, naming it."""
    where = tmp_path / scale / bundle
    shutil.copytree(COMMITTED / scale / bundle, where)
    record = json.loads((where / PROVENANCE).read_text())
    assert read_bundle(tmp_path, scale, record["name"], record["key"]) is not None
    text = (where / name).read_text()
    (where / name).write_text(text.replace("0", "1", 1) if "0" in text else text + "\n")
    with pytest.raises(UserError, match="the table differs from its sha256") as err:
        read_bundle(tmp_path, scale, record["name"], record["key"])
    assert str(err.value).startswith(f"results bundle {where / name}: ")


def test_rekey_keeps_a_bundle_whose_deciding_inputs_are_equal_and_refuses_a_stale_one(
    tmp_path: Path, fig2c: tuple[str, dict, dict]
) -> None:
    """A bundle written under an older key (format 1: no inputs; an execution option that did
    not exist then) is re-keyed in place of running it again; one whose deciding inputs differ
    is left as it is, the difference named."""
    from ltr_bench.experiments.ledger.rekey import rekey

    key, spec, _ = fig2c
    bundles = tmp_path / "bundles"
    old = dict(spec, in_process=True)
    for name, recorded in (("fig2c", old), ("fig2c_stale", {**spec, "repetitions": 9})):
        where = bundles / "quick" / f"{name}-{'0' * 12}"
        where.mkdir(parents=True)
        SUMMARY.to_csv(where / "summary.csv", index=False)
        record = _record("0" * 20, recorded, {})
        del record["inputs"]
        from ltr_bench.data.cache import sha256_file

        record.update(
            name="fig2c",
            format=1,
            data={"synthetic": "generated"},
            files={"summary.csv": {"bytes": 1, "sha256": sha256_file(where / "summary.csv")}},
        )
        (where / PROVENANCE).write_text(json.dumps(record))
    lines = rekey(bundles, "quick")
    assert any(
        "stale, left as it is: `repetitions=9` then, `repetitions=2` now" in ln for ln in lines
    )
    assert any("in_process (execution)" in ln and f"fig2c-{key[:12]}" in ln for ln in lines)
    bundle = read_bundle(bundles, "quick", "fig2c", key)
    assert bundle is not None and bundle.record["previous_keys"] == ["0" * 20]
    assert (bundles / "quick" / f"fig2c_stale-{'0' * 12}").is_dir()  # untouched
