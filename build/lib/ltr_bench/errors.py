"""The one exception type for mistakes in user input (files, config values).

The CLI catches :class:`UserError`, prints its one-sentence message without a traceback and
exits with code 2. Everything else is a bug and keeps its traceback.
"""

from __future__ import annotations


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
