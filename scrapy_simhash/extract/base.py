"""What every main-text extractor shares: the result type, the guards and the decoding.

An extractor turns a page's bytes into its main text or a short reason why there is none
(``binary``, ``too_large``, ``empty``, ``no_text``, ``boilerplate``, ``extractor_error``, ...), never an
exception:
callers count reasons in their statistics. Subclasses implement :meth:`Extractor.main_text` on
decoded HTML; the checks on size, emptiness and binary bodies, the decoding, and the removal of the
site's template from the result (:mod:`.boilerplate`) happen here once, so that every extractor answers
the same bad input with the same reason and every one benefits from the same cleanup.

Fingerprints made by different extractors (or options) are not comparable, so an extractor
describes itself in one string, ``name/version;option=value;...``, stored next to every fingerprint:
the subclass's :attr:`Extractor.identity`, then the shared steps that change text (``;boilerplate=2``: the
template step's rules, counted up when they change what a page's text is).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from .boilerplate import parse_page, split_tree
from .charset import decode_html, without_surrogates

if TYPE_CHECKING:
    from lxml import etree

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


def looks_binary(body: bytes) -> bool:
    """NUL bytes near the start: images, PDFs, archives served as text/html."""
    head = body[:_BINARY_SNIFF]
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 BOM: text with NULs
        return False
    return b"\x00" in head


@dataclass(frozen=True)
class Extractor:
    """A configured main-text extractor; picklable, so it can travel to worker processes."""

    name: ClassVar[str] = ""
    """The name :func:`~scrapy_simhash.extract.get_extractor` knows it by (``SIMHASH_EXTRACTOR``)."""

    max_bytes: int = DEFAULT_MAX_BYTES
    drop_boilerplate: bool = True
    """Drop the site's template (banners, navigation, footers) from the main text, and answer
    ``boilerplate`` for a page that has little text of its own (:mod:`.boilerplate`)."""

    @property
    def description(self) -> str:
        """``name/version;option=value;...``: written next to every fingerprint.

        Fingerprints are only comparable between equal descriptions, so every step that changes the
        text is in it: the extractor's own :attr:`identity`, then ``;boilerplate=2`` (the template step's
        rules: 1 before :mod:`.link_blocks`).
        """
        return self.identity + (";boilerplate=2" if self.drop_boilerplate else "")

    @property
    def identity(self) -> str:
        """The extractor and its options, ``name/version;option=value;...`` (subclasses say it)."""
        raise NotImplementedError

    def main_text(self, html: str, url: str | None) -> str | None:
        """The main text of decoded ``html``, or None when the page has none."""
        raise NotImplementedError

    def main_text_and_tree(self, html: str, url: str | None) -> tuple[str | None, etree._Element | None]:
        """:meth:`main_text`, and the page's lxml tree when the extractor parsed it into one the template
        step can read (:func:`~scrapy_simhash.extract.boilerplate.reusable_tree`), else None.

        The template step then reuses that tree instead of parsing the page a second time, and
        consumes it. Extractors that parse with lxml override this; the text must be
        :meth:`main_text`'s.
        """
        return self.main_text(html, url), None

    def __call__(self, body: bytes | str, url: str | None = None, encoding: str | None = None) -> Extraction:
        try:
            return self._extract(body, url, encoding)
        except Exception as exc:  # parsers fail in many ways on hostile HTML
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
            html = without_surrogates(body)
        if not html.strip():
            return Extraction(None, "empty")
        if "\x00" in html[:_BINARY_SNIFF]:
            return Extraction(None, "binary")
        # lxml refuses str input that declares an encoding in an XML prolog.
        if html.lstrip().startswith("<?xml"):
            html = html.split("?>", 1)[-1]
        if not self.drop_boilerplate:
            text, tree = self.main_text(html, url), None
        else:
            text, tree = self.main_text_and_tree(html, url)
        if not text or not text.strip():
            return Extraction(None, "no_text")
        if self.drop_boilerplate:
            text = split_tree(tree if tree is not None else parse_page(html), text).text
            if text is None:
                return Extraction(None, "boilerplate")
        return Extraction(text, None)
