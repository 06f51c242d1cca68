"""The comments of the ``conf/`` tree, read by the project's convention: what the reference docs
print for every option and key, and what the test that every key is documented checks.

Convention: a key's comment is its trailing ``# ...`` on the same line, or else the block of ``#``
lines directly above it (no blank line in between). A file's leading comment block (the ``#``
lines at its top, before ``defaults:`` or the first key) describes the option itself; Hydra's
``# @package`` directive is not part of it. Hydra's ``defaults`` list is not a key, and the
entries of lists and of flow collections (``[...]``, ``{...}``) are values, not keys.

A small line reader rather than a YAML parser: PyYAML drops comments, and the convention is about
lines anyway.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

# A block-mapping key: indentation, then a quoted or plain key, a colon, then the rest of the line.
_KEY = re.compile(
    r"""^(?P<indent> *)(?P<key>"[^"]*"|'[^']*'|[^\s#'"\-\[{][^#]*?)\s*:(?:\s+(?P<rest>.*))?$"""
)
_PACKAGE = re.compile(r"^#\s*@package\b")


class DocumentedKey(NamedTuple):
    """One key of a config file: dotted path inside the file, its value as written (``""`` for a
    key holding further keys, ``"|"`` for block text), its comment (``""`` if none), 1-based line."""

    key_path: str
    default: str
    comment: str
    line: int


def _split_comment(text: str) -> tuple[str, str]:
    """``"value  # note"`` -> ``("value", "note")``; a ``#`` inside quotes or glued to a word
    (``ndcg@10#x``) is part of the value."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'" and (i == 0 or text[i - 1] in " [{,:"):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip(), text[i + 1 :].strip()
    return text.rstrip(), ""


def _comment_text(lines: list[str]) -> str:
    return "\n".join(re.sub(r"^#\s?", "", line.strip()) for line in lines).strip()


def _bracket_depth(value: str) -> int:
    """Open ``[``/``{`` minus closed ones outside quotes (a flow collection spanning lines)."""
    depth, quote = 0, ""
    for ch in value:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
    return depth


def _leading_block(lines: list[str]) -> int:
    """Number of lines of the file's leading comment block."""
    n = 0
    while n < len(lines) and lines[n].lstrip().startswith("#"):
        n += 1
    return n


def file_comment(path: str | Path) -> str:
    """The leading comment block of a config file (what the option is), without ``@package``."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    block = lines[: _leading_block(lines)]
    return _comment_text([line for line in block if not _PACKAGE.match(line.strip())])


def iter_documented_keys(path: str | Path) -> Iterator[DocumentedKey]:
    """Every key of a config file with its value as written, its comment and its line."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    start = _leading_block(lines)
    pending: list[str] = []  # comment lines directly above the current line
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing keys
    skip_deeper = -1  # skip lines indented more than this (list items, block text, continuations)
    depth = 0  # open brackets of a flow collection spanning lines
    for number, line in enumerate(lines[start:], start + 1):
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if depth > 0:
            depth += _bracket_depth(_split_comment(line)[0])
            continue
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            pending.append(stripped)
            continue
        if indent > skip_deeper >= 0 or (indent == skip_deeper and stripped.startswith("-")):
            pending = []
            continue
        skip_deeper = -1
        match = _KEY.match(line)
        if stripped.startswith("-") or match is None:  # a list under the previous key
            skip_deeper, pending = indent, []
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key = match["key"].strip("\"'")
        value, trailing = _split_comment(match["rest"] or "")
        if not (indent == 0 and key == "defaults"):
            path_ = ".".join([k for _, k in stack] + [key])
            yield DocumentedKey(path_, value, trailing or _comment_text(pending), number)
        pending = []
        stack.append((indent, key))
        if value:  # a scalar, block text or flow collection: deeper lines belong to it
            skip_deeper = indent
            depth = max(_bracket_depth(value), 0)
