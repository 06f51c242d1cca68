"""The ``ltr-bench`` command: a Hydra app over the ``conf/`` tree (``pkg://ltr_bench.conf``).

``main()`` runs the command (``console_main()`` is the console script). It wraps Hydra so that
every mistake in user input — an unknown option or key, a bad value, a missing data folder, a
model/loss mismatch — prints one sentence naming the config key and the fix on stderr and exits
with code 2, without a traceback. Bugs keep their traceback. Ctrl-C exits 130, SIGTERM 143, and
both leave the MLflow runs KILLED.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from ltr_bench.cli.gc_policy import tune_garbage_collection
from ltr_bench.cli.help import fast_help
from ltr_bench.cli.refits import refit_table, refit_workers, run_refits
from ltr_bench.cli.search_model_hint import search_model_hint
from ltr_bench.config.tree import CONFIG_PATH, config_dir
from ltr_bench.errors import UserError, find_in_chain
from ltr_bench.experiments import command_in_process

_deferred: list[BaseException] = []


def _task(cfg: DictConfig) -> float | None:
    """One job: run the composed config (or the experiment it selects); return its objective.

    In a single run, an error in user input is handed to :func:`main` after Hydra returns, so
    Hydra does not print its "Error executing job" line above our one sentence. In a multirun
    every exception goes to the sweeper/launcher as usual (a failed trial does not stop a sweep).
    """
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    from ltr_bench.runner import run

    single = HydraConfig.initialized() and HydraConfig.get().mode == RunMode.RUN
    try:
        if cfg.get("experiment") is not None:  # a table/figure of the papers: its own driver
            from ltr_bench.experiments import run_experiment

            run_experiment(cfg)
            return None
        return sweep_objective(run(cfg))
    except Exception as exc:
        if single and (describe_user_error(exc) is not None or _is_failed_run(exc)):
            _deferred.append(exc)
            return None
        raise


EXIT_USER_ERROR = 2


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``ltr-bench`` (``argv`` defaults to ``sys.argv[1:]``)."""
    from ltr_bench.tracking import RunTerminated, install_signal_handlers

    tune_garbage_collection()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        help_text = fast_help(args, Path(config_dir()))
        if help_text is not None:
            print(help_text)
            return
        from ltr_bench.refit_plan import plan_refits

        refits = plan_refits(args)
        config_dir()  # a missing tree is one sentence, not Hydra's report
        app = hydra.main(version_base="1.3", config_path=CONFIG_PATH, config_name="config")(_task)
    except UserError as exc:
        _fail(str(exc))
    if refits is not None and len(refits) > 1:
        sys.exit(run_refits(refits, refit_workers(args, len(refits))))
    if refits is not None:
        args = refits[0].overrides
    sys.argv = [sys.argv[0] if sys.argv else "ltr-bench"] + args
    # Make Hydra re-raise instead of printing its own multi-line report, so errors are ours to word.
    os.environ["HYDRA_FULL_ERROR"] = "1"
    install_signal_handlers()
    try:
        app()
        if _deferred:
            raise _deferred.pop()
        if refits is not None:  # one refit: the table once the sweep holds more than this one
            table = refit_table(refits[0].sweep_dir, min_refits=2)
            if table:
                print("\n" + table, flush=True)
    except KeyboardInterrupt:
        _interrupted()
    except SystemExit as exc:
        # Lightning answers Ctrl-C during fit with sys.exit(1) from inside its handler.
        if isinstance(exc.__context__, KeyboardInterrupt):
            _interrupted()
        raise
    except RunTerminated:
        print("ltr-bench: terminated; the MLflow runs are marked KILLED", file=sys.stderr)
        sys.exit(143)
    except Exception as exc:  # sorted into user errors and bugs below; a bug is re-raised
        message = describe_user_error(exc)
        if message is not None:
            _fail(search_model_hint(message, args, Path(config_dir())))
        if _is_failed_run(exc):
            print(f"ltr-bench: run failed: {exc}", file=sys.stderr)
            sys.exit(1)
        raise


# An experiment may run this command inside its own process (Table 1's sweeps at a quick scale).
command_in_process.register(main)


def sweep_objective(result: Any) -> float | None:
    """A run's objective for the sweeper: with its standard error over the (inner) folds when
    there is one (:class:`~ltr_bench.sweeper.job.Objective`, a float to any sweeper)."""
    from ltr_bench.sweeper.job import Objective

    if result.objective is None:
        return None
    return Objective(result.objective, se=result.objective_se, n_folds=len(result.folds))


def _is_failed_run(exc: BaseException) -> bool:
    from ltr_bench.runner import TrialFailed

    return isinstance(exc, TrialFailed)


def _interrupted() -> None:
    print("ltr-bench: interrupted; the MLflow runs are marked KILLED", file=sys.stderr)
    sys.exit(130)


