"""The site's template is not the page's text: drop it from an extraction, or say the page has none.

Main-text extractors sometimes return a cookie banner, the navigation or the footer, most often on short
pages where the article alone looks too small to be the main text. Two short briefs on one site then
share most of their extracted text and look like near-duplicates. This step runs after every extractor
(:meth:`~scrapy_simhash.extract.base.Extractor.__call__`) and reads the page's lxml tree: the extractor's own
when it parsed the page with lxml (trafilatura: :func:`reusable_tree`), else a parse of its own
(:func:`parse_page`):

- **template regions** are ``nav``, ``aside``, ``form``, page-level ``header`` and ``footer`` (not those
  of an article or section), elements with ``role=navigation|banner|contentinfo|search``, elements whose
  ``id`` or ``class`` names a template part (cookie, consent, gdpr, banner, newsletter, menu, breadcrumb,
  share, related, header, footer, ...), and link lists (``ul``/``ol``/``dl``, and ``p``/``div`` blocks
  with two or more links, whose text is mostly link text). A region that holds the article
  (``article``, ``main``, an ``h1``, ``role=main``, ``itemprop=articleBody``, three long paragraphs) is
  never template: a page wrapped in one big ``form`` keeps its text;
- **blocks after the article** and other pages' links that no name marks (:mod:`.link_blocks`): what
  follows the article's body, runs of link paragraphs, other posts' ``article`` cards, and the heading of
  every region dropped;
- a **brief** is a page whose marked article is short: its only ``article`` element (nested ones not
  counted), or the only one that holds an ``h1``, with fewer than :data:`SHORT_ARTICLE` characters (and
  the guards of :func:`_short_article`, which keep full articles out). On such
  a page the extractors' own rules are weakest (the article alone looks too small to be the main text) and
  they keep chrome no markup names: a video player's controls, teasers, a newsletter prompt. There, every
  extracted line not found in that element is template;
- an extracted **line is template** when its text occurs in a template region and nowhere else on the
  page (a headline that is also a menu entry stays), or, on a brief, when it is not in its article;
- template lines are dropped; when what remains of the page's own text is short
  (:data:`MIN_OWN_CHARS`) and the template text dropped is longer, the page has **no main text of its
  own** (reason ``boilerplate``).

Everything is decided from the page's own bytes: no state across pages, so the same bytes give the same
text in any order and in any process.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from lxml import etree

from . import link_blocks
from .charset import without_surrogates
from .tree_text import LONG_PARAGRAPH as LONG_PARAGRAPH  # the threshold the step reads by (re-exported)
from .tree_text import LONG_PARAGRAPHS as _LONG_PARAGRAPHS_XPATH
from .tree_text import flat as _flat
from .tree_text import mostly_links, outermost
from .tree_text import native as _native
from .tree_text import text_of as _text

MIN_OWN_CHARS = 200
"""Below this many non-space characters of the page's own text, a page whose extraction was mostly
template is ``boilerplate`` (a news brief of two sentences with its headline has ~100)."""

SHORT_ARTICLE = 1000
"""A page whose marked article (an ``article`` element) has fewer non-space characters than this is a
brief: the extraction's lines found outside that element are the site's template."""

LINK_DENSITY = 0.7
"""A block whose text is at least this share link text is a link list (menus, footers, related links)."""

TEMPLATE_WORDS = (
    "cookie",
    "consent",
    "gdpr",
    "banner",
    "newsletter",
    "menu",
    "breadcrumb",
    "share",
    "sharing",
    "social",
    "related",
    "navbar",
    "sidebar",
    "header",
    "footer",
    "colophon",
    "site-info",
    "copyright",
    "masthead",
    "subscribe",
    "skip-link",
)
"""``id``/``class`` fragments (case-insensitive substrings) that name a part of the site's template."""

_NAMED = re.compile("|".join(re.escape(word) for word in TEMPLATE_WORDS))
_ROLES = frozenset({"navigation", "banner", "contentinfo", "search"})
# The searches below walk the tree in libxml2. They say ``descendant::x`` rather than ``.//x`` (which
# libxml2 reads as ``descendant-or-self::node()/child::x``, a step more for every node) and
# ``descendant::a[2]`` rather than ``count(.//a) >= 2`` (it stops at the second link instead of counting
# them all): the same elements, found in about half the time. The rules that read attributes (id, class,
# role, itemprop) share one walk of the tree (:func:`_by_attributes`); the rules that read tags iterate by tag
# (``iter``, without XPath).
_ATTRIBUTED_XPATH = etree.XPath("descendant::*[@id or @class or @role or @itemprop]")
_LINK_BLOCKS_XPATH = etree.XPath(
    "descendant::ul[not(ancestor::ul or ancestor::ol)] | descendant::ol[not(ancestor::ul or ancestor::ol)]"
    " | descendant::dl | descendant::p[descendant::a[2]]"
    " | descendant::div[descendant::a[2]][not(descendant::div or descendant::p)]"
)
_IN_CONTENT = etree.XPath("boolean(ancestor::article | ancestor::main | ancestor::section)")
_ANCHOR_TAGS = ("article", "main", "h1")
_ARTICLES_XPATH = etree.XPath("descendant::article[not(ancestor::article)]")
_INVISIBLE = ("script", "style", "noscript", "template", "head")
_BULLETS = "•·-*–—"
_LOCAL = threading.local()
_WORD_BYTES = tuple(word.encode("ascii") for word in TEMPLATE_WORDS)  # lowercase ASCII: the C walk's terms
_ROLE_BYTES = tuple(role.encode("ascii") for role in sorted(_ROLES))


