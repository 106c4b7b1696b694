"""What the template step reads of a page's lxml tree: text without spaces, long paragraphs, link text.

:mod:`.boilerplate` and :mod:`.link_blocks` must count alike (a paragraph that is long for one is long for
the other), so both read the tree through these.
"""

from __future__ import annotations

from lxml import etree

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
    """The element's text without any space (its tail left out): ``"".join(element.itertext())``, built by
    libxml2 instead of in Python (about four times cheaper)."""
    return flat(STRING(element))


def mostly_links(block: etree._Element, share: float) -> bool:
    """Whether at least ``share`` of the block's text (spaces left out) is link text."""
    text = len(text_of(block))
    return text > 0 and len(flat("".join(_LINK_TEXTS(block)))) >= share * text