def _fail(message: str) -> None:
    print(f"ltr-bench: error: {message}", file=sys.stderr)
    sys.exit(EXIT_USER_ERROR)


# ------------------------------------------------------------------------------ error wording
def describe_user_error(exc: BaseException) -> str | None:
    """One sentence for an error in user input, or None if ``exc`` is a bug.

    Covers :class:`UserError`, Hydra's composition/override errors and OmegaConf's key, value
    and interpolation errors (possibly chained as the cause of a Hydra error).
    """
    from hydra.errors import (
        ConfigCompositionException,
        MissingConfigException,
        OverrideParseException,
    )
    from omegaconf.errors import OmegaConfBaseException

    if isinstance(exc, UserError):
        return _one_line(str(exc))
    yaml_error = _yaml_syntax(exc)
    if yaml_error is not None:
        return yaml_error
    if isinstance(exc, MissingConfigException):
        return _missing_config(exc)
    if isinstance(exc, OverrideParseException):
        return _one_line(f"cannot parse the override {exc.override!r}: {exc.message}") + (
            "; write overrides as key=value or group=option"
        )
    if isinstance(exc, ConfigCompositionException):
        cause = exc.__cause__
        if isinstance(cause, UserError):
            return _one_line(str(cause))
        return _composition(str(exc), cause)
    if isinstance(exc, OmegaConfBaseException):
        return _omegaconf(exc)
    # e.g. hydra.utils.instantiate wraps a constructor's UserError in InstantiationException
    # (exc itself is neither kind: both were answered above)
    cause = find_in_chain(exc, (UserError, OmegaConfBaseException))
    if cause is not None:
        return describe_user_error(cause)
    return None


def _yaml_syntax(exc: BaseException) -> str | None:
    """``<file>:<line>: YAML syntax error ...`` for a config file PyYAML cannot parse (e.g. one
    in the user's ``--config-dir``), wherever it sits in the chain; None for anything else."""
    import yaml

    from ltr_bench.errors import find_in_chain

    found = find_in_chain(exc, yaml.MarkedYAMLError)
    if found is None:
        return None
    mark = found.problem_mark or found.context_mark
    where = f"{mark.name}:{mark.line + 1}" if mark is not None else "a config file"
    problem = ": ".join(p for p in (found.context, found.problem) if p)
    return _one_line(f"{where}: YAML syntax error ({problem}); fix that line of the file")


def _one_line(text: str) -> str:
    text = " ".join(part.strip() for part in str(text).strip().splitlines() if part.strip())
    return text.rstrip(".")


def _missing_config(exc: Any) -> str:
    text = str(exc)
    m = re.search(r"Could not find '([^']+)/([^']+)'", text)
    options = list(getattr(exc, "options", None) or [])
    if not options:
        block = text.split("Available options in", 1)
        if len(block) == 2:
            options = [o.strip() for o in block[1].splitlines()[1:] if o.strip()]
    if m:
        group, option = m.group(1), m.group(2)
        choice = ", ".join(sorted(options)) if options else "see `ltr-bench --help`"
        return f"{group}={option} is not an option of the config group '{group}'; choose one of [{choice}]"
    m = re.search(r"Cannot find primary config '([^']+)'", text)
    if m:
        return (
            f"the config '{m.group(1)}' was not found; reinstall ltr_bench or check --config-name"
        )
    return _one_line(text)


def _composition(text: str, cause: BaseException | None) -> str:
    m = re.search(r"Could not override '([^']+)'", text)
    if m:
        key = m.group(1)
        value = re.search(r"\+\S+", text)
        plus = f" or add a new key with {value.group(0)}" if value else ""
        detail = _omegaconf(cause) if cause is not None else ""
        if "not in struct" in str(cause) or "Key '" in str(cause):
            return f"{key} is not a config key; check the spelling (`ltr-bench --cfg job` lists every key){plus}"
        return f"cannot set {key}: {detail}"
    m = re.search(r"Could not append to config\. An item is already at '([^']+)'", text)
    if m:
        return f"{m.group(1)} already exists; set it without the leading '+'"
    m = re.search(r"Could not delete from config\. '([^']+)' does not exist", text)
    if m:
        return f"{m.group(1)} is not a config key, so it cannot be deleted with '~'"
    m = re.search(r"Multiple values for (\S+)", text)
    if m:
        return f"{m.group(1)} is chosen twice; give each config group once on the command line"
    return _one_line(text)


def _omegaconf(exc: BaseException | None) -> str:
    if exc is None:
        return ""
    msg = str(exc).split("\n")[0].strip()
    key = getattr(exc, "full_key", None)
    if key:
        return f"config key {key}: {msg}; fix it on the command line or in its YAML file"
    return _one_line(msg)


def console_main() -> None:
    """The ``ltr-bench`` console script: :func:`main` with the command line's arguments."""
    main()


if __name__ == "__main__":  # python -m ltr_bench.cli.main
    console_main()
