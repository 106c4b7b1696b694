"""What the template step reads of a page's lxml tree: text without spaces, long paragraphs, link text.

:mod:`.boilerplate` and :mod:`.link_blocks` must count alike (a paragraph that is long for one is long for
the other), so both read the tree through these.
"""

from __future__ import annotations

from collections.abc import Iterable

from lxml import etree

try:  # the walks in C (extract/_template_walk.c), built by pip install where a compiler is
    from . import _template_walk as native  # type: ignore[attr-defined]  # a C module: no stub
except ImportError:  # pragma: no cover - not compiled, or built against another lxml's C API
    native = None

LONG_PARAGRAPH = 100
"""A paragraph of this many characters (spaces included, as XPath counts) is article text: an element
that holds three is the article, not the template, whatever its tag or name
(``class="article-body no-share"``)."""

LONG_PARAGRAPHS = etree.XPath(f"descendant::p[string-length(normalize-space()) >= {LONG_PARAGRAPH}]")
"""The long paragraphs under an element, in document order."""
STRING = etree.XPath("string()", smart_strings=False)
"""An element's text as one string, built by libxml2 (its tail left out)."""
_LINK_TEXTS = etree.XPath("descendant::a//text()", smart_strings=False)  # one call, not one a link


def flat(text: str) -> str:
    return "".join(text.split())


def text_of(element: etree._Element) -> str:
    """The element's text without any space (its tail left out): ``"".join(element.itertext())``, built in
    C where the extension is built, else by libxml2 (XPath's ``string()``, about four times cheaper
    than ``itertext``) and split in Python."""
    if native is not None:
        text = native.text_of(element)
        if text is not None:  # None: a text that is not UTF-8 as Python reads it, left to Python
            return text
    return flat(STRING(element))


def mostly_links(block: etree._Element, share: float) -> bool:
    """Whether at least ``share`` of the block's text (spaces left out) is link text."""
    counts = native.link_share(block) if native is not None else None
    if counts is not None:
        text, links = counts
    else:
        text, links = len(text_of(block)), len(flat("".join(_LINK_TEXTS(block))))
    return text > 0 and links >= share * text


def outermost(elements: Iterable[etree._Element]) -> list[etree._Element]:
    """``elements`` (each once, in their order) without those inside another of them: the regions
    removed from a page, none inside another. An element's ancestors are looked up in C where the
    extension is built (each ancestor costs Python an element proxy: a fifth of the template step)."""
    chosen = list(dict.fromkeys(elements))  # an element can be found twice
    if native is not None:
        return native.outermost(chosen)
    marked = set(chosen)
    return [el for el in chosen if not any(a in marked for a in el.iterancestors())]
