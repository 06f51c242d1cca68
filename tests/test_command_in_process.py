"""``ltr_bench.experiments.command_in_process``: a command run inside the calling process leaves it as it was."""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig

from ltr_bench.config.tree import config_dir
from ltr_bench.experiments import command_in_process


@pytest.fixture
def entry_point(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[..., None]], None]]:
    """Register a stand-in entry point for the test (the real one is put back after it)."""
    monkeypatch.setattr(command_in_process, "_entry_point", [])

    def register(main: Callable[[Sequence[str]], None]) -> None:
        command_in_process.register(main)

    yield register
    logging.getLogger("ltr_in_process_test.library").handlers.clear()


def _messy_command(args: Sequence[str]) -> None:
    """Changes what a Hydra app changes in its process, prints, then exits as ``args`` says."""
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        pass  # a Hydra of its own (the caller's was cleared for it)
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        HydraConfig.instance().cfg = None
        os.chdir("/")
        os.environ["LTR_IN_PROCESS_TEST"] = "set"
        sys.argv = ["changed"]
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        logging.getLogger().addHandler(logging.StreamHandler(sys.stdout))
        logging.getLogger().setLevel(logging.ERROR)
        # a library's own handler on its own logger, made while the output goes to the log
        logging.getLogger("ltr_in_process_test.library").addHandler(logging.StreamHandler())
        logging.getLogger("hydra").disabled = True
        print("printed by the command")
        if args[0] == "exit":
            sys.exit(int(args[1]))
        if args[0] == "bug":
            raise ValueError("a bug in the command")
        if args[0] == "interrupt":
            raise KeyboardInterrupt


def _state() -> tuple[object, ...]:
    root = logging.getLogger()
    return (
        GlobalHydra.instance().hydra,
        HydraConfig.instance().cfg,
        os.getcwd(),
        os.environ.get("LTR_IN_PROCESS_TEST"),
        list(sys.argv),
        signal.getsignal(signal.SIGTERM),
        list(root.handlers),
        root.level,
        logging.getLogger("hydra").disabled,
    )


@pytest.mark.parametrize(
    ("args", "code"), [(["exit", "0"], 0), (["exit", "2"], 2), (["bug"], 1), (["done"], 0)]
)
def test_the_command_runs_with_its_output_in_the_log_and_the_process_is_put_back(
    tmp_path: Path, entry_point: Callable[..., None], args: list[str], code: int
) -> None:
    entry_point(_messy_command)
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):  # the caller's app
        before = _state()
        assert command_in_process.available()
        assert command_in_process.run_command(args, tmp_path / "logs" / "cmd.log") == code
        assert _state() == before
    log = (tmp_path / "logs" / "cmd.log").read_text()
    assert "printed by the command" in log
    (library,) = logging.getLogger("ltr_in_process_test.library").handlers  # kept, now to stderr
    assert isinstance(library, logging.StreamHandler) and library.stream is sys.stderr
    assert ("ValueError: a bug in the command" in log) == (args == ["bug"])


def test_ctrl_c_in_the_command_stops_the_caller_too_with_the_process_put_back(
    tmp_path: Path, entry_point: Callable[..., None]
) -> None:
    entry_point(_messy_command)
    before = _state()
    with pytest.raises(KeyboardInterrupt):
        command_in_process.run_command(["interrupt"], tmp_path / "cmd.log")
    assert _state() == before


@pytest.mark.parametrize("code", [130, 143])
def test_a_command_ended_by_ctrl_c_or_sigterm_stops_the_caller_too(
    tmp_path: Path, entry_point: Callable[..., None], code: int
) -> None:
    """``ltr-bench`` answers Ctrl-C with exit 130 and SIGTERM with 143; the caller is stopped as
    it would be by the signal, not told of one failed command."""
    from ltr_bench.tracking import RunTerminated

    entry_point(_messy_command)
    before = _state()
    with pytest.raises(KeyboardInterrupt if code == 130 else RunTerminated):
        command_in_process.run_command(["exit", str(code)], tmp_path / "cmd.log")
    assert _state() == before


def test_the_handlers_the_command_added_are_closed(
    tmp_path: Path, entry_point: Callable[..., None]
) -> None:
    added: list[logging.FileHandler] = []

    def command(args: Sequence[str]) -> None:
        added.append(logging.FileHandler(tmp_path / "job.log"))
        logging.getLogger().addHandler(added[0])

    entry_point(command)
    assert command_in_process.run_command([], tmp_path / "cmd.log") == 0
    assert added[0] not in logging.getLogger().handlers
    assert added[0].stream is None  # closed


def test_a_handler_without_a_stream_keeps_none_when_no_log_is_named() -> None:
    """A lazily opened handler (torch's trace handler: a StreamHandler whose stream is None until
    its first record) is not given this process's stderr by a block that named no log stream:
    it would close that stream when logging is configured again."""
    lazy = logging.StreamHandler()
    lazy.stream = None  # as torch._logging's LazyTraceHandler holds it before its first record
    owner = logging.getLogger("ltr_bench.tests.lazy_handler")
    owner.addHandler(lazy)
    try:
        with command_in_process.process_state_kept():
            logging.getLogger("ltr_bench.tests.other").info("a record of the command")
        assert lazy.stream is None
    finally:
        owner.removeHandler(lazy)


def test_ltr_bench_registers_its_entry_point_and_none_is_available_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import ltr_bench.cli.main

    assert command_in_process._entry_point == [ltr_bench.cli.main.main]
    monkeypatch.setattr(command_in_process, "_entry_point", [])
    assert not command_in_process.available()
