"""The project's module import graph, read from the source with `ast` (nothing is imported): no cycles, and the
lowest layers import nothing above them. The layer contract itself is `.importlinter` (run by `make lint`)."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pyrua_dojo", "primitives", "calibration", "prompts", "submission")


def project_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the project's packages by dotted name (a package by its `__init__.py`)."""
    modules: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _resolve(name: str, modules: Mapping[str, Path]) -> str | None:
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports anywhere in its source (top level, in functions, under
    TYPE_CHECKING: each is a dependency of the design, whenever it runs). `from p import m` names module `p.m`
    when `m` is a module, else `p`."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_graph_sees_imports_of_every_kind(tmp_path: Path) -> None:
    pkg = tmp_path / "pyrua_dojo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pyrua_dojo.sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..c import X\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pyrua_dojo.a\n")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    graph = import_graph(project_modules(tmp_path))
    assert graph["pyrua_dojo.a"] == {"pyrua_dojo.sub.b"}
    assert graph["pyrua_dojo.sub.b"] == {"pyrua_dojo.c"}
    assert graph["pyrua_dojo.c"] == {"pyrua_dojo.a"}
    assert cycles(graph) == [["pyrua_dojo.a", "pyrua_dojo.c", "pyrua_dojo.sub.b"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_no_module_cycles() -> None:
    found = cycles(import_graph(project_modules()))
    assert not found, "module import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_calibration_and_primitives_import_nothing_above_them() -> None:
    graph = import_graph(project_modules())
    allowed = {"calibration": ("calibration",), "primitives": ("calibration", "primitives")}
    upward = [
        f"{module} -> {target}"
        for module, targets in graph.items()
        for target in targets
        if module.split(".")[0] in allowed and target.split(".")[0] not in allowed[module.split(".")[0]]
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)
