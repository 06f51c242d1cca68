"""The one exception type for mistakes in user input (files, config values).

The CLI catches :class:`UserError`, prints its one-sentence message without a traceback and
exits with code 2. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

E = TypeVar("E", bound=BaseException)


class UserError(ValueError):
    """A problem with the user's input: a file, a line in it, or a config key.

    The message is one sentence that names the file/line or the config key and, where possible,
    the fix.
    """


class DataFormatError(UserError):
    """A malformed data file; the message names the file and the 1-based line number."""

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = str(path)
        self.line = line
        self.problem = problem


def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions behind it (``__cause__``, else ``__context__``), each once.

    Libraries wrap the error that matters (Hydra's ``instantiate`` raises
    ``InstantiationException`` from a constructor's ``UserError``; SQLAlchemy wraps sqlite3's), so
    callers look for it along this chain. A chain that loops back is followed only once.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def find_in_chain(exc: BaseException | None, kind: type[E] | tuple[type[E], ...]) -> E | None:
    """The first exception of type ``kind`` in :func:`exception_chain` of ``exc``, or None."""
    for link in exception_chain(exc):
        if isinstance(link, kind):
            return link
    return None
