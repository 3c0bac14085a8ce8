"""No import cycle anywhere in the package: a module never imports (directly or through
others, function-local imports included) a module that imports it back.

A package's `__init__` re-exporting its own submodules is not a cycle (the edge from a
package to its children is left out); imports under `if TYPE_CHECKING:` never run and are
left out too.
"""

from __future__ import annotations

import ast
import pathlib

import parallax

ROOT = pathlib.Path(parallax.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = ("parallax", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def _graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for p in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        tree = ast.parse(path.read_text())
        skip = _type_checking_nodes(tree)
        targets: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                base_parts = package[: len(package) - node.level + 1] if node.level else []
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
                for alias in node.names:  # `from . import _x` names a module
                    full = f"{base}.{alias.name}"
                    targets.add(full if full in paths else base)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {
            t for t in targets if t in paths and t != name and not t.startswith(name + ".")
        }
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    """The modules that reach themselves."""

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph[node])
        return seen

    return sorted(m for m in graph if m in reachable(m))


def test_the_package_imports_one_way():
    graph = _graph()
    assert len(graph) > 100 and "parallax.finance._common" in graph
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = _graph()
    assert "parallax.finance._common" in graph["parallax.finance._baselines"]
    graph["parallax.finance._common"] = graph["parallax.finance._common"] | {
        "parallax.finance._plots"  # _plots -> _baselines -> _common: a cycle
    }
    assert "parallax.finance._common" in _cycles(graph)
