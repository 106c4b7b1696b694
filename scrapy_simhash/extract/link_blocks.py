"""What follows the article and points to other pages: blocks the template step finds by the page's structure.

:mod:`.boilerplate` finds the site's template by names (``nav``, ``class="related"``) and by link density
(menus). A main-text extractor whose container is wider than the article (Resiliparse most often) also
keeps what no name marks and whose link text is diluted by summaries: other posts' teaser cards, a
"read more" run of links, the widgets and author boxes after the story, and the headings of blocks the
step already dropped ("Related articles" left alone once its list is gone). The corpus's ground truths
and trafilatura end at the article. These rules read the same lxml tree, after the step's own regions
are removed (:func:`~scrapy_simhash.extract.boilerplate.split_tree`):

- **after the article**: the element whose long paragraphs (:data:`LONG_PARAGRAPH`) make up at least half
  of the page's long-paragraph text is the article's body (at least three of them); every element that
  follows it, or follows one of its ancestors, is not the article. Inside an ``article`` element
  (or ``itemprop=articleBody``) the article goes on to the last block that holds a long paragraph: an
  article's later sections (an ``<h2>``, then a ``<div>`` of paragraphs) are the article;
- **link runs**: two or more sibling paragraphs in a row that are each nothing but a link;
- **other posts' cards**: three or more ``article`` elements under one parent, outside the ``article``
  that holds the page's ``h1``, none holding an ``h1``;
- **titles**: a region's heading goes with it: the ``h2``-``h6`` element just before it, or just before
  the ancestor it starts (``<h3>Related</h3><div><ul>...``).

As in the template step, a region never holds the article (the step's ``holders``: ``article``, ``main``,
an ``h1``, three long paragraphs, and their ancestors), except a card ``article`` as said above, and a
line is only dropped when its text occurs nowhere else on the page. Each rule was measured alone and kept
because it raised token F1 (docs/quality.md, "Choosing the extractor").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from lxml import etree

from .tree_text import LONG_PARAGRAPH as LONG_PARAGRAPH  # re-exported: the rules read by it
from .tree_text import LONG_PARAGRAPHS, STRING, mostly_links, outermost

_HEADINGS = frozenset({"h2", "h3", "h4", "h5", "h6"})
_IN_ARTICLE = etree.XPath("boolean(ancestor-or-self::article | ancestor-or-self::*[@itemprop='articleBody'])")
_LINKED_BLOCKS = etree.XPath("descendant::p[a] | descendant::div[a][not(descendant::div or descendant::p)]")
_ALL_LINK = 0.9
"""A paragraph whose text is at least this share link text is a link."""


def regions(body: etree._Element, holders: set[etree._Element]) -> list[etree._Element]:
    """The outermost blocks the rules find in ``body`` (what the template step left of it)."""
    found = [el for el in [*_after_article(body, holders), *_link_runs(body)] if el not in holders]
    return outermost([*found, *_other_posts(body)])


def titled(regions: Iterable[etree._Element], holders: set[etree._Element]) -> Iterator[etree._Element]:
    """``regions``, then the headings they leave behind (found before any region is removed)."""
    found = list(regions)
    titles = [_title_of(region, holders) for region in found]
    yield from found
    yield from (title for title in titles if title is not None)


def _title_of(region: etree._Element, holders: set[etree._Element]) -> etree._Element | None:
    """The ``h2``-``h6`` just before ``region``, or just before the ancestor it starts (an ancestor with
    no text of its own before it)."""
    node = region
    while True:
        previous = node.getprevious()
        while previous is not None and not isinstance(previous.tag, str):
            previous = previous.getprevious()
        if previous is not None:
            return previous if previous.tag in _HEADINGS and previous not in holders else None
        parent = node.getparent()
        if parent is None or parent in holders or (parent.text and not parent.text.isspace()):
            return None
        node = parent


def _after_article(body: etree._Element, holders: set[etree._Element]) -> list[etree._Element]:
    """The elements after the article's body: its following siblings and its ancestors'."""
    paragraphs = LONG_PARAGRAPHS(body)
    chars: dict[etree._Element, int] = {}
    counts: dict[etree._Element, int] = {}
    for paragraph in paragraphs:
        parent = paragraph.getparent()
        chars[parent] = chars.get(parent, 0) + len(STRING(paragraph))
        counts[parent] = counts.get(parent, 0) + 1
    if not chars:
        return []
    article = max(chars, key=chars.__getitem__)
    if counts[article] < 3 or 2 * chars[article] < sum(chars.values()):
        return []
    holding: set[etree._Element] | None = None  # the elements that hold a long paragraph, when needed
    found: list[etree._Element] = []
    node, parent = article, article.getparent()
    while node is not body and parent is not None:
        following = [el for el in node.itersiblings() if isinstance(el.tag, str)]
        if following and _IN_ARTICLE(parent):  # the article goes on to its last long paragraph
            if holding is None:
                holding = {a for p in paragraphs for a in p.iterancestors()}.union(paragraphs)
            last = max((n for n, el in enumerate(following) if el in holding), default=-1)
            following = following[last + 1 :]
        found += [el for el in following if el not in holders]
        node, parent = parent, parent.getparent()
    return found


def _link_runs(body: etree._Element) -> list[etree._Element]:
    """Paragraphs that are nothing but a link, where two or more follow one another."""
    blocks = set(_LINKED_BLOCKS(body))
    paired = [el for el in blocks if el.getprevious() in blocks or el.getnext() in blocks]
    linked = {el for el in paired if mostly_links(el, _ALL_LINK)}
    return [el for el in linked if el.getprevious() in linked or el.getnext() in linked]


def _other_posts(body: etree._Element) -> list[etree._Element]:
    """Cards of other posts: three or more ``article`` elements under one parent, outside the article
    that holds the page's ``h1`` (the innermost one), none holding an ``h1`` or three long paragraphs."""
    articles = list(body.iter("article"))
    if len(articles) < 4:  # the page's own article and three cards
        return []
    headed = [a for a in articles if a.find(".//h1") is not None]
    if not headed:
        return []
    main = headed[-1]
    lineage = {main, *main.iterancestors()}
    groups: dict[etree._Element | None, list[etree._Element]] = {}
    for article in articles:
        if article in lineage or article.find(".//h1") is not None or main in article.iterancestors():
            continue
        groups.setdefault(article.getparent(), []).append(article)
    return [
        article
        for group in groups.values()
        if len(group) >= 3
        for article in group
        if len(LONG_PARAGRAPHS(article)) < 3
    ]
