"""Data the cache hands out read-only (memory maps) reaches torch without torch's warning that a
tensor shares a read-only array's memory (printed to the user once per process, naming undefined
behaviour). Checked in a fresh process: torch prints that warning only once per process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from ltr_bench.data.batching import QueryBatches
    from ltr_bench.data.queryset import QuerySet
    from ltr_bench.models.sortnet import SortNet

    rng = np.random.default_rng(0)
    qid = np.repeat(np.arange(12), 5)
    data = QuerySet.from_arrays(
        rng.normal(size=(60, 4)), rng.integers(0, 3, 60).astype(np.int32), qid
    )
    for array in (data.features, data.labels, data.qid, data.offsets):
        array.setflags(write=False)  # as the data cache's memory maps
    for batch in QueryBatches(data, batch_queries=4):
        pass
    ranker = SortNet(n_hidden=4, max_iter=1, epochs_per_iter=1, seed=0).fit(data, data)
    ranker.score(data)
    print("ok")
    """
)


def test_read_only_arrays_reach_torch_without_its_warning() -> None:
    proc = subprocess.run(
        [sys.executable, "-W", "error::UserWarning", "-c", SCRIPT],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "ok"
