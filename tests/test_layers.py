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


INDEX = "scrapy_simhash.index"
INDEX_LAYERS = ("core", "tables", "lsh", "embedded", "redis", "archive", "verified", "api", "upgrade")
"""The index's sub-packages, bottom first: each imports only from those below it (and itself). ``core``
is the modules at the package's top (base, values, extractor_record, _probe); ``api`` its ``__init__``."""


def _index_layer(name: str) -> str | None:
    """The layer of the index module (or name) ``name``; None for one outside the index."""
    if name == INDEX:
        return "api"
    if not name.startswith(INDEX + "."):
        return None
    first = name[len(INDEX) + 1 :].split(".")[0]
    if first in INDEX_LAYERS:
        return first
    if first == "_probe" or (PACKAGE / "index" / f"{first}.py").exists():
        return "core"
    return "api"  # a name the package's ``__init__`` defines: ``from .. import open_index``


def upward_imports(name: str, is_package: bool, source: str) -> list[str]:
    """The index modules ``source`` (the module ``name``) imports from a layer above its own. Importing
    ``is_server_uri`` from the package (a function of the URI alone) is allowed from every layer."""
    own = _index_layer(name)
    if own is None:
        return []
    rank = INDEX_LAYERS.index(own)
    names = imported(name, is_package, source) - {f"{INDEX}.is_server_uri"}
    if any(other.startswith(INDEX + ".") for other in names) or f"{INDEX}.is_server_uri" in imported(
        name, is_package, source
    ):
        names.discard(INDEX)  # ``from .. import x``: x says what is imported
    return [target for target in sorted(names) if _rank(target) > rank]


def _rank(name: str) -> int:
    layer = _index_layer(name)
    return -1 if layer is None else INDEX_LAYERS.index(layer)


def test_the_index_sub_packages_import_one_way() -> None:
    offenders = {}
    modules = sorted((PACKAGE / "index").rglob("*.py"))
    assert len(modules) > 40
    for path in modules:
        name = _module_name(path)
        hits = upward_imports(name, path.name == "__init__.py", path.read_text("utf-8"))
        if hits:
            offenders[name] = hits
    assert offenders == {}


@pytest.mark.parametrize(
    ("module", "source", "upward"),
    [
        ("scrapy_simhash.index.embedded.embedded", "from ..verified.verified import VerifiedIndex\n", True),
        ("scrapy_simhash.index.redis.redis_store", "from ..verified import sketch_stores\n", True),
        ("scrapy_simhash.index.tables.tables", "from .. import open_index\n", True),
        ("scrapy_simhash.index.base", "import scrapy_simhash.index.lsh.lsh\n", True),
        ("scrapy_simhash.index.verified.verified", "from ..redis.redis_verified import pair_for\n", False),
        ("scrapy_simhash.index.archive.captures", "from .. import is_server_uri\n", False),
        ("scrapy_simhash.index.lsh.lsh", "from .. import _probe\nfrom ..base import Match\n", False),
    ],
)
def test_the_index_check_sees_upward_imports(module: str, source: str, upward: bool) -> None:
    assert bool(upward_imports(module, False, source)) is upward
