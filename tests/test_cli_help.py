"""``ltr-bench --help`` from the folder tree is the text Hydra itself renders."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hydra
import pytest

from ltr_bench.cli import main as cli
from ltr_bench.cli.help import app_config_groups, fast_help
from ltr_bench.config.tree import CONFIG_PATH, config_dir
from tests.inprocess import restored, run_ltr_bench


def _hydras_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """The help text of Hydra's own renderer (its group scan), for the installed conf tree."""
    capsys.readouterr()
    app = hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")(cli._task)
    with restored(tmp_path, {}, ["ltr-bench", "--help"]), pytest.raises(SystemExit):
        app()
    return capsys.readouterr().out


def test_fast_help_is_hydras_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ours = run_ltr_bench("--help", cwd=tmp_path)
    assert ours.returncode == 0
    assert "model: adarank," in ours.stdout
    assert ours.stdout == _hydras_help(tmp_path, capsys)


def test_help_with_overrides_or_other_flags_goes_to_hydra() -> None:
    conf = Path(config_dir())
    assert fast_help(["model=lambdamart", "--help"], conf) is None
    assert fast_help(["--hydra-help"], conf) is None
    assert fast_help(["-h"], conf) == fast_help(["--help"], conf)


def test_a_template_with_other_placeholders_goes_to_hydra(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text(
        "hydra:\n  help:\n    template: '$CONFIG $APP_CONFIG_GROUPS'\n"
    )
    assert fast_help(["--help"], tmp_path) is None


def test_groups_are_the_folders_without_hydras(tmp_path: Path) -> None:
    for rel in (
        "model/b.yaml",
        "model/a.yaml",
        "search/deep/x.yaml",
        "hydra/launcher/j.yaml",
        "top.yaml",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("{}\n")
    assert app_config_groups(tmp_path) == "model: a, b\nsearch/deep: x\n"


def test_help_does_not_run_hydras_help_renderer_in_a_fresh_process() -> None:
    code = (
        "from hydra._internal.hydra import Hydra\n"
        "def refuse(*a, **k): raise AssertionError('Hydra rendered the help')\n"
        "Hydra.app_help = refuse\n"
        "from ltr_bench.cli.main import main\n"
        "main(['--help'])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "== Config groups (group=option) ==" in done.stdout
