"""ltr_bench.cli.main: the config tree, and how user errors are worded (one sentence, exit 2).

The real ``ltr-bench`` process (exit codes, stderr, --help, --cfg job) is exercised in
tests/test_e2e.py; here the same exceptions are produced in-process with Hydra's compose API.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra import compose, initialize_config_dir
from hydra.errors import InstantiationException

from ltr_bench.cli.main import config_dir, describe_user_error
from ltr_bench.errors import UserError

REPO = Path(__file__).resolve().parents[1]


def _compose(*overrides: str):
    with initialize_config_dir(config_dir=config_dir(), version_base="1.3"):
        return compose("config", overrides=list(overrides), return_hydra_config=True)


def _composition_error(*overrides: str) -> BaseException:
    with pytest.raises(Exception) as err:
        _compose(*overrides)
    return err.value


def test_config_tree_is_the_repositorys_conf() -> None:
    assert Path(config_dir()).resolve() == (REPO / "conf").resolve()  # ltr_bench/conf links to it


def test_defaults_order_puts_model_after_the_groups_it_may_override() -> None:
    defaults = yaml.safe_load((REPO / "conf" / "config.yaml").read_text())["defaults"]
    names = [next(iter(d)) if isinstance(d, dict) else d for d in defaults]
    core = [
        "optimizer",
        "activation",
        "loss",
        "dataset",
        "model",
        "protocol",
        "eval",
        "trainer",
        "tracking",
    ]
    assert [n for n in names if n in core] == core and names[-1] == "_self_"
    assert "experiment" in names  # optional groups (experiment, search) come after the core ones
    assert min(names.index(g) for g in ("experiment",)) > names.index("tracking")


def test_top_level_keys_and_output_folders() -> None:
    cfg = _compose("model=lambdamart")
    assert cfg.seed == 0 and cfg.threads is None and cfg.refit_best is None
    assert cfg.objective.metric == "ndcg@10" and cfg.objective.split == "vali"
    assert cfg.sweep.trial_number is None and cfg.sweep.study_name is None
    assert cfg.tracking.tracking_uri == "sqlite:///mlflow.db"
    assert cfg.tracking.experiment_name == cfg.experiment_name == "ltr_bench"
    assert cfg.hydra.run.dir.startswith("outputs/") and cfg.hydra.sweep.dir.startswith("multirun/")
    assert cfg.hydra.job.chdir is False  # relative paths (data, mlflow.db) keep their meaning
    assert cfg.protocol.inner_cv == 5
    assert _compose("model=lambdamart", "protocol=holdout").protocol.inner_cv == 3
    assert (
        _compose(
            "model=lambdamart", "tracking=server", "tracking.tracking_uri=http://h:1"
        ).tracking.experiment_name
        == "ltr_bench"
    )


def test_every_trainer_option_is_plain_trainer_kwargs() -> None:
    import inspect

    from lightning.pytorch import Trainer

    accepted = set(inspect.signature(Trainer.__init__).parameters)
    for option in ("cpu", "gpu", "ddp"):
        cfg = _compose("model=lambdamart", f"trainer={option}")
        assert set(cfg.trainer) <= accepted, option
        assert "max_epochs" not in cfg.trainer  # the model config owns its epochs


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            ["model=nosuchmodel"],
            "model=nosuchmodel is not an option of the config group 'model'; choose one of [",
        ),
        (
            ["model=lambdamart", "protocol=nosuch"],
            "protocol=nosuch is not an option of the config group 'protocol'; choose one of "
            "[holdout, letor_folds, single]",
        ),
        (
            ["model=lambdamart", "protocol.nokey=1"],
            "protocol.nokey is not a config key; check the spelling",
        ),
        (["model=lambdamart", "+seed=1"], "seed already exists; set it without the leading '+'"),
        (["model=lambdamart", "~nokey"], "nokey is not a config key, so it cannot be deleted"),
        (["model=="], "cannot parse the override 'model=='"),
    ],
)
def test_composition_errors_become_one_sentence(overrides: list[str], expected: str) -> None:
    message = describe_user_error(_composition_error(*overrides))
    assert message is not None and message.startswith(expected), message
    assert "\n" not in message and "Traceback" not in message


def test_user_errors_inside_instantiate_keep_their_sentence() -> None:
    inner = UserError("dataset folder /x does not exist; set dataset.root to where the data lives")
    try:
        try:
            raise inner
        except UserError as e:
            raise InstantiationException("Error in call to target 'X'") from e
    except InstantiationException as wrapped:
        assert describe_user_error(wrapped) == str(inner).rstrip(".")


def test_bugs_are_not_user_errors() -> None:
    assert describe_user_error(ValueError("a bug")) is None
    assert describe_user_error(KeyError("k")) is None


def test_interpolation_errors_name_the_key() -> None:
    from omegaconf import OmegaConf

    cfg = OmegaConf.create({"dataset": {"root": "${oc.env:LTR_NO_SUCH_VAR_X}"}})
    with pytest.raises(Exception) as err:
        OmegaConf.to_container(cfg, resolve=True)
    message = describe_user_error(err.value)
    assert message is not None and message.startswith("config key dataset.root:")
    assert "LTR_NO_SUCH_VAR_X" in message


def test_a_yaml_syntax_error_in_the_users_config_dir_names_file_and_line(tmp_path, cli) -> None:
    bad = tmp_path / "conf" / "model" / "bad.yaml"
    bad.parent.mkdir(parents=True)
    bad.write_text("# my model\nepochs: [1, 2\nlr: 3\n")
    result = cli("--config-dir", str(tmp_path / "conf"), "model=bad", cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    (line,) = [ln for ln in result.stderr.splitlines() if ln.startswith("ltr-bench: error:")]
    assert f"{bad}:3" in line and "YAML" in line, line


def test_an_in_process_run_leaves_no_hydra_state_behind(tmp_path: Path) -> None:
    """`--cfg job` in the test process set Hydra's job config (without runtime values) and kept
    it, so a later test's run read `hydra.runtime.output_dir` from it and failed (seen with a
    random test order)."""
    from hydra.core.hydra_config import HydraConfig

    from tests.inprocess import run_ltr_bench

    result = run_ltr_bench("--cfg", "job", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert not HydraConfig.initialized()
