"""Results pages carry their provenance; a failed command writes no page."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

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


def test_a_page_names_no_path_of_the_machine_that_wrote_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    data = tmp_path / "letor"
    monkeypatch.setenv("LTR_DATA", str(data))
    monkeypatch.chdir(tmp_path)
    body = (
        f"MQ2007 absent from {data}\nMLflow run in sqlite:///{tmp_path}/mlflow.db\n"
        f"work dir {tempfile.gettempdir()}/bench-x1 and {Path.home()}/.cache"
    )
    prov = Provenance.collect("ltr-bench", datetime.now(UTC), None)
    text = write_page(tmp_path / "p.md", "Paths", body, prov).read_text()
    assert "MQ2007 absent from $LTR_DATA\n" in text
    assert "sqlite:///./mlflow.db" in text and "~/.cache" in text
    assert "work dir $TMPDIR/bench-x1" in text or "work dir ./" in text  # cwd may be in $TMPDIR
    assert str(tmp_path) not in text and tempfile.gettempdir() + "/" not in text


RESULTS = Path(__file__).resolve().parents[1] / "docs" / "results"
MACHINE_PATH = re.compile(r"(?<![\w.$~])/(?:work|home|tmp|root|Users|var/folders|mnt|scratch)/")


def test_no_results_page_names_an_absolute_machine_path() -> None:
    """A page reads the same on every machine: data under $LTR_DATA, outputs relative."""
    found = [
        f"{page.relative_to(RESULTS)}:{n}: {line.strip()[:120]}"
        for page in sorted(RESULTS.rglob("*.md"))
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if MACHINE_PATH.search(line)
    ]
    assert not found, "\n".join(found)
