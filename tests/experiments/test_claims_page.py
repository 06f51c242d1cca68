"""The claims ledger writes its table as a results page with provenance when asked."""

from __future__ import annotations

from pathlib import Path

from ltr_bench.provenance import GENERATED_MARK
from tests.inprocess import run_ltr_bench

CLAIMS = (
    "[{id: noise, source: 'Fig. 2c', statement: 'NDCG@20 >= 0.5 at sigma 0.75', paper: '>= 0.80',"
    " run: fig2c, check: {_target_: ltr_bench.experiments.checks.threshold, file: summary.csv,"
    " column: 'ndcg@20', where: {sigma: 0.75}, at_least: 0.5}}]"
)


def test_results_page_holds_the_table_and_its_provenance(tmp_path: Path) -> None:
    page = tmp_path / "docs" / "results" / "claims.md"
    res = run_ltr_bench(
        "experiment=claims",
        "scale=quick",
        f"experiment.claims={CLAIMS}",
        "experiment.execute=false",  # train nothing: the verdict reads "not yet run"
        f"++experiment.results_page={page}",
        "threads=1",
        f"tracking.tracking_uri=sqlite:///{tmp_path}/mlflow.db",
        f"hydra.run.dir={tmp_path / 'out'}",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    text = page.read_text()
    assert text.startswith(GENERATED_MARK + "\n# The papers' claims, checked (quick)")
    assert "| command | `ltr-bench experiment=claims scale=quick" in text
    assert "| statement | paper's value | ours | verdict |" in text and "not yet run" in text
    assert (tmp_path / "out" / "claims.md").read_text() in text  # the ledger's own table
