"""Public ground: no code under ``ltr_bench/`` (nor its Hydra plugins under ``hydra_plugins/``)
replaces a library's code at run time.

A static check over the package's syntax trees. It reports, with file and line:

- an assignment, augmented assignment or ``del`` of an attribute of a third-party module, class
  or function (``OmegaConf.load = f``, ``logging.Manager._clear_cache = f``), also through a name
  that holds one (``module = importlib.import_module("hydra._internal.config_loader_impl")``,
  ``loader_class = SomeLibClass``, ``from mlflow.utils import environment``, a value a function
  of the package returns), and through its ``__dict__`` or ``vars()``;
- ``setattr``, ``delattr`` or ``__setattr__`` on such an object;
- a module put into ``sys.modules`` (``sys.modules[name] = ...``, ``__setitem__``, ``update``,
  ``setdefault``);
- ``os._exit``.

Third-party means every module outside :data:`OWN_PACKAGES`; the standard library counts as
third-party too (``logging``, ``os``, ``sys``). :data:`PUBLIC_SETTINGS` names the few library
attributes that are data meant to be assigned (``sys.argv``). Attributes of instances the package creates
(``self.x = ...``, an object a call returned) are not tracked, so setting them is not reported.

Names are tracked through ``import x``, ``import x.y as z``, ``from x import y`` (relative
imports too), aliases (``z = x``, ``z = x.y``, ``z = importlib.import_module("...")``,
``getattr(x, "y")``, ``sys.modules["..."]``), tuple unpacking, module-level names another module
imports, and what a function of the package returns (``module, cls = private.composition()``),
in module, class and function scopes. A name bound to a library object in one branch is taken as
holding it afterwards, whatever the other branches bind.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "ltr_bench"

PLUGINS = sorted(p for p in (REPO / "hydra_plugins").glob("ltr_bench_*") if p.is_dir())

#: The project's own packages (the package and its Hydra plugins); every other module is a
#: library whose code is not to be replaced.
OWN_PACKAGES = ("ltr_bench", *(f"hydra_plugins.{p.name}" for p in PLUGINS))

#: Library attributes that are settings meant to be assigned, each with why it is assigned.
PUBLIC_SETTINGS = {
    "sys.argv": "the command line a Hydra app reads (``hydra.main`` takes no argument list)",
}

_BUILTINS = frozenset(dir(builtins))
_SYS_MODULES_WRITES = ("__setitem__", "update", "setdefault")
_DICT_WRITES = ("__setitem__", "update", "setdefault", "pop", "popitem", "clear", "__delitem__")
_EXITS = frozenset({"os._exit", "posix._exit"})

Origin = str | tuple["Origin | None", ...]  # a dotted name, or what a tuple holds


@dataclasses.dataclass(frozen=True, order=True)
class Hit:
    """One replacement: where, and what it replaces."""

    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.what}"


def is_third_party(origin: object) -> bool:
    """Whether a dotted name lies outside the project's own packages."""
    if not isinstance(origin, str):
        return False
    return not any(origin == p or origin.startswith(p + ".") for p in OWN_PACKAGES)


class _Index:
    """What the package's modules hold at their top level and what its functions return, by
    dotted name, when that is a library object (or a tuple of them)."""

    def __init__(self) -> None:
        self.exports: dict[str, Origin] = {}
        self.returns: dict[str, Origin] = {}

    def canonical(self, name: str) -> Origin:
        """``name`` with its longest prefix that names a package-level holder replaced by what
        it holds (``ltr_bench.m.LOADER.x`` -> ``omegaconf._utils.Loader.x``)."""
        for _ in range(8):  # a few holders in a row at most
            parts = name.split(".")
            for cut in range(len(parts), 0, -1):
                held = self.exports.get(".".join(parts[:cut]))
                if held is not None:
                    break
            else:
                return name
            if not isinstance(held, str):
                return held if cut == len(parts) else name
            name = ".".join([held, *parts[cut:]])
        return name

    def snapshot(self) -> tuple[dict[str, Origin], dict[str, Origin]]:
        return dict(self.exports), dict(self.returns)


