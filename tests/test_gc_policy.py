"""The commands' garbage-collector policy: a higher young threshold, no final pass at exit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ltr_bench.cli.gc_policy import YOUNG_THRESHOLD

# An exit handler registered before the command's runs after it (exit handlers run last in, first
# out), so it sees what the command's handler left.
PROBE = """
import atexit, gc
atexit.register(lambda: print("FROZEN", gc.get_freeze_count(), gc.get_threshold()[0]))
{body}
"""


def frozen_at_exit(body: str) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(body=body)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    line = [x for x in done.stdout.splitlines() if x.startswith("FROZEN")][-1]
    frozen, young = (int(v) for v in line.split()[1:])
    assert (young == YOUNG_THRESHOLD) == bool(frozen)
    return frozen


def test_without_the_handler_nothing_is_frozen_at_exit() -> None:
    assert frozen_at_exit("import ltr_bench.cli.gc_policy") == 0


def test_the_handler_freezes_the_live_objects_and_is_registered_once() -> None:
    body = (
        "import atexit\n"
        "from ltr_bench.cli.gc_policy import tune_garbage_collection\n"
        "before = atexit._ncallbacks()\n"
        "tune_garbage_collection()\ntune_garbage_collection()\n"
        "assert atexit._ncallbacks() == before + 1, atexit._ncallbacks()"
    )
    assert frozen_at_exit(body) > 1000


@pytest.mark.parametrize(
    "entry",
    [
        "from ltr_bench.cli.main import main; main(['--help'])",
        "from ltr_bench.cli.report import main; main(['--help'])",
        "from ltr_bench.cli.predict import main; main(['--help'])",
    ],
)
def test_every_command_applies_the_policy(entry: str) -> None:
    body = f"try:\n    {entry}\nexcept SystemExit:\n    pass"
    assert frozen_at_exit(body) > 1000
