"""A job's logging configured with the level caches cleared once leaves the same loggers behind."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ltr_bench.launching import job_logging
from tests.private_names import assert_still_there

# Loggers as a worker has them (a library's tree under a name the job's config quiets), with
# cached levels; then Hydra's configuration of a job's logging, plain or wrapped.
CONFIGURE = """
import json, logging, logging.config, sys
from ltr_bench.launching.job_logging import clearing_caches_once

names = [f"lib.{a}.{b}" for a in range(12) for b in range(12)] + [f"other{i}" for i in range(40)]
loggers = [logging.getLogger(n) for n in names]
for i, lg in enumerate(loggers):
    lg.setLevel([logging.NOTSET, logging.DEBUG, logging.ERROR][i % 3])
    lg.isEnabledFor(logging.INFO)  # cached
clears = []
clear = logging.Manager._clear_cache
def counted(self):
    clears.append(1)
    clear(self)
logging.Manager._clear_cache = counted
config = {
    "version": 1,
    "formatters": {"simple": {"format": "%(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "simple"}},
    "root": {"level": "INFO", "handlers": ["console"]},
    "loggers": {"lib": {"level": "WARNING"}, "lib.3": {"level": "ERROR"}},
    "disable_existing_loggers": False,
}
configure = logging.config.dictConfig
if sys.argv[1] == "wrapped":
    configure = clearing_caches_once(configure)
clears.clear()
configure(config)
stale = [  # a level cached before the configuration, not cleared
    n for n, lg in logging.Logger.manager.loggerDict.items()
    if isinstance(lg, logging.Logger) and n.startswith("lib") and lg._cache
]
state = {
    name: [lg.level, lg.disabled, lg.propagate, len(lg.handlers), lg.isEnabledFor(logging.INFO),
           lg.getEffectiveLevel()]
    for name, lg in logging.Logger.manager.loggerDict.items()
    if isinstance(lg, logging.Logger) and name.startswith(("lib", "other"))
}
print(json.dumps({"clears": len(clears), "state": state, "stale": stale}))
"""


def _configured(how: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CONFIGURE, how], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def test_the_same_loggers_are_left_behind_with_the_caches_cleared_once() -> None:
    plain, wrapped = _configured("plain"), _configured("wrapped")
    assert wrapped["state"] == plain["state"]
    assert len(plain["state"]) == 144 + 40 + 2  # the library's, the others, "lib" and "lib.3"
    assert plain["clears"] > 100  # one per logger reset: what the wrapper saves
    assert wrapped["clears"] == 1
    assert wrapped["stale"] == []  # no cached level left from before


def test_install_wraps_hydras_configure_log_once() -> None:
    import hydra.core.utils as hydra_utils

    before = hydra_utils.configure_log
    try:
        job_logging.install()
        installed = hydra_utils.configure_log
        job_logging.install()
        assert hydra_utils.configure_log is installed
        assert getattr(installed, "clears_caches_once", False)
    finally:
        hydra_utils.configure_log = before


def test_a_failing_configuration_leaves_the_cache_clearing_in_place() -> None:
    import logging

    def broken() -> None:
        raise ValueError("bad config")

    with pytest.raises(ValueError, match="bad config"):
        job_logging.clearing_caches_once(broken)()
    assert "_clear_cache" not in vars(logging.Logger.manager)


@pytest.mark.parametrize(("owner", "attr"), job_logging.PRIVATE_NAMES)
def test_the_private_name_is_still_there(owner: str, attr: str) -> None:
    assert_still_there(owner, attr)
