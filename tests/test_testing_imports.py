"""`parallax/testing/` imports one way: no module imports one that (indirectly) imports it."""

from __future__ import annotations

import ast
import pathlib

import parallax.testing

FOLDER = pathlib.Path(parallax.testing.__file__).parent


def _graph() -> dict[str, set[str]]:
    modules = {p.stem for p in FOLDER.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in FOLDER.glob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):  # function-local imports too
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    names.add(node.module.split(".")[0])
                else:  # `from . import _x`
                    names.update(alias.name for alias in node.names)
        graph[path.stem] = names & modules
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    def reaches(start: str, goal: str, seen: frozenset = frozenset()) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph[start]
        )

    return sorted(m for m in graph if reaches(m, m))


def test_testing_imports_one_way():
    graph = _graph()
    assert _cycles(graph) == [], f"import cycles through {_cycles(graph)}: {graph}"


def test_cycle_finder_finds_a_planted_cycle():
    graph = _graph()
    graph["_session"] = graph["_session"] | {"_contract"}  # _contract imports _session
    assert "_session" in _cycles(graph)


def test_rule_modules_do_not_import_check_env():
    graph = _graph()
    assert "_contract" in graph and "_session" in graph
    for name in ("_session", "_marl", "_batch", "_reference", "_compare"):
        assert "_contract" not in graph[name], name
    rules = [m for m in graph if m.startswith("_rules_")]
    assert len(rules) >= 5
    for name in rules:
        assert "_contract" not in graph[name], name
