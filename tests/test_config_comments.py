"""Every option file of ``conf/`` says what it is and every key says what it means, by the
convention the reference docs are generated with (:mod:`ltr_bench.config.docs`)."""

from __future__ import annotations

from pathlib import Path

from ltr_bench.config.docs import file_comment, iter_documented_keys

CONF = Path(__file__).resolve().parents[1] / "conf"
CONFIG_FILES = sorted(CONF.rglob("*.yaml"))


def test_every_config_file_and_key_has_a_comment() -> None:
    assert len(CONFIG_FILES) > 50
    missing = []
    for path in CONFIG_FILES:
        rel = path.relative_to(CONF.parent)
        if not file_comment(path):
            missing.append(f"{rel}:1: no leading comment saying what this file is")
        missing += [
            f"{rel}:{key.line}: {key.key_path} has no comment"
            for key in iter_documented_keys(path)
            if not key.comment
        ]
    assert not missing, f"{len(missing)} undocumented:\n" + "\n".join(missing)


def test_the_convention(tmp_path: Path) -> None:
    path = tmp_path / "option.yaml"
    path.write_text(
        "# @package _global_\n"
        "# What the option is.\n"
        "defaults:\n"
        "  - base\n"
        "\n"
        "top: 1  # trailing # wins\n"
        "# A block above\n"
        "# in two lines.\n"
        "section:\n"
        "  inner: 'a # b'   # quoted hash is value\n"
        "  # not directly above: a blank line follows\n"
        "\n"
        "  bare: [1, {x: 2}]\n"
        "  items:  # list entries are values\n"
        "    - a: 1\n"
        "      b: 2\n"
        "  text: |  # block text\n"
        "    c: 3\n"
        "last: x\n"
    )
    assert file_comment(path) == "What the option is."
    keys = [tuple(k) for k in iter_documented_keys(path)]
    assert keys == [
        ("top", "1", "trailing # wins", 6),
        ("section", "", "A block above\nin two lines.", 9),
        ("section.inner", "'a # b'", "quoted hash is value", 10),
        ("section.bare", "[1, {x: 2}]", "", 13),
        ("section.items", "", "list entries are values", 14),
        ("section.text", "|", "block text", 17),
        ("last", "x", "", 19),
    ]