class _ModuleChecker:
    """One module's pass: binds names in order, scope by scope, and collects the hits."""

    def __init__(self, module: str, path: str, is_package: bool, index: _Index) -> None:
        self.module, self.path, self.is_package, self.index = module, path, is_package, index
        self.hits: set[Hit] = set()

    # ---------------------------------------------------------------------------- scopes
    def run(self, tree: ast.Module) -> None:
        env: dict[str, Origin | None] = {}
        pending: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]] = []
        self._block(tree.body, env, pending, definite=True, scope=self.module)
        for name, origin in env.items():
            if origin is not None and _holds_library(origin):
                self.index.exports[f"{self.module}.{name}"] = origin
        self._functions(pending, env)

    def _functions(
        self,
        pending: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]],
        outer: Mapping[str, Origin | None],
    ) -> None:
        """Function bodies run after their scope is set up: they see its final names."""
        for node, qualname in pending:
            env = dict(outer)
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    env[arg.arg] = None
            inner: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]] = []
            self._block(node.body, env, inner, definite=True, scope=qualname)
            self._functions(inner, env)

    def _block(
        self,
        body: Iterable[ast.stmt],
        env: dict[str, Origin | None],
        pending: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]],
        definite: bool,
        scope: str | None,
    ) -> None:
        for stmt in body:
            self._statement(stmt, env, pending, definite, scope)

    def _statement(
        self,
        stmt: ast.stmt,
        env: dict[str, Origin | None],
        pending: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]],
        definite: bool,
        scope: str | None,
    ) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._scan([*stmt.decorator_list, stmt.args], env)
            qualname = f"{scope}.{stmt.name}" if scope is not None else None
            pending.append((stmt, qualname))
            self._bind(env, stmt.name, qualname, definite=True)
            return
        if isinstance(stmt, ast.ClassDef):
            self._scan([*stmt.decorator_list, *stmt.bases, *stmt.keywords], env)
            qualname = f"{scope}.{stmt.name}" if scope is not None else None
            class_env = dict(env)
            methods: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, str | None]] = []
            self._block(stmt.body, class_env, methods, definite=True, scope=qualname)
            pending.extend(methods)  # methods see the enclosing scope, not the class body
            self._bind(env, stmt.name, qualname, definite=True)
            return
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.asname:
                    self._bind(env, alias.asname, self.index.canonical(alias.name), definite)
                else:
                    top = alias.name.split(".")[0]
                    self._bind(env, top, top, definite)
            return
        if isinstance(stmt, ast.ImportFrom):
            base = self._absolute(stmt)
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                origin = self.index.canonical(f"{base}.{alias.name}")
                if origin in _EXITS:
                    self._hit(stmt, f"imports {origin}")
                self._bind(env, alias.asname or alias.name, origin, definite)
            return
        if isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self._scan([stmt.value], env)
                self._returned(scope, self._resolve(stmt.value, env))
            return
        if isinstance(stmt, ast.Assign):
            self._scan([stmt.value], env)
            held = self._resolve(stmt.value, env)
            for target in stmt.targets:
                self._target(target, env, "assigns")
                self._bind_target(env, target, held, definite)
            return
        if isinstance(stmt, ast.AnnAssign):
            self._scan([stmt.annotation, *([stmt.value] if stmt.value else [])], env)
            if stmt.value is not None:
                self._target(stmt.target, env, "assigns")
                self._bind_target(env, stmt.target, self._resolve(stmt.value, env), definite)
            return
        if isinstance(stmt, ast.AugAssign):
            self._scan([stmt.value], env)
            self._target(stmt.target, env, "assigns")
            self._bind_target(env, stmt.target, None, definite)
            return
        if isinstance(stmt, ast.Delete):
            for target in stmt.targets:
                self._target(target, env, "deletes")
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            self._scan([stmt.iter], env)
            self._target(stmt.target, env, "assigns")
            self._bind_target(env, stmt.target, None, definite=True)
            self._block(stmt.body, env, pending, definite=False, scope=scope)
            self._block(stmt.orelse, env, pending, definite=False, scope=scope)
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            for item in stmt.items:
                self._scan([item.context_expr], env)
                if item.optional_vars is not None:
                    self._target(item.optional_vars, env, "assigns")
                    self._bind_target(env, item.optional_vars, None, definite)
            self._block(stmt.body, env, pending, definite, scope)
            return
        if isinstance(stmt, (ast.Try, ast.TryStar)):
            self._block(stmt.body, env, pending, definite, scope)
            for handler in stmt.handlers:
                if handler.type is not None:
                    self._scan([handler.type], env)
                if handler.name:
                    self._bind(env, handler.name, None, definite=False)
                self._block(handler.body, env, pending, definite=False, scope=scope)
            self._block(stmt.orelse, env, pending, definite=False, scope=scope)
            self._block(stmt.finalbody, env, pending, definite, scope)
            return
        if isinstance(stmt, (ast.If, ast.While)):
            self._scan([stmt.test], env)
            self._block(stmt.body, env, pending, definite=False, scope=scope)
            self._block(stmt.orelse, env, pending, definite=False, scope=scope)
            return
        if isinstance(stmt, ast.Match):
            self._scan([stmt.subject], env)
            for case in stmt.cases:
                if case.guard is not None:
                    self._scan([case.guard], env)
                self._block(case.body, env, pending, definite=False, scope=scope)
            return
        # everything else holds expressions only (Expr, Raise, Assert, ...)
        self._scan([v for _, v in ast.iter_fields(stmt) if isinstance(v, ast.AST)], env)

    # ---------------------------------------------------------------------------- names
    def _absolute(self, stmt: ast.ImportFrom) -> str:
        if stmt.level == 0:
            return stmt.module or ""
        parts = self.module.split(".")
        keep = len(parts) - stmt.level + (1 if self.is_package else 0)
        base = ".".join(parts[:keep])
        return f"{base}.{stmt.module}" if stmt.module else base

    @staticmethod
    def _bind(
        env: dict[str, Origin | None], name: str, origin: Origin | None, definite: bool
    ) -> None:
        """``name`` holds ``origin``; in a branch that may not run, a name that holds a library
        object keeps it when the branch binds something else."""
        if origin is not None or definite or env.get(name) is None:
            env[name] = origin

    def _bind_target(
        self,
        env: dict[str, Origin | None],
        target: ast.expr,
        origin: Origin | None,
        definite: bool,
    ) -> None:
        if isinstance(target, ast.Name):
            self._bind(env, target.id, origin, definite)
        elif isinstance(target, (ast.Tuple, ast.List)):
            parts = (
                origin
                if isinstance(origin, tuple) and len(origin) == len(target.elts)
                else (None,) * len(target.elts)
            )
            for element, part in zip(target.elts, parts):
                self._bind_target(env, element, part, definite)
        elif isinstance(target, ast.Starred):
            self._bind_target(env, target.value, None, definite)

    def _returned(self, scope: str | None, origin: Origin | None) -> None:
        if scope is None or origin is None:
            return
        kept = self.index.returns.get(scope)
        if kept is None or not _holds_library(kept):
            self.index.returns[scope] = origin

    def _resolve(self, node: ast.AST, env: Mapping[str, Origin | None]) -> Origin | None:
        """The dotted name of the object ``node`` evaluates to, when it is known."""
        if isinstance(node, ast.Name):
            if node.id in env:
                return env[node.id]
            return f"builtins.{node.id}" if node.id in _BUILTINS else None
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value, env)
            return self.index.canonical(f"{base}.{node.attr}") if isinstance(base, str) else None
        if isinstance(node, ast.Call):
            return self._resolve_call(node, env)
        if isinstance(node, ast.Subscript):
            base = self._resolve(node.value, env)
            key = node.slice.value if isinstance(node.slice, ast.Constant) else None
            if base == "sys.modules" and isinstance(key, str):
                return self.index.canonical(key)
            if isinstance(base, str) and base.endswith(".__dict__") and isinstance(key, str):
                return self.index.canonical(f"{base[: -len('.__dict__')]}.{key}")
            if isinstance(base, tuple) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            return None
        if isinstance(node, ast.NamedExpr):
            return self._resolve(node.value, env)
        if isinstance(node, ast.IfExp):
            return self._resolve(node.body, env) or self._resolve(node.orelse, env)
        if isinstance(node, ast.BoolOp):
            for value in node.values:
                found = self._resolve(value, env)
                if found is not None:
                    return found
            return None
        if isinstance(node, (ast.Tuple, ast.List)):
            parts = tuple(self._resolve(e, env) for e in node.elts)
            return parts if any(p is not None for p in parts) else None
        return None

    def _resolve_call(self, node: ast.Call, env: Mapping[str, Origin | None]) -> Origin | None:
        func = self._resolve(node.func, env)
        first = node.args[0] if node.args else None
        text = first.value if isinstance(first, ast.Constant) else None
        if func == "importlib.import_module" and isinstance(text, str):
            return self.index.canonical(text)
        if func == "builtins.__import__" and isinstance(text, str):
            return text.split(".")[0]
        if func == "builtins.getattr" and len(node.args) >= 2 and first is not None:
            base, name = self._resolve(first, env), node.args[1]
            if (
                isinstance(base, str)
                and isinstance(name, ast.Constant)
                and isinstance(name.value, str)
            ):
                return self.index.canonical(f"{base}.{name.value}")
            return None
        if func == "builtins.vars" and first is not None:
            base = self._resolve(first, env)
            return f"{base}.__dict__" if isinstance(base, str) else None
        if func == "typing.cast" and len(node.args) == 2:
            return self._resolve(node.args[1], env)
        if isinstance(func, str):
            return self.index.returns.get(func)
        return None

    # ---------------------------------------------------------------------------- hits
    def _hit(self, node: ast.AST, what: str) -> None:
        self.hits.add(Hit(self.path, getattr(node, "lineno", 0), what))

    def _target(self, target: ast.expr, env: Mapping[str, Origin | None], verb: str) -> None:
        """An assignment's or ``del``'s target that is a library object's attribute."""
        if isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._target(element, env, verb)
        elif isinstance(target, ast.Starred):
            self._target(target.value, env, verb)
        elif isinstance(target, ast.Attribute):
            base = self._resolve(target.value, env)
            if is_third_party(base) and f"{base}.{target.attr}" not in PUBLIC_SETTINGS:
                self._hit(target, f"{verb} {base}.{target.attr}")
        elif isinstance(target, ast.Subscript):
            base = self._resolve(target.value, env)
            if base == "sys.modules" and verb == "assigns":
                self._hit(target, "puts a module into sys.modules")
            elif isinstance(base, str) and base.endswith(".__dict__"):
                owner = base[: -len(".__dict__")]
                if is_third_party(owner):
                    self._hit(target, f"{verb} an entry of {owner}.__dict__")

    def _scan(self, nodes: Iterable[ast.AST], env: dict[str, Origin | None]) -> None:
        """Calls and references inside expressions: setattr and the like, ``sys.modules``
        writes, ``os._exit``; names bound inside (lambdas, comprehensions) are the code's own."""
        for root in nodes:
            local = dict(env)
            for node in ast.walk(root):
                for name in _names_bound_inside(node):
                    local[name] = None
            for node in ast.walk(root):
                if isinstance(node, ast.Call):
                    self._call(node, local)
                elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                    origin = self._resolve(node, local)
                    if origin in _EXITS:
                        self._hit(node, f"calls {origin}")
                if isinstance(node, ast.NamedExpr):
                    env[node.target.id] = self._resolve(node.value, local)

    def _call(self, node: ast.Call, env: Mapping[str, Origin | None]) -> None:
        func = self._resolve(node.func, env)
        first = node.args[0] if node.args else None
        if func in ("builtins.setattr", "builtins.delattr") and first is not None:
            owner = self._resolve(first, env)
            if is_third_party(owner):
                self._hit(node, f"{func.split('.')[1]}() on {owner}")
            return
        if isinstance(node.func, ast.Attribute):
            method, holder = node.func.attr, self._resolve(node.func.value, env)
            if method in ("__setattr__", "__delattr__"):
                if holder in ("builtins.object", "builtins.type") and first is not None:
                    holder = self._resolve(first, env)
                if is_third_party(holder):
                    self._hit(node, f"{method}() on {holder}")
            elif holder == "sys.modules" and method in _SYS_MODULES_WRITES:
                self._hit(node, f"puts a module into sys.modules ({method})")
            elif (
                isinstance(holder, str) and holder.endswith(".__dict__") and method in _DICT_WRITES
            ):
                owner = holder[: -len(".__dict__")]
                if is_third_party(owner):
                    self._hit(node, f"changes {owner}.__dict__ ({method})")


