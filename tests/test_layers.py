"""The layers depend one way: nothing outside ``scrapy_simhash/cli`` imports the command line package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import scrapy_simhash

PACKAGE = Path(scrapy_simhash.__file__).resolve().parent
CLI = "scrapy_simhash.cli"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(module: str, is_package: bool, source: str) -> set[str]:
    """Every module ``source`` imports, relative imports resolved; ``from X import y`` gives X and X.y."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.add(name)
            found.update(f"{name}.{alias.name}" for alias in node.names)
    return found


def _is_cli(name: str) -> bool:
    return name == CLI or name.startswith(CLI + ".")


def test_no_module_outside_cli_imports_cli() -> None:
    offenders = {}
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 30
    for path in modules:
        name = _module_name(path)
        if _is_cli(name) or name == "scrapy_simhash.__main__":  # ``python -m scrapy_simhash`` is the CLI
            continue
        hits = sorted(filter(_is_cli, imported(name, path.name == "__init__.py", path.read_text("utf-8"))))
        if hits:
            offenders[name] = hits
    assert offenders == {}


@pytest.mark.parametrize(
    ("module", "source", "imports_cli"),
    [
        ("scrapy_simhash.warc.commands", "from ..cli import warc as cli\n", True),
        ("scrapy_simhash.warc.commands", "from .. import cli\n", True),
        ("scrapy_simhash.page", "from . import cli\n", True),
        ("scrapy_simhash.page", "import scrapy_simhash.cli.warc\n", True),
        ("scrapy_simhash.index.base", "from scrapy_simhash.cli.warc import run_tag\n", True),
        ("scrapy_simhash.warc.commands", "from . import commandline\nfrom ..index import base\n", False),
        ("scrapy_simhash.warc.commands", "from .clients import x\nimport click\n", False),
    ],
)
def test_the_check_sees_relative_and_absolute_imports(module: str, source: str, imports_cli: bool) -> None:
    assert any(map(_is_cli, imported(module, False, source))) is imports_cli
