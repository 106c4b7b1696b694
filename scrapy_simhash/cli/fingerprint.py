"""``scrapy-simhash fingerprint``: the fingerprint (or, with ``--scheme minhash``, the MinHash sketch)
of one text or HTML file (gzipped or not).

Without ``--html`` the bytes are hashed as text, as they always were; input that
looks like HTML gets a warning on stderr rather than a silent change of meaning.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import zlib
from pathlib import Path

from ..fingerprint import SCHEME, simhash_with_count, to_base32, to_hex
from ..warc.commandline import add_extractor_argument, extractor_from


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "fingerprint",
        help="print the simhash-doc/1 fingerprint of a text or HTML file",
        description="Print the simhash-doc/1 fingerprint of a text file, or of an HTML page's main text.",
    )
    parser.add_argument(
        "file",
        nargs="?",
        default="-",
        help="file to read; - (default) reads standard input; gzipped input (told by its content, "
        "not its name) is decompressed",
    )
    parser.add_argument(
        "--html",
        action="store_true",
        help="extract the main text from HTML first (without it the file is hashed as plain text, "
        "markup included, and HTML-looking input gets a warning)",
    )
    parser.add_argument("--url", help="the page's URL (helps the extractor with --html)")
    add_extractor_argument(parser)
    parser.add_argument("--encoding", help="encoding of the file (default: detected; UTF-8 for text)")
    parser.add_argument(
        "--scheme",
        choices=["simhash", "minhash"],
        default="simhash",
        help="simhash (default): the 64-bit simhash-doc/1 fingerprint; minhash: the minhash-doc/1 "
        "sketch (128 values of word 3-shingles, docs/minhash-doc-1.md)",
    )
    parser.add_argument(
        "--format",
        choices=["base32", "hex", "json", "text"],
        default=None,
        help="output: base32 (simhash default; 13 characters, the form stored in the index and WARC "
        "records), hex (simhash: 16 digits; minhash: the sketch's bytes), text (minhash default: "
        "base64url of the bytes) or json (the forms plus scheme, extractor and token count)",
    )
    parser.set_defaults(func=run)


_GZIP_MAGIC = b"\x1f\x8b"
_HTML_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<!--.*?-->\s*)*<(?:!doctype\s+html|(?:html|head|body|meta|title|script)[\s>])",
    re.I | re.S,
)
_TAG = re.compile(
    rb"</?(?:html|head|body|div|p|a|span|br|script|style|meta|link|li|ul|table|td|tr|h[1-6]|img)\b", re.I
)
_MANY_TAGS = 20


def _read(path: str) -> bytes:
    """The file's bytes; gzip (told by its magic bytes, whatever the name) is decompressed."""
    data = sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    if not data.startswith(_GZIP_MAGIC):
        return data
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path} starts like gzip but cannot be decompressed: {exc}") from None


def looks_like_html(data: bytes) -> bool:
    """Starts with a doctype or <html>, or has many HTML tags: hashing it as text would hash the markup."""
    head = data[:65536]
    return bool(_HTML_START.match(head)) or len(_TAG.findall(head)) >= _MANY_TAGS


def _minhash_output(text: str, args: argparse.Namespace, extractor_name: str | None) -> int:
    from ..fingerprint.minhash import SCHEME as MINHASH_SCHEME
    from ..fingerprint.minhash import minhash_with_count

    sketch, count = minhash_with_count(text)
    if args.format == "json":
        record = {
            "minhash": sketch.to_text(),
            "scheme": MINHASH_SCHEME,
            "num_values": sketch.num_values,
            "extractor": extractor_name,
            "tokens": count,
        }
        print(json.dumps(record, ensure_ascii=False))
    elif count == 0:
        print(f"scrapy-simhash fingerprint: {args.file} has no tokens, so no sketch", file=sys.stderr)
        return 1
    else:
        print(sketch.to_bytes().hex() if args.format == "hex" else sketch.to_text())
    return 0


def run(args: argparse.Namespace) -> int:
    minhash = getattr(args, "scheme", "simhash") == "minhash"
    if args.format is None:
        args.format = "text" if minhash else "base32"
    if args.format == ("base32" if minhash else "text"):
        scheme = "minhash" if minhash else "simhash"
        print(
            f"scrapy-simhash fingerprint: --format {args.format} does not apply to --scheme {scheme}; "
            f"use {'text, hex or json' if minhash else 'base32, hex or json'}",
            file=sys.stderr,
        )
        return 2
    if args.extractor is not None and not args.html:
        print(
            "scrapy-simhash fingerprint: --extractor applies to --html only (without it the file is "
            "hashed as text, nothing is extracted)",
            file=sys.stderr,
        )
        return 2
    extractor = extractor_from(args) if args.html else None
    data = _read(args.file)
    extractor_name = None
    if extractor is not None:
        extraction = extractor(data, url=args.url, encoding=args.encoding)
        extractor_name = extractor.description
        if extraction.text is None:
            print(
                f"scrapy-simhash fingerprint: no main text in {args.file} ({extraction.reason})",
                file=sys.stderr,
            )
            return 1
        text = extraction.text
    else:
        if looks_like_html(data):
            name = "standard input" if args.file == "-" else args.file
            print(
                f"scrapy-simhash fingerprint: warning: {name} looks like HTML but is hashed as plain "
                "text, markup included; add --html to fingerprint its main text (as a crawl does)",
                file=sys.stderr,
            )
        text = data.decode(args.encoding or "utf-8", errors="replace")
    if minhash:
        return _minhash_output(text, args, extractor_name)
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
