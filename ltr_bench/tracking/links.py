"""Links into MLflow's UI: the lines printed after a run, a sweep or a report.

Every link opens the machine-learning view (MLflow 3's default is the GenAI view) with a filter
(:func:`filter_eq`), a saved view with metric columns, or one run.
"""

from __future__ import annotations

from ltr_bench import tracking_keys as keys

_UI_DEFAULT = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store


def ui_base(tracking_uri: str | None) -> str:
    """Where the MLflow UI of ``tracking_uri`` is served: the server itself for an http(s)
    store, else ``mlflow ui``'s default address."""
    if tracking_uri and tracking_uri.startswith(("http://", "https://")):
        return tracking_uri.rstrip("/")
    return _UI_DEFAULT


def ui_link(
    tracking_uri: str | None,
    experiment_id: str,
    search_filter: str | None = None,
    run_id: str | None = None,
    view: str | None = None,
) -> str:
    """A link that opens the experiment's runs (or one run) in MLflow's machine-learning view
    (``workflowType=machine_learning``; MLflow 3's default is the GenAI view), filtered, or in a
    saved ``view`` (its own filter and columns: MLflow 3.17 does not combine the two)."""
    from urllib.parse import quote, urlencode

    path = f"/#/experiments/{quote(str(experiment_id))}"
    path += f"/runs/{run_id}" if run_id else "/runs"
    query = {"workflowType": "machine_learning"}
    if view:
        query["viewStateShareKey"] = view
    elif search_filter:
        query["searchFilter"] = search_filter
    return ui_base(tracking_uri) + path + "?" + urlencode(query, quote_via=quote)


def filter_eq(tag: str, value: str) -> str:
    """A search filter ``tags.`<tag>` = '<value>'`` (backticks: the names hold dots)."""
    return f"tags.`{tag}` = '{value}'"


def format_links(
    tracking_uri: str | None,
    experiment_id: str,
    search_filter: str,
    what: str,
    run_id: str | None = None,
) -> str:
    """The lines printed after a run, sweep or report: how to open the UI and the links."""
    lines = []
    if not (tracking_uri or "").startswith(("http://", "https://")):
        lines.append(
            f"MLflow UI: mlflow ui --backend-store-uri {tracking_uri}   (then open the links)"
        )
    lines.append(f"  {what}: {ui_link(tracking_uri, experiment_id, search_filter)}")
    lines.append(f"  filter:  {search_filter}")
    lines.append(
        f"  with metric columns (view '{keys.SAVED_VIEW_NAME}'; paste the filter there): "
        f"{ui_link(tracking_uri, experiment_id, view=keys.SAVED_VIEW_ID)}"
    )
    if run_id:
        lines.append(f"  run:     {ui_link(tracking_uri, experiment_id, run_id=run_id)}")
    return "\n".join(lines)