def _names_bound_inside(node: ast.AST) -> Iterator[str]:
    if isinstance(node, ast.Lambda):
        args = node.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None:
                yield arg.arg
    elif isinstance(node, ast.comprehension):
        for target in ast.walk(node.target):
            if isinstance(target, ast.Name):
                yield target.id


def _holds_library(origin: Origin | None) -> bool:
    if isinstance(origin, tuple):
        return any(_holds_library(o) for o in origin)
    return is_third_party(origin)


def check_sources(sources: Mapping[str, tuple[str, str]]) -> list[Hit]:
    """The replacements in modules given as ``{dotted module name: (path, source)}`` (a
    package's ``__init__`` under the package's name, with a path ending in ``__init__.py``).

    Every module is read until what the modules export and their functions return stops
    changing, then the hits of the last pass are returned."""
    trees = {name: ast.parse(source, path) for name, (path, source) in sources.items()}
    index = _Index()
    hits: list[Hit] = []
    for _ in range(10):
        before = index.snapshot()
        hits = []
        for name, tree in trees.items():
            path = sources[name][0]
            checker = _ModuleChecker(name, path, path.endswith("__init__.py"), index)
            checker.run(tree)
            hits.extend(checker.hits)
        if index.snapshot() == before:
            break
    return sorted(hits)


