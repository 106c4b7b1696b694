"""HTML bytes to main text, with trafilatura, configured for stable fingerprints.

Choices that matter for deduplication:

- ``deduplicate`` is always off: trafilatura's deduplication keeps an LRU cache
  across calls, so the text of a page would depend on the pages seen before it.
- comments are off: reader comments change over time, the article does not.
- ``fast`` mode (no fallback extractors) by default. ``favor_precision=True,
  fast=False`` caught more near-duplicates on the project's measurements
  (F1 0.872 against 0.840 at k = 3) but fingerprints fewer short pages and
  takes 1.4 to 1.7 times as long; see ``docs/quality.md``.
- when trafilatura finds no main text the result is ``None`` with reason
  ``no_text`` (a page without an article, such as an index page, is not
  fingerprinted); ``fallback="visible"`` uses all visible text instead.

Nothing here raises on bad input: every failure is a ``None`` text plus a short
reason (``binary``, ``too_large``, ``empty``, ``no_text``, ``extractor_error``)
that callers count in their statistics.

Fingerprints made by different extractors or options are not comparable, so an
:class:`Extractor` describes itself in one string that is stored next to every
fingerprint it produces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 8 * 1024 * 1024
"""Bodies above this are not extracted: parsing them costs more than they are worth."""

_BINARY_SNIFF = 1024


@dataclass(frozen=True)
class Extraction:
    """The text of one page, or why there is none."""

    text: str | None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.text is not None


def _detect_encoding(body: bytes) -> str | None:
    from charset_normalizer import from_bytes

    best = from_bytes(body[:65536]).best()
    return best.encoding if best else None


# Python codecs that decode text but are no document charset: w3lib accepts their names.
_NOT_CHARSETS = frozenset({"idna", "punycode", "undefined", "unicode-escape", "raw-unicode-escape"})


def document_charset(name: str | None) -> str | None:
    """``name`` as the codec to decode a page with, or None when it is none.

    Unknown names are None (w3lib's reading), and so are the names of codecs that are not text
    encodings (``rot13``, ``base64``, ``zlib``: bytes to bytes) or not document charsets (``idna``,
    ``punycode``): a page that declares one is decoded as if it declared nothing, instead of
    failing to decode.
    """
    import codecs

    from w3lib.encoding import resolve_encoding

    resolved = resolve_encoding(name) if name else None
    if resolved is None:
        return None
    info = codecs.lookup(resolved)
    if not getattr(info, "_is_text_encoding", True) or info.name in _NOT_CHARSETS:
        return None
    return resolved


def declared_encoding(content_type: str | None) -> str | None:
    """The charset a Content-Type header declares (w3lib's reading), or None, also when it names no
    document charset (:func:`document_charset`).

    The Scrapy middleware and the WARC tools both call this, so a live crawl and a
    reprocessed archive decode the same bytes the same way.
    """
    from w3lib.encoding import http_content_type_encoding

    return document_charset(http_content_type_encoding(content_type)) if content_type else None


def decode_html(body: bytes, encoding: str | None = None) -> str:
    """Decode HTML bytes: BOM, then ``encoding`` (e.g. from HTTP), then ``<meta>``, then detection.

    A declaration (``encoding`` or the page's own) that names no document charset is ignored, as an
    unknown one is: the next source decides.
    """
    from w3lib.encoding import html_body_declared_encoding, html_to_unicode

    encoding = document_charset(encoding)
    if encoding is None:
        in_page = html_body_declared_encoding(body)
        if in_page is not None and document_charset(in_page) is None:  # w3lib would use it: skip it
            encoding = _detect_encoding(body) or "utf-8"
    header = f"text/html; charset={encoding}" if encoding else None
    _, text = html_to_unicode(header, body, default_encoding="utf-8", auto_detect_fun=_detect_encoding)
    if "\ufffd" in text and b"\xef\xbf\xbd" not in body:
        # The declared encoding does not fit the bytes (a server that says UTF-8 and
        # sends Latin-1 is common): trust detection over the declaration.
        detected = _detect_encoding(body)
        if detected:
            text = body.decode(detected, errors="replace")
    return text


def looks_binary(body: bytes) -> bool:
    """NUL bytes near the start: images, PDFs, archives served as text/html."""
    head = body[:_BINARY_SNIFF]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 BOM: text with NULs
        return False
    return b"\x00" in head


@dataclass(frozen=True)
class Extractor:
    """A configured main-text extractor; picklable, so it can travel to worker processes."""

    fast: bool = True
    favor_precision: bool = False
    favor_recall: bool = False
    include_tables: bool = True
    fallback: Literal["none", "visible"] = "none"
    max_bytes: int = DEFAULT_MAX_BYTES

    @cached_property
    def description(self) -> str:
        """``name/version;option=value;...``: written next to every fingerprint."""
        import trafilatura

        options = [
            f"fast={int(self.fast)}",
            "comments=0",
            f"tables={int(self.include_tables)}",
            f"precision={int(self.favor_precision)}",
            f"recall={int(self.favor_recall)}",
            f"fallback={self.fallback}",
        ]
        return f"trafilatura/{trafilatura.__version__};" + ";".join(options)

    def __call__(self, body: bytes | str, url: str | None = None, encoding: str | None = None) -> Extraction:
        try:
            return self._extract(body, url, encoding)
        except Exception as exc:  # lxml and trafilatura fail in many ways on hostile HTML
            logger.debug("extraction failed for %s: %r", url, exc)
            return Extraction(None, "extractor_error")

    def _extract(self, body: bytes | str, url: str | None, encoding: str | None) -> Extraction:
        if isinstance(body, (bytes, bytearray, memoryview)):
            body = bytes(body)
            if len(body) > self.max_bytes:
                return Extraction(None, "too_large")
            if not body.strip():
                return Extraction(None, "empty")
            if looks_binary(body):
                return Extraction(None, "binary")
            html = decode_html(body, encoding)
        else:
            if len(body) > self.max_bytes:
                return Extraction(None, "too_large")
            html = body
        if not html.strip():
            return Extraction(None, "empty")
        if "\x00" in html[:_BINARY_SNIFF]:
            return Extraction(None, "binary")
        # lxml refuses str input that declares an encoding in an XML prolog.
        if html.lstrip().startswith("<?xml"):
            html = html.split("?>", 1)[-1]

        import trafilatura

        text = trafilatura.extract(
            html,
            url=url,
            fast=self.fast,
            favor_precision=self.favor_precision,
            favor_recall=self.favor_recall,
            include_comments=False,
            include_tables=self.include_tables,
            deduplicate=False,
            with_metadata=False,
            output_format="txt",
        )
        if not text or not text.strip():
            if self.fallback == "visible":
                text = trafilatura.html2txt(html)
            if not text or not text.strip():
                return Extraction(None, "no_text")
        return Extraction(text, None)


DEFAULT_EXTRACTOR = Extractor()


def extract_text(
    body: bytes | str,
    url: str | None = None,
    encoding: str | None = None,
    *,
    extractor: Extractor = DEFAULT_EXTRACTOR,
) -> str | None:
    """Main text of an HTML page, or ``None`` (use :class:`Extractor` to learn why)."""
    return extractor(body, url, encoding).text
