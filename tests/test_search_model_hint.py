"""ltr_bench.cli.search_model_hint: the model a search space is for, named with an unknown key."""

from __future__ import annotations

from pathlib import Path

from ltr_bench.cli.search_model_hint import search_model_hint
from ltr_bench.config.tree import config_dir

UNKNOWN = "model.num_leaves is not a config key; check the spelling"


def test_the_hint_names_the_search_spaces_model_and_the_chosen_one() -> None:
    conf = Path(config_dir())
    hint = search_model_hint(UNKNOWN, ["-m", "search=lambdamart_grid", "model=ranknet"], conf)
    assert hint == (
        "model.num_leaves is not a key of model=ranknet: search=lambdamart_grid samples the keys "
        "of model=lambdamart; add model=lambdamart"
    )


def test_other_errors_and_spaces_it_cannot_read_keep_their_sentence(tmp_path: Path) -> None:
    conf = Path(config_dir())
    args = ["-m", "search=lambdamart"]
    assert (
        search_model_hint("seed='x' is not an integer", args, conf) == "seed='x' is not an integer"
    )
    assert (
        search_model_hint(UNKNOWN, ["-m", "search=lambdamart", "model=lambdamart"], conf) == UNKNOWN
    )
    assert search_model_hint(UNKNOWN, ["model=lambdamart"], conf) == UNKNOWN  # no search chosen
    assert search_model_hint(UNKNOWN, ["-m", "search=my_space"], tmp_path) == UNKNOWN  # not found
    (tmp_path / "search").mkdir()
    (tmp_path / "search" / "my_space.yaml").write_text("hydra: {sweeper: {params: {}}}\n")
    assert search_model_hint(UNKNOWN, ["-m", "search=my_space"], tmp_path) == UNKNOWN  # no model
