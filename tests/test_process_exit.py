"""The commands' process ending (:mod:`ltr_bench.process_exit`): the exit status, every exit
handler and flush kept, the interpreter's teardown skipped, and the usual ending elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ltr_bench.process_exit import exit_status

# A console command run through run_then_exit. After the import, it registers an exit handler
# (as a library would), leaves unflushed output and a log record in a file handler, and keeps
# an object whose finalizer writes a marker: the interpreter's teardown runs it, os._exit not.
PROGRAM = textwrap.dedent(
    """
    import atexit, logging, sys
    from pathlib import Path
    from ltr_bench import process_exit

    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "library_handler").write_text("ran"))
    log = logging.getLogger("probe")
    log.addHandler(logging.FileHandler(out / "probe.log", delay=False))
    log.setLevel(logging.INFO)

    class Finalized:
        def __del__(self):
            (out / "teardown").write_text("ran")

    kept = Finalized()

    def command():
        sys.stdout.write("no newline, still buffered")
        log.info("logged")
        how = sys.argv[2]
        if how == "exit":
            sys.exit(int(sys.argv[3]))
        if how == "raise":
            raise RuntimeError("a bug")

    if sys.argv[2] == "plain":
        command()
    else:
        process_exit.run_then_exit(command)
    """
)


def _run(tmp_path: Path, *args: str, full: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("LTR_FULL_EXIT", None)
    if full:
        env["LTR_FULL_EXIT"] = "1"
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, str(tmp_path), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(("args", "status"), [(["return"], 0), (["exit", "3"], 3)])
def test_the_status_handlers_and_output_are_kept_and_the_teardown_skipped(
    tmp_path: Path, args: list[str], status: int
) -> None:
    done = _run(tmp_path, *args)
    assert done.returncode == status, done.stderr
    assert done.stdout == "no newline, still buffered"
    assert (tmp_path / "library_handler").read_text() == "ran"
    assert (tmp_path / "probe.log").read_text() == "logged\n"
    assert not (tmp_path / "teardown").exists()


def test_a_bug_keeps_its_traceback_and_status_1(tmp_path: Path) -> None:
    done = _run(tmp_path, "raise")
    assert done.returncode == 1
    assert "RuntimeError: a bug" in done.stderr
    assert (tmp_path / "library_handler").exists()
    assert not (tmp_path / "teardown").exists()


@pytest.mark.parametrize(("args", "full"), [(["plain"], False), (["exit", "0"], True)])
def test_elsewhere_or_when_asked_the_process_ends_as_usual(
    tmp_path: Path, args: list[str], full: bool
) -> None:
    done = _run(tmp_path, *args, full=full)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "no newline, still buffered"
    assert (tmp_path / "teardown").read_text() == "ran"


def _script(name: str) -> Path:
    script = Path(sys.executable).parent / name
    if not script.exists():
        pytest.skip(f"the {name} console script is not installed beside this Python")
    return script


@pytest.mark.parametrize("name", ["ltr-bench", "ltr-bench-report", "ltr-bench-predict"])
def test_each_console_script_ends_through_run_then_exit(name: str) -> None:
    ok = subprocess.run([str(_script(name)), "--help"], capture_output=True, text=True, check=False)
    assert ok.returncode == 0 and name in ok.stdout
    text = _script(name).read_text()
    assert "console_main" in text  # installed from pyproject.toml's [project.scripts]


def test_the_console_script_ends_with_the_commands_status(tmp_path: Path) -> None:
    script = _script("ltr-bench")
    bad = subprocess.run(
        [str(script), "model=no_such_model"], capture_output=True, text=True, cwd=tmp_path
    )
    assert bad.returncode == 2
    assert bad.stderr.startswith("ltr-bench: error: model=no_such_model is not an option")


@pytest.mark.parametrize(
    ("code", "status"), [(None, 0), (0, 0), (2, 2), (130, 130), (256, 0), (-1, 255), ("no", 1)]
)
def test_exit_status_is_the_interpreters(code: object, status: int) -> None:
    assert exit_status(code) == status
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.exit({code!r})"], check=False)
    assert done.returncode == status
