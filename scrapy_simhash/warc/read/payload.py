"""A record's raw block to the HTML page it carries: HTTP parsing, de-chunking, content decoding.

Done here, once, for every reader backend, so warcio and FastWARC cannot give
different bytes to the fingerprint. Lenient on purpose: old archives hold
``Header:value`` lines without a space, chunked bodies with the header kept,
gzip bodies that are not gzip. When a decoding fails the bytes are passed on
as they are and the extractor decides (it reports ``binary``).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import importlib
import io
import re
import zlib
from dataclasses import dataclass

from ...extract import DEFAULT_MAX_BYTES, declared_encoding
from .links import normalise_digest
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
    too_large: bool = False
    """The body (once decoded) is over the size cap: ``body`` is empty, the page is ``too_large``."""
    undecodable: str | None = None
    """Why the body could not be decoded here (a missing module, named): ``body`` is empty."""


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


class BodyTooLarge(ValueError):
    """The decoded body would exceed the size cap: decoding stopped there (reason ``too_large``)."""


_INFLATE_CHUNK = 1 << 20
"""Compressed bytes fed to a decoder at a time (output is bounded separately, by the cap)."""


def _inflate(body: bytes, wbits: int, limit: int) -> bytes:
    """zlib/gzip/raw deflate, never producing more than ``limit + 1`` bytes (a gzip bomb stops there).

    Only the first gzip member is decoded, as before; a truncated stream gives what arrived.
    """
    decomp = zlib.decompressobj(wbits=wbits)
    out = bytearray()
    view = memoryview(body)
    pos = 0
    while pos < len(view) or decomp.unconsumed_tail:
        data = decomp.unconsumed_tail or view[pos : pos + _INFLATE_CHUNK]
        if not decomp.unconsumed_tail:
            pos += len(data)
        out += decomp.decompress(data, limit + 1 - len(out))
        if len(out) > limit:
            raise BodyTooLarge(f"over {limit} bytes once decoded")
        if decomp.eof:
            break
    return bytes(out)


def _unbrotli(body: bytes, limit: int) -> bytes:
    import brotli

    decomp = brotli.Decompressor()
    out = bytearray()
    try:
        out += decomp.process(body, output_buffer_limit=limit + 1)
    except TypeError:  # brotli < 1.2 cannot bound its output: feed small slices, check after each
        for start in range(0, len(body), 1024):
            out += decomp.process(body[start : start + 1024])
            if len(out) > limit:
                raise BodyTooLarge(f"over {limit} bytes once decoded") from None
        return bytes(out)
    while len(out) <= limit and not decomp.is_finished() and not decomp.can_accept_more_data():
        out += decomp.process(b"", output_buffer_limit=limit + 1 - len(out))
    if len(out) > limit:
        raise BodyTooLarge(f"over {limit} bytes once decoded")
    return bytes(out)


ZSTD_MODULES = ("compression.zstd", "backports.zstd")
"""The standard library's zstd (Python 3.14+), then its backport, the ``zstd`` extra's dependency."""


class DecoderMissing(ImportError):
    """The body's content coding needs a module that is not installed: the page cannot be read here."""


def _unzstd(body: bytes, limit: int) -> bytes:
    """The first zstd frame of ``body``, never more than ``limit + 1`` bytes of it (bombs stop there)."""
    for name in ZSTD_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        out = module.ZstdDecompressor().decompress(body, max_length=limit + 1)
        break
    else:
        try:
            import zstandard  # the older third-party binding
        except ImportError:
            raise DecoderMissing(
                "Content-Encoding zstd, but no zstd module is installed (compression.zstd, backports.zstd "
                "or zstandard): pip install 'scrapy-simhash[zstd]'"
            ) from None
        out = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(body)).read(limit + 1)
    if len(out) > limit:
        raise BodyTooLarge(f"over {limit} bytes once decoded")
    return out


def _decode_one(body: bytes, coding: str, limit: int) -> bytes | None:
    """One content coding undone; None when it is not one we know."""
    if coding in ("gzip", "x-gzip"):
        return _inflate(body, 47, limit)  # 47: gzip or zlib header, auto-detected
    if coding == "deflate":
        try:
            return _inflate(body, 15, limit)
        except zlib.error:
            return _inflate(body, -15, limit)  # raw deflate, as some servers send
    if coding == "br":
        return _unbrotli(body, limit)
    if coding == "zstd":
        return _unzstd(body, limit)
    return None


