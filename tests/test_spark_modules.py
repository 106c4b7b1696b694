"""Inside ``scrapy_simhash.spark`` data flows one way too: no module imports, directly or through
others, a module that imports it back (function-local imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import scrapy_simhash.spark

PACKAGE = Path(scrapy_simhash.spark.__file__).resolve().parent


def sibling_imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of this package ``path`` imports anywhere in its source (``from .x import``,
    ``from . import x``, ``import scrapy_simhash.spark.x``, ``from scrapy_simhash.spark.x import``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                names = [node.module] if node.module else [alias.name for alias in node.names]
            elif node.level == 0 and (node.module or "").startswith("scrapy_simhash.spark."):
                names = [node.module.removeprefix("scrapy_simhash.spark.")]
            else:
                continue
        elif isinstance(node, ast.Import):
            names = [a.name.removeprefix("scrapy_simhash.spark.") for a in node.names]
        else:
            continue
        found.update(name.partition(".")[0] for name in names if name.partition(".")[0] in modules)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every module that reaches itself again, with one path back to it."""
    found = []
    for start in sorted(graph):
        paths = [[start, nxt] for nxt in sorted(graph[start])]
        seen: set[str] = set()
        while paths:
            path = paths.pop()
            if path[-1] == start:
                found.append(path)
                break
            if path[-1] in seen:
                continue
            seen.add(path[-1])
            paths.extend([*path, nxt] for nxt in sorted(graph[path[-1]]))
    return found


def test_cycles_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b", "a"], ["b", "a", "b"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_spark_package():
    modules = {path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert {"pairs", "bands", "dedupe"} <= modules
    graph = {name: sibling_imports(PACKAGE / f"{name}.py", modules) - {name} for name in modules}
    assert "bands" in graph["pairs"] or "pairs" in graph["bands"]  # the scan sees their imports
    assert cycles(graph) == []
