"""Results pages carry their provenance; a failed command writes no page."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from ltr_bench import provenance
from ltr_bench.provenance import GENERATED_MARK, Provenance, main, write_page


def test_page_has_command_commit_machine_date_and_wall_time(tmp_path: Path) -> None:
    prov = Provenance.collect("ltr-bench seed=1", datetime.now(UTC), 0.5)
    page = write_page(tmp_path / "sub" / "p.md", "A page", "body text", prov)
    text = page.read_text()
    assert text.startswith(GENERATED_MARK + "\n# A page\n")
    assert "| command | `ltr-bench seed=1` |" in text
    assert f"| machine | {prov.cores} cores, {provenance.cpu_model()}" in text
    assert "| git commit | `" in text and "| date | " in text and "| wall time | " in text
    assert "| load average | 0.5 at start" in text and text.rstrip().endswith("body text")


def test_runner_writes_the_output_only_on_success(tmp_path: Path, capsys) -> None:
    page = tmp_path / "ok.md"
    code = main([str(page), "--title", "Echo", "--", sys.executable, "-c", "print('hello 0.73')"])
    assert code == 0
    text = page.read_text()
    assert "# Echo" in text and "hello 0.73" in text and "[start:output]" in text
    assert "hello 0.73" in capsys.readouterr().out  # echoed while it runs
    bad = tmp_path / "bad.md"
    assert main([str(bad), "--", sys.executable, "-c", "raise SystemExit(3)"]) == 3
    assert not bad.exists()


def test_git_commit_outside_git_is_unknown(tmp_path: Path) -> None:
    assert provenance.git_commit(tmp_path) == "unknown"