@dataclass(frozen=True)
class Cleaned:
    """An extraction without the template: its text (None: nothing of the page's own is left), and
    how many non-space characters of it were the page's own and the template's."""

    text: str | None
    own_chars: int
    template_chars: int


@dataclass(frozen=True)
class _Attributed:
    """What the page's attributes say, from one walk of its tree: the elements whose role, id or class names
    a template part, and those whose role or itemprop marks the article."""

    template: list[etree._Element]
    article: list[etree._Element]


def _by_attributes(body: etree._Element) -> _Attributed:
    """The walk in C where the extension is built (a quarter of the Python walk's CPU), else in Python;
    the C walk hands a page with an id or class that is not ASCII to Python (``None``)."""
    if _native is not None:
        found = _native.attributed(body, _WORD_BYTES, _ROLE_BYTES)
        if found is not None:
            return _Attributed(*found)
    return _by_attributes_in_python(body)


def _by_attributes_in_python(body: etree._Element) -> _Attributed:
    template: list[etree._Element] = []
    article: list[etree._Element] = []
    named: dict[str, bool] = {}  # many elements share one class: each distinct name is searched once
    for el in _ATTRIBUTED_XPATH(body):
        role = el.get("role")
        if role == "main" or el.get("itemprop") == "articleBody":
            article.append(el)
        if role in _ROLES:
            template.append(el)
            continue
        ident, cls = el.get("id"), el.get("class")
        if ident is None and cls is None:
            continue
        names = f"{ident or ''} {cls or ''}"
        found = named.get(names)
        if found is None:
            found = named[names] = _NAMED.search(names.lower()) is not None
        if found:
            template.append(el)
    return _Attributed(template, article)


def _content_holders(body: etree._Element, attributed: _Attributed) -> set[etree._Element]:
    """The elements that hold the article, so are never template: ``article``, ``main``, an ``h1``,
    ``role=main``, ``itemprop=articleBody`` and their ancestors, and every element that holds three
    long paragraphs (:data:`LONG_PARAGRAPH`)."""
    holders: set[etree._Element] = set()
    for anchor in [*body.iter(*_ANCHOR_TAGS), *attributed.article]:
        holders.add(anchor)
        holders.update(anchor.iterancestors())
    paragraphs: dict[etree._Element, int] = {}
    for paragraph in _LONG_PARAGRAPHS_XPATH(body):
        for ancestor in paragraph.iterancestors():
            paragraphs[ancestor] = paragraphs.get(ancestor, 0) + 1
    holders.update(el for el, count in paragraphs.items() if count >= 3)
    return holders


def _short_article(body: etree._Element, text: str) -> str | None:
    """The text (without spaces) of the element the page marks as its article when the page is a brief,
    else None.

    That element is the only ``article`` (nested ones not counted), or the only one that holds an ``h1``;
    it must be the longest ``article``, shorter than :data:`SHORT_ARTICLE`, hold a line of the extraction
    ``text``, and no element outside it may hold three long paragraphs side by side (an ``article`` that
    is a photo box or a teaser beside the story is not the page's article; teasers' summaries each sit in
    a card of their own).
    """
    articles = _ARTICLES_XPATH(body)
    chosen = articles if len(articles) == 1 else [a for a in articles if a.find(".//h1") is not None]
    if len(chosen) != 1:
        return None
    article, own = chosen[0], _text(chosen[0])
    if len(own) >= SHORT_ARTICLE or any(len(_text(a)) > len(own) for a in articles):
        return None
    if not any((key := _key(line)) and _in_article(key, own) for line in text.splitlines()):
        return None
    parents: dict[etree._Element | None, int] = {}
    for paragraph in _LONG_PARAGRAPHS_XPATH(body):
        if article not in paragraph.iterancestors():
            parent = paragraph.getparent()
            parents[parent] = parents.get(parent, 0) + 1
    return None if any(count >= 3 for count in parents.values()) else own


def _outermost(elements: list[etree._Element], holders: set[etree._Element]) -> list[etree._Element]:
    return outermost(el for el in elements if el not in holders)


def _marked_regions(
    body: etree._Element, holders: set[etree._Element], attributed: _Attributed
) -> list[etree._Element]:
    """The outermost elements whose tag, role, id or class says they are the site's template."""
    found = list(body.iter("nav", "aside", "form"))
    found += [el for el in body.iter("header", "footer") if not _IN_CONTENT(el)]
    found += attributed.template
    return _outermost(found, holders)


