"""Each config file's YAML parsed once per process. Hydra reads every config file of the defaults
tree from its source on each compose, and a quarter of a compose of ``ltr-bench``'s tree is
PyYAML's pure-Python parser; a process that composes configs of many shapes (an experiment's
runs, the claims ledger's validation, a sweeper's first job of each study) parses the same files
again and again. ``OmegaConf.load`` of an open file is routed here: the parsed object is kept
under the file's text (parsing is a function of the text alone, so an edited file is parsed
afresh) and each call builds a new config from a copy of it, as ``OmegaConf.load`` does. A text
seen for the first time is parsed from the file itself, so a YAML error names the file and line
as before. Installed with the composing cache (:mod:`ltr_bench.launching.composing`), and off
with it (``LTR_COMPOSE_CACHE=off``); its ``check`` composes afresh without it."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from omegaconf import OmegaConf

MAX_TEXTS = 1024  # config files kept (ltr-bench's tree and Hydra's own hold a few hundred)

_parsed: OrderedDict[str | bytes, Any] = OrderedDict()  # a file's text -> its parsed object
_lock = threading.Lock()  # (threads composing at once)
_bypass: contextvars.ContextVar[bool] = contextvars.ContextVar("ltr_parse_bypass", default=False)
_original_load: Callable[[Any], Any] | None = None
_enabled: list[Callable[[], bool]] = [lambda: True]


def install(enabled: Callable[[], bool]) -> None:
    """Route ``OmegaConf.load`` of an open file through the kept parses while ``enabled()``."""
    global _original_load
    _enabled[0] = enabled
    if _original_load is not None:
        return
    _original_load = OmegaConf.load
    OmegaConf.load = staticmethod(_load)  # type: ignore[method-assign]


@contextlib.contextmanager
def bypassed() -> Iterator[None]:
    """Within the block every file is parsed afresh."""
    token = _bypass.set(True)
    try:
        yield
    finally:
        _bypass.reset(token)


def _load(file_: Any) -> Any:
    """``OmegaConf.load``; an open, seekable file's parse is kept under its text."""
    assert _original_load is not None
    if _bypass.get() or not _is_seekable(file_) or not _enabled[0]():
        return _original_load(file_)
    start = file_.tell()
    text = file_.read()
    with _lock:
        obj = _parsed.get(text, _parsed)
        if obj is not _parsed:
            _parsed.move_to_end(text)
    if obj is _parsed:  # not seen: parsed from the file (a YAML error names it)
        file_.seek(start)
        obj = _parse(file_)
        with _lock:
            _parsed[text] = obj
            while len(_parsed) > MAX_TEXTS:
                _parsed.popitem(last=False)
    return _create(copy.deepcopy(obj))


def _is_seekable(file_: Any) -> bool:
    """An open file object that can be read twice (not a path, not a pipe)."""
    if isinstance(file_, (str, bytes)) or not callable(getattr(file_, "read", None)):
        return False
    seekable = getattr(file_, "seekable", None)
    return callable(seekable) and bool(seekable())


def _parse(file_: Any) -> Any:
    """The object PyYAML reads from ``file_`` with OmegaConf's loader, as ``OmegaConf.load``."""
    import yaml

    from ltr_bench.launching.hydra_private import omegaconf_yaml_loader

    return yaml.load(file_, Loader=omegaconf_yaml_loader())


def _create(obj: Any) -> Any:
    """The config ``OmegaConf.load`` builds from a parsed object."""
    if obj is not None and not isinstance(obj, (list, dict, str)):
        raise OSError(f"Invalid loaded object type: {type(obj).__name__}")
    return OmegaConf.create() if obj is None else OmegaConf.create(obj)