def check_source(source: str, module: str = "ltr_bench.example") -> list[Hit]:
    """The replacements in one module's source."""
    return check_sources({module: (f"{module.replace('.', '/')}.py", source)})


def check_package(*roots: Path, top: Path = REPO) -> list[Hit]:
    """The replacements in every ``.py`` file under ``roots`` (folders of the importable tree
    ``top``; module names and paths relative to it)."""
    sources = {}
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            relative = path.relative_to(top)
            parts = relative.with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            sources[module] = (relative.as_posix(), path.read_text())
    return check_sources(sources)


# ------------------------------------------------------------------------------ the package
def test_the_package_replaces_no_library_code() -> None:
    hits = check_package(PACKAGE, *PLUGINS)  # the plugins too: they run the package's jobs
    assert hits == [], "replacements of library code:\n" + "\n".join(map(str, hits))


# ------------------------------------------------------------------------------ the checker
def _whats(source: str) -> list[str]:
    return [h.what for h in check_source(source)]


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import hydra.core.utils\nhydra.core.utils.run_job = f\n", "hydra.core.utils.run_job"),
        ("from omegaconf import OmegaConf\nOmegaConf.load = f\n", "omegaconf.OmegaConf.load"),
        ("import logging\nlogging.Manager._clear_cache = f\n", "logging.Manager._clear_cache"),
        (
            "import joblib.externals.loky.process_executor as pe\npe._MAX = 1\n",
            "joblib.externals.loky.process_executor._MAX",
        ),
        ("import torch\ntorch.nn.Module.forward = f\n", "torch.nn.Module.forward"),
        ("import optuna\ndef f():\n    optuna.x += 1\n", "optuna.x"),
        ("import a\na.b: int = 1\n", "a.b"),
    ],
)
def test_an_assignment_to_a_library_attribute_is_caught(source: str, what: str) -> None:
    (hit,) = check_source(source)
    assert (hit.line, hit.what) == (source.count("\n"), f"assigns {what}")