def _link_lists(body: etree._Element, holders: set[etree._Element]) -> list[etree._Element]:
    """The outermost blocks whose text is mostly link text (menus, link lists in footers and sidebars)."""
    found = [el for el in _LINK_BLOCKS_XPATH(body) if el not in holders and mostly_links(el, LINK_DENSITY)]
    return _outermost(found, holders)


def _remove(element: etree._Element) -> None:
    """Remove ``element`` from its tree, keeping its tail (the text after it is not part of it)."""
    parent = element.getparent()
    if parent is None:
        return
    if element.tail:
        previous = element.getprevious()
        if previous is not None:
            previous.tail = _settable((previous.tail or "") + element.tail)
        else:
            parent.text = _settable((parent.text or "") + element.tail)
    parent.remove(element)


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _settable(text: str) -> str:
    """``text`` without the control characters lxml's HTML parser keeps but lxml refuses to set (they
    carry no words)."""
    return _NOT_XML.sub("", text)


def _key(line: str) -> str:
    return _flat(line).lstrip(_BULLETS)


_LIST_NUMBER = re.compile(r"^\d+[.)]")


def _in_article(key: str, article: str) -> bool:
    """Whether an extracted line (its :func:`_key`) is text of the article, also when the extractor
    numbered it as an item of an ordered list (``1. ...``: the number is not in the page's text)."""
    return key in article or _LIST_NUMBER.sub("", key, count=1) in article


def parse_page(html: str) -> etree._Element | None:
    """``html`` as this step reads it: the document's root element, comments left out; None when lxml
    cannot read it."""
    try:
        data = html.encode("utf-8")
    except UnicodeEncodeError:
        data = without_surrogates(html).encode("utf-8")
    try:
        return etree.fromstring(data, _parser())
    except (ValueError, etree.XMLSyntaxError):
        return None


def reusable_tree(tree: etree._Element | None) -> etree._Element | None:
    """``tree`` when it is a whole document with a body, the only kind :func:`split_tree` can read in
    place of :func:`parse_page`'s; otherwise None, and the step parses the page itself.

    An extractor that parsed the page with lxml hands its tree over through this, so that the page is
    parsed once (:meth:`~scrapy_simhash.extract.base.Extractor.main_text_and_tree`). lxml's
    ``lxml.html.fromstring`` returns a fragment's only element, or renames a fragment's ``body``:
    those trees go back to a parse of their own.
    """
    if tree is None or tree.getparent() is not None or tree.find("body") is None:
        return None
    return tree


def split_template(html: str, text: str) -> Cleaned:
    """``text`` (an extractor's result for ``html``) without the lines that are the site's template."""
    return split_tree(parse_page(html), text)


def split_tree(doc: etree._Element | None, text: str) -> Cleaned:
    """:func:`split_template` on the page already parsed (its root element, or None when it could not
    be). The tree is consumed: invisible elements and template regions are removed from it."""
    body = doc.find("body") if doc is not None else None
    if body is None:
        return Cleaned(text, len(_flat(text)), 0)
    etree.strip_elements(doc, *_INVISIBLE, with_tail=False)
    brief = _short_article(body, text)
    attributed = _by_attributes(body)
    holders = _content_holders(body, attributed)
    parts = []
    for regions in (
        lambda: _marked_regions(body, holders, attributed),
        lambda: _link_lists(body, holders),  # link lists among what the marked regions leave
        lambda: link_blocks.regions(body, holders),
    ):
        for region in link_blocks.titled(regions(), holders):
            parts.append(_text(region))
            _remove(region)
    template = "\x00".join(parts)
    if not template and brief is None:
        return Cleaned(text, len(_flat(text)), 0)
    own: str | None = None
    kept: list[str] = []
    own_chars = template_chars = 0
    for line in text.splitlines():
        key = _key(line)
        if brief is not None and key and not _in_article(key, brief):
            template_chars += len(key)
            continue
        if len(key) > 1 and key in template:
            if own is None:
                own = _text(doc)
            if key not in own:
                template_chars += len(key)
                continue
        own_chars += len(key)
        kept.append(line)
    if not template_chars:
        return Cleaned(text, own_chars, 0)
    if own_chars < MIN_OWN_CHARS and template_chars > own_chars:
        return Cleaned(None, own_chars, template_chars)
    return Cleaned("\n".join(kept), own_chars, template_chars)


def _parser() -> etree.HTMLParser:
    """An HTML parser that leaves comments out; one a thread (lxml parsers are not thread-safe).

    It reads UTF-8 bytes (the page is decoded already: a ``meta`` charset must not decode it again),
    which libxml2 parses faster than a str, and keeps no table of ``id`` values (``collect_ids``: nothing
    here looks elements up by id). Together they take about a sixth off the parse; the tree is the same."""
    parser = getattr(_LOCAL, "parser", None)
    if parser is None:
        parser = _LOCAL.parser = etree.HTMLParser(
            remove_comments=True, remove_pis=True, collect_ids=False, encoding="utf-8"
        )
    return parser
