"""A record's raw block to the HTML page it carries: HTTP parsing, de-chunking, content decoding.

Done here, once, for every reader backend, so warcio and FastWARC cannot give
different bytes to the fingerprint. Lenient on purpose: old archives hold
``Header:value`` lines without a space, chunked bodies with the header kept,
gzip bodies that are not gzip. When a decoding fails the bytes are passed on
as they are and the extractor decides (it reports ``binary``).
"""

from __future__ import annotations

import contextlib
import zlib
from dataclasses import dataclass

from ..extract import declared_encoding
from .reader import ArchiveRecord

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
FINGERPRINTED_RECORD_TYPES = frozenset({"response", "resource"})


@dataclass(frozen=True)
class HttpMessage:
    """An HTTP response as stored: status, headers in order (repeats kept), body still encoded."""

    status: int | None
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


@dataclass(frozen=True)
class HtmlPage:
    """What :func:`~scrapy_simhash.page.fingerprint_page` needs from a record."""

    body: bytes
    url: str | None
    encoding: str | None


def parse_http_response(block: bytes) -> HttpMessage | None:
    """Split ``HTTP/x.y status`` + headers + body; None when the block is not an HTTP response."""
    if not block.startswith(b"HTTP/"):
        return None
    crlf = block.find(b"\r\n\r\n")
    lf = block.find(b"\n\n")
    if crlf >= 0 and (lf < 0 or crlf < lf):
        head, body = block[:crlf], block[crlf + 4 :]
    elif lf >= 0:
        head, body = block[:lf], block[lf + 2 :]
    else:
        head, body = block, b""
    lines = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    parts = lines[0].split(None, 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and headers:  # obsolete line folding
            name, value = headers[-1]
            headers[-1] = (name, f"{value} {line.strip()}")
            continue
        name, sep, value = line.partition(":")
        if sep and name.strip():
            headers.append((name.strip(), value.strip()))
    return HttpMessage(status, headers, body)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def dechunk(body: bytes) -> bytes:
    """Remove HTTP chunked transfer coding; raises ValueError when ``body`` is not chunked."""
    out = bytearray()
    pos = 0
    while True:
        end = body.find(b"\n", pos)
        if end < 0:
            if out:
                return bytes(out)  # last chunk without its terminator: keep what arrived
            raise ValueError("no chunk size line")
        size_text = body[pos:end].split(b";", 1)[0].strip()
        size = int(size_text, 16)  # ValueError when not chunked
        if size == 0:
            return bytes(out)
        start = end + 1
        out += body[start : start + size]
        if start + size >= len(body):
            return bytes(out)  # clipped chunk
        pos = start + size
        if body[pos : pos + 2] == b"\r\n":
            pos += 2
        elif body[pos : pos + 1] == b"\n":
            pos += 1


def decode_content(body: bytes, coding: str | None) -> bytes:
    """Undo ``Content-Encoding`` (gzip, deflate, br when brotli is installed); unchanged on failure."""
    coding = (coding or "").strip().lower()
    try:
        if coding in ("gzip", "x-gzip"):
            return zlib.decompressobj(wbits=47).decompress(body)
        if coding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -15)
        if coding == "br":
            import brotli  # type: ignore[import-not-found]

            return brotli.decompress(body)
        if coding == "zstd":
            import zstandard  # type: ignore[import-not-found]

            return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    except Exception:  # not what the header claims: leave it to the extractor to call it binary
        return body
    return body


def decoded_body(message: HttpMessage) -> bytes:
    body = message.body
    if "chunked" in (message.header("Transfer-Encoding") or "").lower():
        # the header is often kept on bodies stored de-chunked (old crawls): then use them as they are
        with contextlib.suppress(ValueError):
            body = dechunk(body)
    return decode_content(body, message.header("Content-Encoding"))


def html_page(record: ArchiveRecord) -> HtmlPage | None:
    """The HTML page of a ``response`` (2xx) or ``resource`` record, or None when it carries none.

    Responses without an HTTP header block (some non-standard writers) use the
    record's own Content-Type, like resources.
    """
    if record.record_type not in FINGERPRINTED_RECORD_TYPES:
        return None
    message = parse_http_response(record.block) if record.record_type == "response" else None
    if message is not None:
        if message.status is not None and not 200 <= message.status < 300:
            return None
        content_type = message.header("Content-Type")
        body = decoded_body(message)
    else:
        content_type = record.content_type
        if "application/http" in (content_type or ""):
            return None  # claims HTTP but has no status line: damaged
        body = record.block
    if media_type(content_type) not in HTML_TYPES:
        return None  # as in the crawl: the declared type decides, bodies are not sniffed
    return HtmlPage(body, record.target_uri, declared_encoding(content_type))
