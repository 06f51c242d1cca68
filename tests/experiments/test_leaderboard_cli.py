"""``ltr-bench experiment=leaderboard experiment.execute=false``: the page from results bundles
alone (fake ones here), training nothing; a part without a bundle is "not yet run" with the
command that runs it, and so is the extension claim that needs every part."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ltr_bench.provenance import GENERATED_MARK
from tests.experiments.conftest import generated_letor
from tests.experiments.test_leaderboard_page import fake_rows
from tests.inprocess import run_ltr_bench

MISSING = 7  # the part left without a bundle (the self-attention ranker)


def _write_bundles(root: Path, tables: Path) -> dict[int, list[str]]:
    """A fake bundle per part of the leaderboard's run but MISSING; returns each part's labels."""
    from omegaconf import OmegaConf

    from ltr_bench.experiments.common import compose_run_config, invocation_inputs, scaled_spec
    from ltr_bench.experiments.ledger import parse_ledger, run_spec_config
    from ltr_bench.experiments.ledger.bundles import write_bundle
    from ltr_bench.experiments.model_variants import model_entries
    from ltr_bench.experiments.results_key import results_key

    runs, _ = parse_ledger(scaled_spec(compose_run_config(["experiment=claims"]), "full"))
    labels: dict[int, list[str]] = {}
    memo: dict = {}
    for k, piece in enumerate(runs["leaderboard_mq2008"].pieces(), 1):
        spec = run_spec_config(piece, "full", 0, ["threads=1"])
        labels[k] = list(model_entries(spec))
        if k == MISSING:
            continue
        levels = {m: 0.75 if m == "lambdamart" else 0.72 for m in labels[k]}
        fake_rows(levels, seed=k).to_csv(tables / f"refits{k}.csv", index=False)
        # parts 1 and 2 are Table 1's own invocations: their bundles carry Table 1's run name
        name = f"table1_mq2008_folds.part{k}" if k <= 2 else piece.name
        inputs = invocation_inputs("table1", "full", 0, spec, ["threads=1"], memo)
        record = {
            "name": name,
            "experiment": "table1",
            "scale": "full",
            "seed": 0,
            "key": results_key(inputs),
            "inputs": inputs,
            "command": f"ltr-bench experiment=table1 part {k}",
            "overrides": list(piece.overrides),
            "forwarded": ["threads=1"],
            "spec": OmegaConf.to_container(spec),
            "git_commit": "0123456789abcdef",
            "started": "2026-01-01 00:00 UTC",
            "wall_s": 600.0 * k,
            "machine": {"os": "Linux", "cpu_model": "test CPU", "cpus_logical": 2},
            "source": "a test",
        }
        write_bundle(root, record, {"refits.csv": tables / f"refits{k}.csv"})
    return labels


def test_the_page_comes_from_bundles_and_names_the_missing_part_with_its_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    generated_letor(tmp_path / "data" / "MQ2008", n_features=46)  # present: "not yet run"
    monkeypatch.setenv("LTR_DATA", str(tmp_path / "data"))
    (tmp_path / "tables").mkdir()
    labels = _write_bundles(tmp_path / "bundles", tmp_path / "tables")
    page = tmp_path / "page.md"
    res = run_ltr_bench(
        "experiment=leaderboard",
        "experiment.execute=false",
        f"experiment.bundles_dir={tmp_path / 'bundles'}",
        "threads=1",
        "tracking=none",
        f"++experiment.results_page={page}",
        f"hydra.run.dir={tmp_path / 'out'}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    text = page.read_text()
    assert text.startswith(GENERATED_MARK + "\n# Leaderboard: every ranker on the five MQ2008")
    assert "| command | `ltr-bench experiment=leaderboard experiment.execute=false" in text
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv").set_index("label")
    every = [m for k in sorted(labels) for m in labels[k]]
    assert sorted(board.index) == sorted(every) and len(every) == 17
    assert board.index[0] == "lambdamart"  # ranked by NDCG@10
    command = f"ltr-bench experiment=leaderboard 'experiment.parts=[{MISSING}]' threads=1"
    for label in labels[MISSING]:
        assert board.loc[label, "folds"] == 0
        assert board.loc[label, "status"] == f"not yet run (part {MISSING}: `{command}`)"
    assert f"| {MISSING} | Self-attention ranker (allRank) | not yet run | `{command}` |" in text
    for name in ("RankNet* (DirectRanker)", "ListNet* + ListMLE", "CatBoost", "DASALC"):
        assert f"| {name} |" in text
    assert "## Friedman + Nemenyi (test NDCG@10)" in text and "over 16 models and 5 folds" in text
    for folder in (tmp_path, tmp_path / "out"):  # the diagram beside the page and in the run
        assert (folder / "page-cd-ndcg10.png").read_bytes().startswith(b"\x89PNG")
    assert "![Critical-difference diagram, test NDCG@10](page-cd-ndcg10.png)" in text
    assert "| ListNet* + LambdaLoss | " in text.split("against each model (test NDCG@10)")[1]
    assert f"not yet run: part {MISSING}/10 (leaderboard_mq2008.part{MISSING})" in text
    assert not (tmp_path / "out" / "runs").exists()  # nothing ran
    # found by its invocation key under Table 1's name, and given the claim's page
    part1 = next((tmp_path / "bundles" / "full").glob("table1_mq2008_folds.part1-*"))
    assert (
        f"| 1 | RankNet* (DirectRanker), AdaRank, LambdaMART (LightGBM) | bundle | "
        f"bundle bundles/full/{part1.name}, " in text
    )
    assert "ext-leaderboard-mq2008-ranknet-star-rope" in (part1 / "claims.md").read_text()
    part3 = next((tmp_path / "bundles" / "full").glob("leaderboard_mq2008.part3-*"))
    assert (part3 / "claims.md").is_file()
