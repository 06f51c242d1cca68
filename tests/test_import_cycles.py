"""No import cycle among the modules of ltr_bench/ and benchmarks/.

Every import statement counts: one deferred inside a function (it runs the first time the
function does) and one under ``if TYPE_CHECKING:`` too, since modules that import each other back
are one module in disguise. The graph is built from the source (``ast``), not from what happens
to be imported: a benchmark script imports its siblings by their bare names.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def modules(repo: Path) -> dict[str, Path]:
    """Module name -> file, for ``<repo>/ltr_bench`` (a package) and ``<repo>/benchmarks``
    (scripts, named ``benchmarks.<stem>``)."""
    found = {}
    for path in sorted((repo / "ltr_bench").rglob("*.py")):
        parts = path.relative_to(repo).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    for path in sorted((repo / "benchmarks").glob("*.py")):
        found[f"benchmarks.{path.stem}"] = path
    return found


def import_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``found`` its import statements name (anywhere in the file)."""
    scripts = {name.split(".", 1)[1] for name in found if name.startswith("benchmarks.")}

    def resolve(name: str) -> str | None:
        while name and name not in found:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in found.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets: list[str] = []
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets += [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, *([base] if base else [])])
                targets += [f"{base}.{alias.name}" for alias in node.names]
        if module.startswith("benchmarks."):
            targets = [f"benchmarks.{t}" if t.split(".")[0] in scripts else t for t in targets]
        graph[module] = {r for t in targets if (r := resolve(t)) and r != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle (``[a, b, ..., a]``) through each group of modules that import each
    other in a circle (a strongly connected component of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    found = []
    for group in groups:
        start = min(group)
        parent: dict[str, str] = {}
        queue = [start]
        while start not in graph[queue[0]]:  # breadth first: the shortest way back to start
            v = queue.pop(0)
            for w in sorted(graph[v] & group):
                if w not in parent and w != start:
                    parent[w] = v
                    queue.append(w)
        path = [queue[0]]
        while path[-1] != start:
            path.append(parent[path[-1]])
        found.append([*reversed(path), start])
    return sorted(found)


def test_no_module_of_the_package_or_the_benchmarks_imports_itself_back() -> None:
    found = cycles(import_graph(modules(REPO)))
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_a_deferred_import_closes_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "ltr_bench"
    (package / "sub").mkdir(parents=True)
    (tmp_path / "benchmarks").mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from ltr_bench.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .c import g\n")
    (package / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import ltr_bench.a\n"
    )
    (tmp_path / "benchmarks" / "x.py").write_text("from y import z\n")
    (tmp_path / "benchmarks" / "y.py").write_text("import x\n")
    found = cycles(import_graph(modules(tmp_path)))
    assert found == [
        ["benchmarks.x", "benchmarks.y", "benchmarks.x"],
        ["ltr_bench.a", "ltr_bench.sub.b", "ltr_bench.sub.c", "ltr_bench.a"],
    ]
