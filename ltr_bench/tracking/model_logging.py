"""A saved model as an MLflow ``pyfunc`` model of its run, optionally registered.

Logged with a ``loader_module`` (no pickled Python object), a signature and pinned pip
requirements, so ``mlflow.pyfunc.load_model("runs:/<run id>/model")`` scores new data.
"""

from __future__ import annotations

import dataclasses
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ltr_bench.tracking.store import quiet_mlflow

MODEL_NAME = "model"  # the logged model's name: runs:/<run id>/model


@dataclasses.dataclass(frozen=True)
class PyfuncModel:
    """What :func:`log_pyfunc_model` logs: a folder that ``loader_module._load_pyfunc`` reads,
    and the signature's columns as ``(name, MLflow type, required)``."""

    data_dir: Path
    loader_module: str
    inputs: Sequence[tuple[str, str, bool]]
    outputs: Sequence[tuple[str, str, bool]]
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)


def log_pyfunc_model(
    client: Any, experiment_id: str, run_id: str, model: PyfuncModel, register_as: str | None = None
) -> str:
    """Log ``model`` as the MLflow model ``model`` of run ``run_id``; return its model id.

    A ``pyfunc`` flavour with a ``loader_module`` (no pickled Python object) and a signature, so
    it appears under the run's and the experiment's "Logged models" and loads with
    ``mlflow.pyfunc.load_model("runs:/<run id>/model")``; with ``register_as`` it also becomes the
    next version of that registered model (``models:/<name>/latest``).
    """
    import mlflow
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.exceptions import MlflowException
    from mlflow.models import Model, ModelSignature
    from mlflow.types import ColSpec, Schema

    quiet_mlflow()
    signature = ModelSignature(
        inputs=Schema([ColSpec(t, n, required=r) for n, t, r in model.inputs]),
        outputs=Schema([ColSpec(t, n, required=r) for n, t, r in model.outputs]),
    )
    logged = client.create_logged_model(
        experiment_id,
        name=MODEL_NAME,
        source_run_id=run_id,
        params={k: str(v) for k, v in model.params.items()},
    )
    try:
        with (
            tempfile.TemporaryDirectory(prefix="ltr_bench_model_") as tmp,
            warnings.catch_warnings(),
        ):
            warnings.filterwarnings("ignore", message=".*input example was not provided")
            local = Path(tmp) / MODEL_NAME
            mlflow.pyfunc.save_model(
                str(local),
                loader_module=model.loader_module,
                data_path=str(model.data_dir),
                # No input example: rows of zeros tell nothing the signature does not, and MLflow
                # would store them twice (2.7 kB of a ~100 kB model).
                signature=signature,
                pip_requirements=_model_requirements(),
                mlflow_model=Model(
                    artifact_path=logged.artifact_location,
                    run_id=run_id,
                    model_id=logged.model_id,
                    model_uuid=logged.model_id,
                ),
            )
            client.log_model_artifacts(logged.model_id, str(local))
        client.log_outputs(run_id, [LoggedModelOutput(logged.model_id, step=0)])
    except BaseException:
        client.finalize_logged_model(logged.model_id, LoggedModelStatus.FAILED)
        raise
    client.finalize_logged_model(logged.model_id, LoggedModelStatus.READY)
    if register_as:
        try:
            client.create_registered_model(register_as)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
        # source: the artifact location, not models:/<id> (MLflow resolves that one through the
        # global tracking URI, which this client-only gateway never sets)
        client.create_model_version(
            register_as, source=logged.artifact_location, run_id=run_id, model_id=logged.model_id
        )
    return logged.model_id


def _model_requirements() -> list[str]:
    """The logged model's pip requirements: ltr_bench and the libraries that score (pinned to
    the versions that trained it), so MLflow need not infer them by loading the model, and its
    check of them against the installed packages has nothing to warn about."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for dist in ("ltr_bench", "torch", "lightgbm", "numpy", "pandas", "mlflow"):
        try:
            out.append(f"{dist}=={version(dist)}")
        except PackageNotFoundError:
            continue
    return out
