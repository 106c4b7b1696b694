"""``scrapy-simhash fingerprint``: the fingerprint of one text or HTML file."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..fingerprint import SCHEME, simhash_with_count, to_base32, to_hex


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fingerprint",
        help="print the simhash-doc/1 fingerprint of a text or HTML file",
        description="Print the simhash-doc/1 fingerprint of a text file, or of an HTML page's main text.",
    )
    parser.add_argument("file", nargs="?", default="-", help="file to read; - (default) reads standard input")
    parser.add_argument("--html", action="store_true", help="extract the main text from HTML first")
    parser.add_argument("--url", help="the page's URL (helps the extractor with --html)")
    parser.add_argument("--encoding", help="encoding of the file (default: detected; UTF-8 for text)")
    parser.add_argument("--format", choices=["base32", "hex", "json"], default="base32")
    parser.set_defaults(func=run)


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    return Path(path).read_bytes()


def run(args: argparse.Namespace) -> int:
    data = _read(args.file)
    extractor_name = None
    if args.html:
        from ..extract import DEFAULT_EXTRACTOR

        extraction = DEFAULT_EXTRACTOR(data, url=args.url, encoding=args.encoding)
        extractor_name = DEFAULT_EXTRACTOR.description
        if extraction.text is None:
            print(
                f"scrapy-simhash fingerprint: no main text in {args.file} ({extraction.reason})",
                file=sys.stderr,
            )
            return 1
        text = extraction.text
    else:
        text = data.decode(args.encoding or "utf-8", errors="replace")
    value, count = simhash_with_count(text)
    if args.format == "json":
        record = {
            "simhash": to_base32(value),
            "simhash_hex": to_hex(value),
            "scheme": SCHEME,
            "extractor": extractor_name,
            "tokens": count,
        }
        print(json.dumps(record, ensure_ascii=False))
    elif count == 0:
        print(f"scrapy-simhash fingerprint: {args.file} has no tokens, so no fingerprint", file=sys.stderr)
        return 1
    else:
        print(to_base32(value) if args.format == "base32" else to_hex(value))
    return 0