def content_codings(header: str | None) -> list[str]:
    """``Content-Encoding: gzip, br`` as ``["gzip", "br"]`` (in the order applied; ``identity`` dropped)."""
    codings = (c.strip().lower() for c in (header or "").split(","))
    return [c for c in codings if c and c != "identity"]


def decode_content(body: bytes, coding: str | None, limit: int = DEFAULT_MAX_BYTES) -> bytes:
    """Undo ``Content-Encoding`` (gzip, deflate, br/zstd when installed; several, last applied first).

    Decoding is streamed and stops once the output passes ``limit``: it raises :class:`BodyTooLarge`,
    so a few kilobytes of gzip bomb cost at most ``limit`` bytes of memory. A coding whose module is not
    installed raises :class:`DecoderMissing` (naming what to install). A coding that does not
    fit the bytes (or is unknown) ends decoding there: the bytes are passed on as they are and the
    extractor decides (it reports ``binary``).
    """
    for name in reversed(content_codings(coding)):
        try:
            decoded = _decode_one(body, name, limit)
        except (BodyTooLarge, DecoderMissing):
            raise
        except Exception:  # not what the header claims: leave it to the extractor to call it binary
            return body
        if decoded is None:
            return body
        body = decoded
    return body


def decoded_body(message: HttpMessage, limit: int = DEFAULT_MAX_BYTES) -> bytes:
    """The body with transfer and content codings undone; raises :class:`BodyTooLarge` over ``limit``."""
    body = message.body
    if "chunked" in (message.header("Transfer-Encoding") or "").lower():
        # the header is often kept on bodies stored de-chunked (old crawls): then use them as they are
        # (de-chunking only removes bytes, so it needs no cap of its own)
        with contextlib.suppress(ValueError):
            body = dechunk(body)
    body = decode_content(body, message.header("Content-Encoding"), limit)
    if len(body) > limit:
        raise BodyTooLarge(f"{len(body)} bytes, over {limit}")
    return body


def html_page(record: ArchiveRecord, max_body_size: int = DEFAULT_MAX_BYTES) -> HtmlPage | None:
    """The HTML page of a ``response`` (2xx) or ``resource`` record, or None when it carries none.

    Responses without an HTTP header block (some non-standard writers) use the
    record's own Content-Type, like resources. A body over ``max_body_size`` (after
    decoding) gives a page flagged ``too_large``, without its body; one whose content coding needs a
    module that is not installed a page with the reason in ``undecodable``, without its body.
    """
    if record.record_type not in FINGERPRINTED_RECORD_TYPES:
        return None
    message = parse_http_response(record.block) if record.record_type == "response" else None
    if message is not None:
        if message.status is not None and not 200 <= message.status < 300:
            return None
        content_type = message.header("Content-Type")
        if media_type(content_type) not in HTML_TYPES:
            return None  # decided before decoding: a bomb served as an image costs nothing
        try:
            body = decoded_body(message, max_body_size)
        except BodyTooLarge:
            return HtmlPage(b"", record.target_uri, declared_encoding(content_type), too_large=True)
        except DecoderMissing as exc:
            return HtmlPage(b"", record.target_uri, declared_encoding(content_type), undecodable=str(exc))
    else:
        content_type = record.content_type
        if "application/http" in (content_type or ""):
            return None  # claims HTTP but has no status line: damaged
        body = record.block
    if media_type(content_type) not in HTML_TYPES:
        return None  # as in the crawl: the declared type decides, bodies are not sniffed
    encoding = declared_encoding(content_type)
    if len(body) > max_body_size:
        return HtmlPage(b"", record.target_uri, encoding, too_large=True)
    return HtmlPage(body, record.target_uri, encoding)


_SHA1_BASE32 = re.compile(r"sha1:[A-Z2-7]{32}")


def record_payload_digest(record: ArchiveRecord) -> str:
    """The record's payload digest as ``sha1:<BASE32>``, the form the crawl writes and compares.

    The ``WARC-Payload-Digest`` header when it is a well-formed SHA-1 (base32, or hex as some writers
    put it); otherwise (absent, damaged, another algorithm) the SHA-1 of the payload computed here as
    the standard defines it: the HTTP body with any chunked transfer coding removed and its content
    coding kept (the whole block of a resource record, or of a response without an HTTP head)."""
    header = normalise_digest(record.links.payload_digest if record.links else None)
    if header is not None and _SHA1_BASE32.fullmatch(header):
        return header
    message = parse_http_response(record.block) if record.record_type == "response" else None
    body = record.block if message is None else message.body
    if message is not None and "chunked" in (message.header("Transfer-Encoding") or "").lower():
        with contextlib.suppress(ValueError):
            body = dechunk(body)
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")
