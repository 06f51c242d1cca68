"""The committed results stay readable: the claims ledger and the leaderboard, re-judged from the
committed bundles (nothing trained), use every bundle, find none stale and no part "not yet run",
and regenerate the committed pages' tables exactly (their provenance lines aside).

A change that orphans a bundle (an option that enters the results key unclassified, a renamed
run) fails here, before it lands; `make results-claims results-leaderboard` regenerates the pages
after a deliberate change of the results."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from tests.inprocess import run_ltr_bench

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"
BUNDLES = RESULTS / "bundles"
PAGES = {"claims": "claims.md", "leaderboard": "leaderboard-mq2008.md"}
# The page's provenance rows: how, when, where and how fast it was generated.
VOLATILE = (
    "| command |",
    "| git commit |",
    "| machine |",
    "| load average |",
    "| date |",
    "| wall time |",
)


def tables(text: str) -> list[str]:
    """A page's lines without its provenance rows and generation time stamps."""
    out = []
    for line in text.splitlines():
        if line.startswith(VOLATILE):
            continue
        out.append(re.sub(r"Generated \d{4}-\d\d-\d\d \d\d:\d\d UTC", "Generated <time>", line))
    return out


@pytest.fixture(scope="module")
def rejudged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, Path]]:
    """Experiment -> (what it printed, its output folder), each run once as the Makefile's
    results targets run it, into a temporary page; the data root is the checkout's sibling data
    when present, else an empty folder (the bundles then stand for the data)."""
    out: dict[str, tuple[str, Path]] = {}
    root = REPO.parent / "shared" / "data" / "letor"
    data = root if root.is_dir() else tmp_path_factory.mktemp("no-data")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LTR_DATA", str(data))
        for name, page in PAGES.items():
            where = tmp_path_factory.mktemp(name)
            res = run_ltr_bench(
                f"experiment={name}",
                "experiment.execute=false",
                "threads=1",
                "tracking=none",
                f"++experiment.results_page={where / page}",
                f"hydra.run.dir={where / 'out'}",
                cwd=REPO,
            )
            assert res.returncode == 0, res.stderr[-3000:]
            out[name] = (res.stdout, where)
    return out


@pytest.mark.parametrize("name", sorted(PAGES))
def test_every_result_is_read_from_a_current_bundle(
    rejudged: dict[str, tuple[str, Path]], name: str
) -> None:
    printed, where = rejudged[name]
    assert "is stale" not in printed, printed
    assert "not yet run" not in printed, printed
    assert "not yet run" not in (where / PAGES[name]).read_text()


def test_every_committed_bundle_is_used(rejudged: dict[str, tuple[str, Path]]) -> None:
    used = set()
    for printed, _ in rejudged.values():
        used |= set(re.findall(r"re-using results bundle \S*?bundles/(\S+?/\S+?),", printed))
    committed = {f"{p.parent.name}/{p.name}" for p in BUNDLES.glob("*/*") if p.is_dir()}
    assert committed - used == set(), "committed bundles no ledger invocation reads"


def test_the_claims_page_counts_every_testable_claim(
    rejudged: dict[str, tuple[str, Path]],
) -> None:
    _, where = rejudged["claims"]
    claims = pd.read_csv(where / "out" / "claims.csv")
    judged = claims["verdict"].isin(["holds", "does not hold"])
    untestable = claims["verdict"].str.startswith("not testable")
    assert judged.sum() + untestable.sum() == len(claims)


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_regenerated_page_equals_the_committed_one(
    rejudged: dict[str, tuple[str, Path]], name: str
) -> None:
    _, where = rejudged[name]
    regenerated = tables((where / PAGES[name]).read_text())
    committed = tables((RESULTS / PAGES[name]).read_text())
    assert regenerated == committed, (
        f"docs/results/{PAGES[name]} differs from what the committed bundles give; after a "
        "deliberate change run `make results-claims results-leaderboard` and commit the pages"
    )
