"""The experiment tags MLflow's UI reads: the experiment kind and a saved runs-table view.

The view's state is a copy of MLflow 3.17's internal JSON format, kept in this one place.
"""

from __future__ import annotations

import json

from ltr_bench import tracking_keys as keys


def experiment_ui_tags() -> dict[str, str]:
    """Experiment tags for MLflow's UI: the "Machine learning" experiment kind (read by MLflow
    3.x UIs before 3.17; 3.17 takes the view from the URL, see :func:`ui_link`) and a saved view
    of the runs table with the metric columns a comparison needs (``keys.VIEW_COLUMNS``), which
    3.17 opens from the "Views" menu or ``?viewStateShareKey=ltr-bench-metrics``. The view's state
    follows MLflow 3.17's format (an internal one: another version ignores or rejects the view,
    never the runs)."""
    import time

    state = {
        "searchFilter": "",
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "startTime": "ALL",
        "lifecycleFilter": "Active",
        "datasetsFilter": [],
        "modelVersionFilter": "All Runs",
        "selectedColumns": list(keys.VIEW_COLUMNS),
        "columnOrder": [],
        "columnWidths": {},
        "runsExpanded": {},
        "runsPinned": [],
        "runsHidden": [],
        "runsVisibilityMap": {},
        "runsHiddenMode": "FIRST_10_RUNS",
        "viewMaximized": False,
        "runListHidden": False,
        "isAccordionReordered": False,
        "useGroupedValuesInCharts": True,
        "hideEmptyCharts": True,
        "groupBy": None,
        "groupsExpanded": {},
        "autoRefreshEnabled": True,
        "globalLineChartConfig": {
            "xAxisKey": "step",
            "lineSmoothness": 0,
            "selectedXAxisMetricKey": "",
        },
    }
    now = int(time.time() * 1000)
    view = {
        "name": keys.SAVED_VIEW_NAME,
        "createdAt": now,
        "updatedAt": now,
        "state": json.dumps(state),
    }
    return {
        keys.EXPERIMENT_KIND: keys.EXPERIMENT_KIND_ML,
        keys.SAVED_VIEW_PREFIX + keys.SAVED_VIEW_ID: json.dumps(view),
    }