@pytest.mark.parametrize(
    "source",
    [
        # a module by name
        'import importlib\nmodule = importlib.import_module("hydra._internal.config_loader_impl")\n'
        "module.create_defaults_list = f\n",
        'from importlib import import_module as load\nm = load("hydra._internal.x")\nm.y = f\n',
        # a class, then a name for it
        "from hydra._internal.config_loader_impl import ConfigLoaderImpl\n"
        "loader_class = ConfigLoaderImpl\nloader_class.load_configuration = f\n",
        # a module imported from its package
        "from mlflow.utils import environment\nenvironment.warn = g\n",
        # a chain of names, inside a function
        "import logging\ndef f():\n    manager = logging.Logger.manager\n"
        "    m = manager\n    m._clear_cache = g\n",
        # what getattr or sys.modules gives
        'import sys\nsys.modules["optuna.importance"].__getattr__ = f\n',
        'import x\ny = getattr(x, "y")\ny.z = 1\n',
        # unpacked from a tuple
        "import a, b\nm, c = a, b.C\nc.x = 1\n",
        # through a branch: a name bound to a library module in one branch keeps it
        "try:\n    import fast as mod\nexcept ImportError:\n    mod = None\nmod.x = 1\n",
        # del of an attribute, and writes through __dict__ or vars()
        "import a\ndel a.b\n",
        'import a\na.__dict__["b"] = 1\n',
        "import a\nvars(a).update(b=1)\n",
    ],
)
def test_an_assignment_through_a_name_that_holds_a_library_object_is_caught(
    source: str,
) -> None:
    assert len(check_source(source)) == 1, check_source(source)


