"""Bytes to text the way browsers and Scrapy do: BOM, HTTP charset, ``<meta>``, then detection.

The Scrapy middleware and the WARC tools both decode through here, so a live crawl and a
reprocessed archive read the same bytes as the same text, whichever extractor follows.
"""

from __future__ import annotations

import re


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


_SURROGATE = re.compile("[\ud800-\udfff]")


def without_surrogates(html: str) -> str:
    """``html`` with each surrogate code point (a str decoded with ``surrogateescape``, say) as U+FFFD:
    the parsers read UTF-8, which has no such code points, and stop at one (lxml drops the rest of the
    page) or fail. Bytes need no such step: :func:`decode_html` replaces what it cannot decode."""
    try:
        html.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", html)
    return html
