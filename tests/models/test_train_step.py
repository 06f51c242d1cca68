"""The captured training step (``model.compile=step``, :mod:`ltr_bench.models.train_step`).

Cheap checks here, in ``make test``: the switch and its options, the fixed-shape list batches,
the pair draws, DASALC's padded forward against its gathered one. The compiling checks, one per
neural ranker config, are ``heavy`` (CI's ``make test-all``; compiling is slow):
the forward pass and the loss compile as one graph with no graph break, the backward pass and
the optimiser's step compile too, a fit recompiles at most once, and after 20 steps from one seed
the compiled step's weights are the eager step's to 1e-5.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
import torch

from ltr_bench.data.batching import PairBatches, PairDrawBatches, PairSampler, QueryBatches
from ltr_bench.data.padding import two_widths
from ltr_bench.errors import UserError
from ltr_bench.models import DirectRanker
from ltr_bench.models.dasalc import DASALCNet
from ltr_bench.models.device import compile_unavailable
from ltr_bench.models.train_step import parse_compile, step_options
from tests.models.neural_toy import TINY, toy_queries

needs_compiler = pytest.mark.skipif(
    compile_unavailable() is not None, reason=str(compile_unavailable())
)


# ------------------------------------------------------------------------------ the switch
def test_the_switch_takes_false_true_and_step() -> None:
    assert [parse_compile(v) for v in (False, None, "false")] == ["off"] * 3
    assert [parse_compile(v) for v in (True, "true", "scorer")] == ["scorer"] * 3
    assert parse_compile("step") == parse_compile("STEP") == "step"
    with pytest.raises(UserError, match=r"^model.compile='graph' must be false, true .* or step"):
        parse_compile("graph")


def test_inductor_options_per_device_as_dotted_names() -> None:
    options = {"cpu": {}, "cuda": {"triton": {"cudagraphs": True}, "fallback_random": True}}
    assert step_options(options, "cpu") == {}
    assert step_options(options, "cuda") == {"triton.cudagraphs": True, "fallback_random": True}
    assert step_options({}, "mps") == {}
    with pytest.raises(UserError, match=r"^model.compile_options must map device types"):
        DirectRanker(compile_options={"fallback_random": True})


def test_compile_step_without_a_compiler_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    from ltr_bench.models import device

    monkeypatch.setattr(device.shutil, "which", lambda name: None)
    monkeypatch.delenv("CXX", raising=False)
    with pytest.raises(UserError, match=r"^model.compile=step cannot work here: .*compile=false$"):
        DirectRanker(compile="step")


@needs_compiler
def test_a_trainer_that_acts_per_step_is_refused_in_one_sentence() -> None:
    train = toy_queries(20, 1)
    ranker = DirectRanker(
        **dict(TINY, epochs=1),
        compile="step",
        trainer={"gradient_clip_val": 1.0},
        enable_progress_bar=False,
    )
    with pytest.raises(UserError, match=r"^model.compile=step runs each training step whole, "):
        ranker.fit(train)


# ------------------------------------------------------------------------------ inputs
def test_pair_draws_give_the_pairs_of_the_batches() -> None:
    data = toy_queries(30, 1)
    for distribution in ("pairs", "documents"):
        sampler = PairSampler(data, distribution=distribution)  # type: ignore[arg-type]
        eager = list(PairBatches(sampler, 16, 100, seed=3))
        draws = list(PairDrawBatches(sampler, 16, 100, seed=3))
        assert len(eager) == len(draws) == 7
        for batch, drawn in zip(eager, draws):
            for a, b in zip(batch, sampler.pairs_of(drawn)):
                assert torch.equal(a, b)


def test_two_widths_pad_to_the_fewest_cells() -> None:
    lengths = np.array([3, 5, 7, 8, 9, 30, 121])
    widths = two_widths(lengths)
    # 6 queries in 32 and 1 in 128: 320 cells (8 and 128: 416; one width, 128: 896)
    assert list(widths) == [32] * 6 + [128]
    assert list(two_widths(np.array([1, 2]))) == [2, 2]
    assert set(two_widths(np.array([5, 6, 40]), cost_power=2)) == {8, 64}


def test_fixed_shape_batches_take_two_shapes_and_every_query_once() -> None:
    data = toy_queries(70, 1)
    for cost_power in (1, 2):
        batches = QueryBatches(
            data, batch_queries=6, max_cells=4096, cost_power=cost_power, fixed_shapes=True
        )
        epoch = list(batches)
        assert len(epoch) == len(batches)
        assert len({tuple(b.rows.shape) for b in epoch}) <= 2
        assert all(b.rows.shape[0] >= 2 and b.rows.shape[1] >= 2 for b in epoch)
        seen = np.concatenate([b.rows[b.mask].numpy() for b in epoch])
        assert np.array_equal(np.sort(seen), np.arange(data.n_docs))  # each document once
        for b in epoch:  # real documents first in every row; padding rows point at row 0
            lengths = b.mask.sum(1)
            assert torch.equal(b.mask, torch.arange(b.mask.shape[1]) < lengths[:, None])
            assert bool((b.rows[~b.mask] == 0).all())


def test_dasalcs_padded_forward_gives_its_gathered_scores() -> None:
    """Batch normalisation over the real documents only, running statistics included; empty
    queries (all padding) neither change a score nor give NaN."""
    torch.manual_seed(0)
    net = DASALCNet(
        5,
        hidden_sizes=[8],
        dropout=0.0,
        input_noise_std=0.0,
        attention_width=4,
        n_attention_layers=1,
        n_heads=2,
    )
    x = torch.randn(4, 6, 5)
    mask = torch.arange(6) < torch.tensor([6, 3, 1, 0])[:, None]
    for training in (True, False):
        gathered = net.train(training)
        before = {k: v.clone() for k, v in net.state_dict().items()}
        expected = gathered(x, mask)
        after = {k: v.clone() for k, v in net.state_dict().items()}
        net.load_state_dict(before)
        net.use_static_shapes(True)
        padded = net(x, mask)
        net.use_static_shapes(False)
        assert torch.isfinite(padded).all()
        torch.testing.assert_close(padded, expected, rtol=1e-5, atol=1e-6)
        for key, value in net.state_dict().items():
            torch.testing.assert_close(value, after[key], rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------ compiled
#: per model config: what makes it small. Adam's eps is raised where Adam trains, so that
#: parameters whose gradient is zero by an invariance (attention's key bias, a bias before a
#: shift-invariant list loss) are not moved by float noise, which Adam's default eps=1e-8 turns
#: into full learning-rate steps whose sign depends on the order of float sums.
PAIRS = ["model.batch_size=64", "model.pairs_per_epoch=640"]
EPS = "++optimizer.eps=1e-4"
SMALL: dict[str, list[str]] = {
    "direct_ranker": ["model.hidden_sizes=[16,8]", *PAIRS, EPS],
    "ranknet": ["model.hidden_sizes=[16,8]", *PAIRS],
    "ranksvm": PAIRS + [EPS],
    "listnet": ["model.hidden_sizes=[16,8]", "model.batch_size=4"],
    "listnet_star": ["model.hidden_sizes=[16,8]", "model.batch_size=4", "model.dropout=0.2", EPS],
    "lambdarank": ["model.hidden_sizes=[16,8]", "model.batch_size=4", EPS],
    "attention_ranker": [
        "model.hidden_sizes=[16]",
        "model.dim_feedforward=32",
        "model.batch_size=4",
        EPS,
    ],
    "dasalc": [
        "model.hidden_sizes=[16]",
        "model.attention_width=8",
        "model.n_ensemble=2",
        "model.batch_size=4",
        EPS,
    ],
}
STEPS_PER_EPOCH, EPOCHS = 10, 2


def build(model: str) -> Any:
    """The ranker of ``conf/model/<model>.yaml``, small, with ``model.compile=step``."""
    from ltr_bench.experiments.common import compose_run_config
    from ltr_bench.runner.pipeline import build_ranker

    cfg = compose_run_config(
        [
            f"model={model}",
            *SMALL[model],
            f"model.epochs={EPOCHS}",
            "model.early_stopping_patience=null",
            "model.compile=step",
            "++model.compile_options.cpu.fallback_random=true",
            "trainer.enable_progress_bar=false",
        ]
    )
    return build_ranker(cfg)


def limit_steps(ranker: Any) -> Any:
    """End each epoch of the fit after :data:`STEPS_PER_EPOCH` steps (the module's
    ``on_train_batch_start`` returning -1, as Lightning reads it)."""
    build_module = ranker.build_module

    def limited(*args: Any) -> Any:
        module = build_module(*args)
        module.on_train_batch_start = lambda batch, idx: -1 if idx >= STEPS_PER_EPOCH else None
        return module

    ranker.build_module = limited
    return ranker


def fit(model: str, compiled: bool) -> Any:
    """20 steps of ``model`` from seed 0, compiled or eager (the same functions, uncompiled);
    a second recompile of any compiled function fails the fit."""
    ranker = limit_steps(build(model))
    stance = contextlib.nullcontext() if compiled else torch.compiler.set_stance("force_eager")
    limit = torch._dynamo.config.patch(recompile_limit=2, fail_on_recompile_limit_hit=True)
    with stance, limit:
        ranker.fit(toy_queries(80, 1))
    return ranker


def weights(ranker: Any) -> dict[str, torch.Tensor]:
    state = ranker.scorer_.state_dict()
    return {k: v.double() for k, v in state.items() if v.is_floating_point()}


@pytest.mark.heavy
@needs_compiler
@pytest.mark.parametrize("model", list(SMALL))
def test_the_captured_step_compiles_whole_and_trains_as_eager(model: str) -> None:
    eager = fit(model, compiled=False)
    compiled = fit(model, compiled=True)
    assert len(compiled.history) == EPOCHS
    assert all(np.isfinite(h["train_loss"]) for h in compiled.history)
    w_eager, w_compiled = weights(eager), weights(compiled)
    assert w_eager.keys() == w_compiled.keys()
    diff = {k: float((w_compiled[k] - w_eager[k]).abs().max()) for k in w_eager}
    assert max(diff.values()) <= 1e-5, diff

    # what was compiled, looked at after the fit (the optimiser's step below moves the weights)

    module = compiled.module_
    step = module.train_step()
    inputs = next(iter(module.step_batches(0, 1)))
    # the forward pass and the loss: one graph, no break (the fit's fullgraph=True would have
    # raised at a break; explain says so in numbers)
    explained = torch._dynamo.explain(module.step_loss)(inputs)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    # the backward pass is AOTAutograd's compiled one
    loss = step.forward_loss(inputs)
    assert type(loss.grad_fn).__name__.startswith("CompiledFunction")
    # the optimiser's step is compiled too
    assert torch._dynamo.explain(step.optimizer_step_fn)().graph_count >= 1
