"""Composing a sweep's jobs in a warm worker, or in the sweeper's process (Hydra's basic
launcher; a batch composed to fail early). Hydra composes every job's config from the config
files (~0.1 s: the defaults tree, then each file merged), and only then applies the job's config
values. A study's jobs differ only in those values, so a process keeps the tree and the merged
config of the first job of each shape (sweep folder, config name, config sources, group choices)
and starts later jobs of that shape from a copy; Hydra's own code does all the rest (the values,
the ``hydra`` node), so a job gets the config Hydra would compose, from config files read once
per process and sweep (a sweeper forgets them as it sets up), each file's YAML parsed once per
process (:mod:`ltr_bench.launching.parsed_yaml`). The config sources set up for a
job's search path, and Hydra's plugins found by a worker's first job, are kept the same way.
Within :func:`configs_read_once` (an experiment's run, a ledger's validation), the configs that
Hydra's compose API returns are composed through the same cache (~10x faster: the experiments
compose a run config per run, cell and dataset). Within :func:`command_composed_once` (one
``ltr-bench`` command), Hydra's second compose of the command's own config starts from its first
(Hydra composes it once as a multirun to read ``hydra.mode``, then again to run it; a defaults
tree that skipped a missing ``???`` group serves multiruns only). A worker runs each job
through :mod:`ltr_bench.launching.job_run`. ``LTR_COMPOSE_CACHE=off`` turns both off (Hydra
composes and runs every job); ``check`` also composes every job and config afresh and fails on
any difference."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
import itertools
import os
import pickle
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import DictConfig, ListConfig, OmegaConf

from ltr_bench.launching import hydra_private, job_logging, job_run, parsed_yaml

CACHE_ENV = "LTR_COMPOSE_CACHE"
MAX_SHAPES = 32  # shapes a worker keeps (a study has one; study_per sweeps one per study)

# the sweep folder of the job being composed through the cache (None: Hydra's own composing)
_active: contextvars.ContextVar[str | None] = contextvars.ContextVar("ltr_compose", default=None)
_trees: OrderedDict[tuple[Any, ...], Any] = OrderedDict()  # shape -> its first DefaultsList
_composed: dict[int, tuple[Any, Any]] = {}  # id(defaults) -> (defaults, its merged config)
_repos: OrderedDict[tuple[Any, ...], Any] = OrderedDict()  # search path -> its config repository
# the key of the open configs_read_once block (None: the compose API composes afresh)
_reading: contextvars.ContextVar[str | None] = contextvars.ContextVar("ltr_reading", default=None)
_blocks = itertools.count()
COMMAND_BLOCK = "command_composed_once"  # the key of a command's block begins so
_reused = itertools.count()  # advanced each time kept config sources or a kept tree are reused
_skipping: set[tuple[Any, ...]] = set()  # shapes whose kept tree skipped a missing default
_missing_skipped = itertools.count()  # advanced once per check, once per default skipped


def execute_job(idx: int, overrides: Sequence[str], payload: bytes) -> Any:
    """The joblib launcher's job runner, composing through the worker's cache. ``payload``: the
    launcher's Hydra context, config and task and Hydra's singleton state, pickled. The job's
    outcome comes back without its two configs (the sweeper reads its status and value; pickling
    them back costs ~7 ms a job)."""
    hydra_context, config, task_function, singleton_state = pickle.loads(payload)
    job_logging.install()  # the job's logging configured in one pass
    run = job_run.job_runner() if _mode() != "off" else hydra_private.joblib_execute_job()
    cached = through_cache(hydra_context)  # (the sweeper may have sent it cached already)
    if isinstance(getattr(cached, "config_loader", None), CachedLoader):
        instances = singleton_state.get("instances")
        plugins = hydra_private.warm_plugins()  # found by an earlier job of this worker
        if isinstance(instances, dict) and plugins is not None:
            instances.setdefault(type(plugins), plugins)  # Hydra's set_state would search again
    ret = run(idx, overrides, cached, config, task_function, singleton_state)
    ret.cfg = ret.hydra_cfg = None
    return ret


def forget() -> None:
    """Drop what this process kept, but the config of the command in progress (its files read
    moments ago): the next job is composed from the config files as they are."""
    kept = _command_key()
    for key in {shape[0] for shape in _trees} | {path[0] for path in _repos}:
        if key != kept:
            _forget_block(key)


def _command_key() -> str | None:
    """The key of the command block in progress (:func:`command_composed_once`), if any."""
    key = _active.get()
    return key if key is not None and key.startswith(COMMAND_BLOCK) else None


def _mode() -> str:
    """``on``, ``off`` or ``check`` (``LTR_COMPOSE_CACHE``)."""
    mode = os.environ.get(CACHE_ENV, "on").strip().lower()
    return "off" if mode in ("off", "0", "false", "no") else mode


def through_cache(hydra_context: Any) -> Any:
    """``hydra_context`` with a config loader that composes through this process's cache (the
    same context when ``LTR_COMPOSE_CACHE=off``): a worker's jobs, and the jobs a sweeper runs in
    its own process (Hydra's basic launcher) or composes there to fail early."""
    mode = _mode()
    if mode == "off" or isinstance(hydra_context.config_loader, CachedLoader):
        return hydra_context
    _install()
    loader = CachedLoader(hydra_context.config_loader, check=mode == "check")
    return dataclasses.replace(hydra_context, config_loader=loader)


@contextlib.contextmanager
def configs_read_once() -> Iterator[None]:
    """Within the block, :func:`composed` calls compose through this process's cache: each shape's
    config files are read once. A block inside another is part of it; what the outermost block
    kept is forgotten when it ends (a config file edited later is read again)."""
    if _reading.get() is not None:
        yield
        return
    with _kept_while(_reading, f"configs_read_once-{next(_blocks)}"):
        yield


@contextlib.contextmanager
def command_composed_once() -> Iterator[None]:
    """Within the block (one ``ltr-bench`` command), Hydra's composes of the command's own config
    go through this process's cache. Hydra composes it twice: once as a multirun, to read
    ``hydra.mode``, then to run it; the second starts from the first's defaults tree and merged
    config (~0.25 s). What the block kept is forgotten when it ends. ``LTR_COMPOSE_CACHE=off``
    turns it off; ``check`` composes the run's config afresh too and fails on any difference."""
    mode = _mode()
    if mode == "off" or _active.get() is not None:
        yield
        return
    _install()
    with _kept_while(
        _active, f"{COMMAND_BLOCK}{'check' if mode == 'check' else ''}-{next(_blocks)}"
    ):
        yield


@contextlib.contextmanager
def composed_afresh() -> Iterator[None]:
    """Within the block, Hydra composes as it does without the cache (a command's job: what it
    composes is none of the command's own config)."""
    token = _active.set(None)
    try:
        yield
    finally:
        _active.reset(token)


@contextlib.contextmanager
def _kept_while(var: contextvars.ContextVar[str | None], key: str) -> Iterator[None]:
    """``var`` set to ``key`` within the block; what the block kept is forgotten at its end."""
    token = var.set(key)
    try:
        yield
    finally:
        var.reset(token)
        _forget_block(key)


def _forget_block(key: str) -> None:
    """Forget what a block kept (its key begins each of its shapes and search paths)."""
    for shape in [shape for shape in _trees if shape[0] == key]:
        _composed.pop(id(_trees.pop(shape).defaults), None)
        _skipping.discard(shape)
    for path in [path for path in _repos if path[0] == key]:
        del _repos[path]


def composed(compose: Callable[[], DictConfig]) -> DictConfig:
    """``compose()``, a call of Hydra's compose API, through the cache inside
    :func:`configs_read_once` (elsewhere, or with ``LTR_COMPOSE_CACHE=off``, as it is);
    ``check`` also composes afresh and raises on any difference."""
    key, mode = _reading.get(), _mode()
    if key is None or mode == "off":
        return compose()
    _install()
    token = _active.set(key)
    try:
        cfg = compose()
    finally:
        _active.reset(token)
    if mode == "check":
        _check_against_fresh(cfg, compose, "a config")
    return cfg


class CachedLoader:
    """Hydra's config loader whose ``load_sweep_config`` composes through the cache."""

    def __init__(self, loader: Any, check: bool = False) -> None:
        self._loader = loader
        self._check = check

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)

    def __reduce__(self) -> tuple[Any, ...]:
        # a launcher's worker that receives it composes through its own cache
        return (_cached_loader, (self._loader, self._check))

    def load_sweep_config(self, master_config: DictConfig, sweep_overrides: list[str]) -> Any:
        # in a command's block (the sweeper's process) a job starts from the command's config;
        # elsewhere (a worker) from the first job of its sweep
        command = _command_key()
        token = _active.set(command or str(OmegaConf.select(master_config, "hydra.sweep.dir")))
        try:
            cfg = self._loader.load_sweep_config(master_config, sweep_overrides)
        finally:
            _active.reset(token)
        if self._check and not (command or "").startswith(COMMAND_BLOCK + "check"):
            # (a command block in check mode has compared it)
            _check_against_fresh(
                cfg,
                lambda: self._loader.load_sweep_config(master_config, sweep_overrides),
                str(sweep_overrides),
            )
        return cfg


