"""The ``scrapy-simhash`` command line.

Each module of this package is one group of subcommands and defines
``register(subparsers)``; :func:`main` finds them, so adding a command means
adding a module and touching nothing else.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence

from .. import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scrapy-simhash",
        description="Near-duplicate detection for web pages, Scrapy crawls and WARC archives.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        importlib.import_module(f"{__name__}.{info.name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # `scrapy-simhash ... | head`
        return 0
    except (ValueError, OSError) as exc:
        print(f"scrapy-simhash {args.command}: error: {exc}", file=sys.stderr)
        return 2
