"""The size budget of the code: a module has one job and stays under 400 lines.

(A function's budget, 60 statements, is ruff's PLR0915 in `make lint`.) A module that grows past
the budget is split by job, not by line count.
"""

from __future__ import annotations

from pathlib import Path

MAX_MODULE_LINES = 400
PACKAGE = Path(__file__).resolve().parents[1] / "ltr_bench"


def test_every_module_is_under_the_line_budget() -> None:
    too_long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in sorted(PACKAGE.rglob("*.py"))
        if "conf" not in path.relative_to(PACKAGE).parts
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines (split them by job): {too_long}"