def _cached_loader(loader: Any, check: bool) -> CachedLoader:
    """A :class:`CachedLoader` unpickled in a process (a launcher's worker): the cache installed."""
    _install()
    return CachedLoader(loader, check)


def _check_against_fresh(cfg: Any, compose: Callable[[], Any], what: str) -> None:
    """Compose afresh, outside the cache, and raise naming where it differs from ``cfg``."""
    token = _active.set(None)
    try:
        with parsed_yaml.bypassed():  # the files parsed afresh too
            fresh = compose()
    finally:
        _active.reset(token)
    found = difference(cfg, fresh)
    if found:
        raise AssertionError(
            f"{CACHE_ENV}=check: composing {what} through the cache differs from Hydra's at {found}"
        )


def difference(a: Any, b: Any, path: str = "<root>") -> str | None:
    """Where two composed configs differ (a value, or a node's type, metadata or flags); None
    when they are the same."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} against {type(b).__name__}"
    for name in ("ref_type", "object_type", "optional", "key", "flags"):
        mine, theirs = _named(getattr(a._metadata, name)), _named(getattr(b._metadata, name))
        if mine != theirs:
            return f"{path}: {name} {mine} against {theirs}"
    container = isinstance(a, (DictConfig, ListConfig))
    if not container or isinstance(a._content, str) or a._content is None:  # a leaf, ???, ${..}
        mine, theirs = (a._content, b._content) if container else (a._value(), b._value())
        return None if mine == theirs else f"{path}: {mine!r} against {theirs!r}"
    keys: list[Any] = list(a.keys()) if isinstance(a, DictConfig) else list(range(len(a)))
    if keys != (list(b.keys()) if isinstance(b, DictConfig) else list(range(len(b)))):
        return (
            f"{path}: keys {keys} against {list(b.keys()) if isinstance(b, DictConfig) else len(b)}"
        )
    for key in keys:
        found = difference(a._get_node(key), b._get_node(key), f"{path}.{key}")
        if found:
            return found
    return None


def _named(value: Any) -> Any:
    """A class as its module and name: a structured config's class defined in a Hydra plugin
    reaches each job by value (Hydra re-executes plugin modules), a new class object per job."""
    return f"{value.__module__}.{value.__qualname__}" if isinstance(value, type) else value


def _sources(repository: Any) -> tuple[Any, ...]:
    return tuple((type(s).__name__, s.provider, s.path) for s in repository.get_sources())


def _install() -> None:
    """Route Hydra's config repository, defaults tree and merge through the cache while a job is
    composed, and every config file's parse through :mod:`ltr_bench.launching.parsed_yaml`."""
    module, loader_class = hydra_private.hydra_composition()
    if getattr(module, "_ltr_compose_cache", False):
        return
    parsed_yaml.install(enabled=lambda: _mode() != "off")
    create, compose = module.create_defaults_list, loader_class._compose_config_from_defaults_list
    tree_module = hydra_private.hydra_defaults_tree()
    check_missing = tree_module._check_not_missing
    parse = loader_class._parse_overrides_and_create_caching_repo
    load = loader_class.load_configuration

    def parse_overrides_and_create_caching_repo(self: Any, config_name: Any, overrides: Any) -> Any:
        sweep = _active.get()
        if sweep is None:
            return parse(self, config_name, overrides)
        parsed = OverridesParser.create().parse_overrides(overrides=overrides)
        searchpath = [o.input_line for o in parsed if o.get_key_element() == "hydra.searchpath"]
        paths = tuple((p.provider, p.path) for p in self.config_search_path.get_path())
        key = (sweep, config_name, *searchpath, _sources(self.repository), paths)
        kept = _repos.get(key)
        if kept is None:  # the primary config read for its search path: sources set up once
            parsed, repo = parse(self, config_name, overrides)
            _keep(_repos, key, copy.copy(repo))
            return parsed, repo
        repo = copy.copy(kept)  # the same sources; a cache of its own (composing alters configs)
        repo.cache = {}
        next(_reused)
        return parsed, repo

    def create_defaults_list(
        repo: Any, config_name: Any, overrides_list: Any, prepend_hydra: bool, skip_missing: bool
    ) -> Any:
        sweep = _active.get()
        if sweep is None:
            return create(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        group: list[str] = []
        values: list[Any] = []
        for o in overrides_list:  # classified as Hydra's Overrides does
            if not o.is_sweep_override():
                is_value = isinstance(o.value(), dict) or not repo.group_exists(o.key_or_group)
                (values if is_value else group).append(o if is_value else o.input_line)
        # skip_missing only drops a group whose default is '???': a tree that met none is the
        # tree of either value (Hydra composes a command's config in both modes)
        shape = (sweep, _sources(repo), config_name, prepend_hydra, tuple(group))
        tree = _trees.get(shape)
        if tree is None or (shape in _skipping and not skip_missing):
            skipped = next(_missing_skipped)
            tree = create(repo, config_name, overrides_list, prepend_hydra, skip_missing)
            if [id(o) for o in tree.config_overrides] != [id(o) for o in values]:
                return tree  # classified otherwise than here: not kept
            if next(_missing_skipped) == skipped + 1:
                _skipping.discard(shape)
            else:  # a missing default was skipped: the tree serves skip_missing only
                _skipping.add(shape)
            _keep(_trees, shape, tree)
        else:
            next(_reused)
        return dataclasses.replace(tree, config_overrides=values)

    def compose_config(self: Any, defaults: Any, repo: Any) -> Any:
        kept = _composed.get(id(defaults))
        if _active.get() is None or kept is None or kept[0] is not defaults:
            cfg = compose(self, defaults, repo)
            if _active.get() is not None and any(t.defaults is defaults for t in _trees.values()):
                _composed[id(defaults)] = (defaults, copy.deepcopy(cfg))
            return cfg
        return copy.deepcopy(kept[1])  # (pickling fails: Hydra re-imports plugin schemas)

    module.create_defaults_list = create_defaults_list
    tree_module._check_not_missing = _counting_skips(check_missing)
    loader_class._compose_config_from_defaults_list = compose_config
    loader_class._parse_overrides_and_create_caching_repo = parse_overrides_and_create_caching_repo
    loader_class.load_configuration = _checked_in_command(load)
    module._ltr_compose_cache = True


def _counting_skips(check_not_missing: Callable[..., bool]) -> Callable[..., bool]:
    """Hydra's ``_check_not_missing``, counting the ``???`` defaults it skips."""

    def counted(repo: Any, default: Any, skip_missing: bool) -> bool:
        skip = check_not_missing(repo, default, skip_missing)
        if skip:
            next(_missing_skipped)
        return skip

    return counted


def _checked_in_command(load: Callable[..., Any]) -> Callable[..., Any]:
    """Hydra's ``load_configuration``; in a command's block in ``check`` mode, a config composed
    from a kept defaults tree is composed afresh too and compared."""

    def load_configuration(self: Any, *args: Any, **kwargs: Any) -> Any:
        key = _active.get()
        reused = next(_reused)
        cfg = load(self, *args, **kwargs)
        if key is None or not key.startswith(COMMAND_BLOCK + "check"):
            return cfg
        if next(_reused) != reused + 1:  # kept config sources or a kept tree were reused
            _check_against_fresh(cfg, lambda: load(self, *args, **kwargs), "the command's config")
        return cfg

    return load_configuration


def _keep(kept: OrderedDict[tuple[Any, ...], Any], key: tuple[Any, ...], value: Any) -> None:
    """Remember ``value`` for ``key``, forgetting the oldest key beyond ``MAX_SHAPES``."""
    kept[key] = value
    while len(kept) > MAX_SHAPES:
        _, old = kept.popitem(last=False)
        if kept is _trees:
            _composed.pop(id(old.defaults), None)
            _skipping.difference_update([s for s in _skipping if s not in _trees])
