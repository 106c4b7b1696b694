"""HTML bytes to main text: a choice of extractors behind one contract.

- :mod:`.base`: the :class:`Extractor` contract (reasons instead of exceptions, one description
  string stored next to every fingerprint) and the checks every extractor shares;
- :mod:`.charset`: bytes to text, the same way in a crawl and in an archive;
- one module per extractor (:mod:`.trafilatura`, :mod:`.resiliparse`, ...);
- :mod:`.registry`: extractors by name, for ``SIMHASH_EXTRACTOR`` and ``--extractor``.
"""

from __future__ import annotations

from .base import DEFAULT_MAX_BYTES, Extraction, Extractor, looks_binary
from .charset import declared_encoding, decode_html, document_charset
from .registry import DEFAULT_EXTRACTOR, extractor_for, extractor_names, get_extractor
from .resiliparse import ResiliparseExtractor
from .trafilatura import TrafilaturaExtractor

__all__ = [
    "DEFAULT_EXTRACTOR",
    "DEFAULT_MAX_BYTES",
    "Extraction",
    "Extractor",
    "ResiliparseExtractor",
    "TrafilaturaExtractor",
    "declared_encoding",
    "decode_html",
    "document_charset",
    "extract_text",
    "extractor_for",
    "extractor_names",
    "get_extractor",
    "looks_binary",
]


def extract_text(
    body: bytes | str,
    url: str | None = None,
    encoding: str | None = None,
    *,
    extractor: Extractor = DEFAULT_EXTRACTOR,
) -> str | None:
    """Main text of an HTML page, or ``None`` (call an :class:`Extractor` to learn why)."""
    return extractor(body, url, encoding).text
