"""Several trials on one GPU (ltr_bench.machine.gpu_share): which GPU each sweep worker takes, its
memory share, and the one sentence when a fit runs out of it; all without CUDA."""

from __future__ import annotations

import pytest

from ltr_bench.errors import UserError
from ltr_bench.machine import gpu_share
from ltr_bench.machine.gpu_share import (
    SHARE_VAR,
    WORKERS_VAR,
    memory_share,
    out_of_memory_message,
    share_from_environment,
    visible_gpus,
    worker_environment,
    workers_per_gpu,
)


def test_visible_gpus_follow_cuda_visible_devices_else_the_count() -> None:
    assert visible_gpus({}, 2) == ["0", "1"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "3, 5"}, 8) == ["3", "5"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}, 8) == []
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "-1"}, 8) == []
    assert visible_gpus({}, 0) == []


def test_an_equal_share_of_what_the_headroom_leaves() -> None:
    assert memory_share(1, 1, None, 0.1) == pytest.approx(0.9)
    assert memory_share(4, 1, None, 0.1) == pytest.approx(0.225)
    assert memory_share(4, 2, None, 0.1) == pytest.approx(0.45)
    assert memory_share(5, 2, None, 0.0) == pytest.approx(1 / 3)  # 3 workers on the first GPU
    assert memory_share(4, 1, 0.3, 0.1) == 0.3  # given: taken as it is
    assert workers_per_gpu(5, 2) == 3 and workers_per_gpu(1, 4) == 1
    with pytest.raises(
        UserError, match=r"^hydra.launcher.gpu_memory_share=1.5 must be in \(0, 1\]"
    ):
        memory_share(2, 1, 1.5, 0.1)
    with pytest.raises(UserError, match=r"^hydra.launcher.gpu_memory_headroom=1.0 must be"):
        memory_share(2, 1, None, 1.0)


def test_workers_spread_round_robin_and_carry_their_share() -> None:
    envs = [worker_environment(i, 3, ["3", "5"], None, 0.1) for i in range(3)]
    assert [e["CUDA_VISIBLE_DEVICES"] for e in envs] == ["3", "5", "3"]
    assert {e[SHARE_VAR] for e in envs} == {repr(0.45)} and {e[WORKERS_VAR] for e in envs} == {"2"}
    one = worker_environment(1, 4, ["0"], None, 0.1)
    assert "CUDA_VISIBLE_DEVICES" not in one  # one GPU: nothing to choose
    assert share_from_environment(one) == (pytest.approx(0.225), 4)
    assert worker_environment(0, 4, [], None, 0.1) == {}  # no GPU: nothing
    assert share_from_environment({}) is None


def test_running_out_of_the_share_is_one_sentence() -> None:
    text = out_of_memory_message(0.225, 79.6, 4)
    assert text == (
        "the GPU ran out of this worker's memory share (22 % of 79.6 GiB, 4 workers on the "
        "GPU); run fewer workers per GPU (hydra.launcher.n_jobs), give each a larger share "
        "(hydra.launcher.gpu_memory_share) or lower model.batch_size"
    )
    assert out_of_memory_message(None, None, 1).startswith("the GPU ran out of memory; ")


def test_a_fits_out_of_memory_error_names_its_share(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from ltr_bench.models.device import apply_memory_share, out_of_memory_error

    monkeypatch.setenv(SHARE_VAR, "0.45")
    monkeypatch.setenv(WORKERS_VAR, "2")
    apply_memory_share(torch.device("cpu"))  # nothing of CUDA on the CPU
    err = out_of_memory_error(torch.device("cpu"))
    assert isinstance(err, UserError)
    assert str(err).startswith("the GPU ran out of this worker's memory share (45 %, 2 workers")
    assert gpu_share.SHARE_KEY in str(err)