def test_a_module_a_function_of_the_package_returns_is_followed() -> None:
    private = (
        "def composition():\n"
        "    from hydra._internal import config_loader_impl\n"
        "    return config_loader_impl, config_loader_impl.ConfigLoaderImpl\n"
        "def tree():\n    return composition()[0]\n"
    )
    user = (
        "from ltr_bench.launching import private\n"
        "from .private import tree\n"
        "def install():\n"
        "    module, loader_class = private.composition()\n"
        "    loader_class._compose = f\n"
        "    module.flag = True\n"
        "    tree().z = 1\n"
    )
    hits = check_sources(
        {
            "ltr_bench.launching.private": ("ltr_bench/launching/private.py", private),
            "ltr_bench.launching.user": ("ltr_bench/launching/user.py", user),
        }
    )
    assert [(h.path, h.line, h.what) for h in hits] == [
        (
            "ltr_bench/launching/user.py",
            5,
            "assigns hydra._internal.config_loader_impl.ConfigLoaderImpl._compose",
        ),
        ("ltr_bench/launching/user.py", 6, "assigns hydra._internal.config_loader_impl.flag"),
        ("ltr_bench/launching/user.py", 7, "assigns hydra._internal.config_loader_impl.z"),
    ]


def test_a_module_level_name_another_module_imports_is_followed() -> None:
    hits = check_sources(
        {
            "ltr_bench": ("ltr_bench/__init__.py", "import omegaconf._utils as LOADER\n"),
            "ltr_bench.b": ("ltr_bench/b.py", "from . import LOADER\nLOADER.x = 1\n"),
        }
    )
    assert [str(h) for h in hits] == ["ltr_bench/b.py:2: assigns omegaconf._utils.x"]


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import sys\nsetattr(sys.modules['hydra'], 'x', 1)\n", "setattr() on hydra"),
        ("from optuna import storages\ndelattr(storages, 'x')\n", "delattr() on optuna.storages"),
        ("import a\nobject.__setattr__(a.B, 'x', 1)\n", "__setattr__() on a.B"),
        ("import a\na.B.__setattr__('x', 1)\n", "__setattr__() on a.B"),
    ],
)
def test_setattr_and_delattr_on_a_library_object_are_caught(source: str, what: str) -> None:
    assert _whats(source) == [what]


@pytest.mark.parametrize(
    "source",
    [
        "import sys, types\nsys.modules['scipy.signal'] = types.ModuleType('s')\n",
        "import sys\nmods = sys.modules\nmods['x'] = None\n",
        "import sys\ndef f(n):\n    sys.modules[n] = None\n",
        "import sys\nsys.modules.__setitem__('x', None)\n",
        "import sys\nsys.modules.update({'x': None})\n",
        "from sys import modules\nmodules.setdefault('x', None)\n",
    ],
)
def test_a_module_put_into_sys_modules_is_caught(source: str) -> None:
    assert [w.startswith("puts a module into sys.modules") for w in _whats(source)] == [True]


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos._exit(0)\n",
        "import os as o\ndef end(code):\n    o._exit(code)\n",
        "from os import _exit\n_exit(1)\n",
        "import os\nend = os._exit\n",
    ],
)
def test_os_exit_is_caught(source: str) -> None:
    assert _whats(source) and all("os._exit" in w for w in _whats(source))


@pytest.mark.parametrize(
    "source",
    [
        # attributes of instances the code creates, and of its own classes and functions
        "class Ranker:\n    def __init__(self):\n        self.x = 1\n",
        "import dataclasses\n@dataclasses.dataclass\nclass D:\n    a: int = 1\nd = D()\nd.a = 2\n",
        "import lightning as L\nclass Cb(L.Callback):\n    pass\nCb.order = 1\n",
        "import functools\ndef f():\n    pass\ng = functools.cache(f)\ng.remembered = True\nf.x = 1\n",
        "import logging\nlog = logging.getLogger('x')\nlog.propagate = False\n",
        "from lightning import Trainer\nt = Trainer()\nt.x = 1\n",
        # a parameter or a loop variable shadows a module of the same name
        "import hydra\ndef f(hydra):\n    hydra.x = 1\n",
        "import os\nfor os in []:\n    os.x = 1\n",
        "import a\n[setattr(a, 'x', 1) for a in objects]\n",
        # a name rebound to the code's own object
        "import hydra as h\nh = object_of_ours()\nh.x = 1\n",
        # the package's own modules, and setattr on its own objects
        "from ltr_bench import config\nconfig.X = 1\nsetattr(config, 'Y', 2)\n",
        "from . import sibling\nsibling.X = 1\n",
        "class S:\n    pass\nsetattr(S, 'x', 1)\n",
        # reading, calling and subscripting library objects; the environment is public ground
        "import os, sys\nos.environ['X'] = '1'\nprint(sys.modules.get('torch'))\n",
        "import sys\nif 'x' in sys.modules:\n    del sys.modules['x']\n",
        "import logging\nlogging.getLogger('a').setLevel(logging.WARNING)\n",
        "import os\nx = os.getpid()\n",
        # a setting meant to be assigned
        "import sys\nsys.argv = ['ltr-bench', 'model=x']\n",
    ],
)
def test_the_codes_own_objects_and_reads_are_not_caught(source: str) -> None:
    assert check_source(source) == []


def test_each_hit_names_its_file_and_line() -> None:
    source = "import os\n\n\ndef end():\n    os._exit(3)\n"
    (hit,) = check_sources({"ltr_bench.end": ("ltr_bench/end.py", source)})
    assert str(hit) == "ltr_bench/end.py:5: calls os._exit"
