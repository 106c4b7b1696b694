"""The template step reuses the extractor's parse: one parse a page, and the same text as two parses.

The old path is spelled out here: the extractor without the template step, then
:func:`~scrapy_simhash.extract.boilerplate.split_template` on the decoded page (its own lxml parse). Every
registered extractor must give that text, page for page, over a sample of the corpus's real pages.
"""

from __future__ import annotations

import functools
import gzip
from pathlib import Path
from typing import Any

import pytest

from scrapy_simhash.extract import Extraction, boilerplate, decode_html, extractor_names, get_extractor
from scrapy_simhash.extract.boilerplate import reusable_tree, split_template

STRIDE = 9
"""Every ninth corpus page of each common kind (see :func:`sample`): the comparison over every page is a
bench-sized job (each page extracted twice more, and parsed once more)."""


def source(page: Path, corpus: Path) -> str:
    """The corpus source a page comes from (its directory under ``pages/``)."""
    return page.relative_to(corpus / "pages").parts[0]


@functools.cache
def xml_declared(page: Path) -> bool:
    return decode_html(gzip.decompress(page.read_bytes())).lstrip().startswith("<?xml")


def sample(extractions: dict[Path, Extraction], corpus: Path) -> list[Path]:
    """The pages the two-parse comparison reads: every page of a rare kind, every :data:`STRIDE`-th of
    the others. A page's kind is its source (each has its own markup), whether it is declared XML (the
    one page text the second parse is given differently) and the extractor's reason (a page without text
    takes no template step). Most pages are articles with text, which all take the same path through the
    step: a ninth of them is still over 150 pages, of every source."""
    kinds: dict[tuple[str, bool, str | None], list[Path]] = {}
    for path in sorted(extractions):
        kind = (source(path, corpus), xml_declared(path), extractions[path].reason)
        kinds.setdefault(kind, []).append(path)
    return sorted(
        p for paths in kinds.values() for p in (paths if len(paths) <= 3 * STRIDE else paths[::STRIDE])
    )


def two_parse_extraction(name: str, body: bytes, url: str | None) -> Extraction:
    """The extraction as it was made before the parse was shared: text, then a second parse for the step."""
    raw = get_extractor(name, drop_boilerplate=False)(body, url)
    if raw.text is None:
        return raw
    html = decode_html(body)
    if html.lstrip().startswith("<?xml"):
        html = html.split("?>", 1)[-1]
    text = split_template(html, raw.text).text
    return Extraction(text, None if text is not None else "boilerplate")


@pytest.mark.parametrize("name", extractor_names())
def test_the_text_is_the_two_parse_text_on_corpus_pages(
    name: str, corpus: Path, corpus_page_extractions
) -> None:
    extractions = corpus_page_extractions(name)  # get_extractor(name)(page) of each page, made once
    pages = sample(extractions, corpus)
    assert len(pages) > 150
    assert {source(p, corpus) for p in pages} == {source(p, corpus) for p in extractions}  # every source
    differ = []
    for path in pages:
        body = gzip.decompress(path.read_bytes())
        if extractions[path] != two_parse_extraction(name, body, None):
            differ.append(path.relative_to(corpus).as_posix())
    assert differ == []


class _CountingParses:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        parse = boilerplate.parse_page

        def counted(html: str):
            self.calls += 1
            return parse(html)

        monkeypatch.setattr("scrapy_simhash.extract.base.parse_page", counted)


ARTICLE = "<html><head><title>t</title></head><body><nav><a href='/'>Home</a> <a href='/n'>News</a></nav>" + (
    "<article><h1>Bridge</h1>"
    + "<p>Councillors met to discuss the new bridge over the river and its cost to the town.</p>" * 8
    + "</article><footer>Riverside Media Group</footer></body></html>"
)


def test_trafilatura_hands_its_tree_to_the_template_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The template step parses nothing of its own after trafilatura, and still drops the template."""
    parses = _CountingParses(monkeypatch)
    result = get_extractor("trafilatura")(ARTICLE.encode())
    assert parses.calls == 0
    assert result.reason is None and "Councillors met" in result.text
    assert "Riverside Media Group" not in result.text


def test_an_extractor_without_a_tree_still_gets_the_step(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("resiliparse")
    parses = _CountingParses(monkeypatch)
    result = get_extractor("resiliparse")(ARTICLE.encode())
    assert parses.calls == 1
    assert result.reason is None and "Riverside Media Group" not in result.text


def test_a_fragment_tree_is_not_reused() -> None:
    """``lxml.html.fromstring`` gives a fragment's only element or its body renamed: the step parses again."""
    from lxml.html import fromstring

    assert reusable_tree(fromstring("<html><body><p>x</p></body></html>")) is not None
    assert reusable_tree(fromstring("<p>x</p>")) is None
    assert reusable_tree(fromstring("<!-- c --><p>one</p><p>two</p>")) is None
    assert reusable_tree(None) is None


@pytest.mark.parametrize(
    "html",
    [
        "<!-- a comment first --><p>Councillors met to discuss the new bridge.</p>",
        "<!-- c --><div><a href='/a'>Menu one</a> <a href='/b'>Menu two</a></div><p>Short own text here.</p>",
    ],
)
def test_pages_whose_tree_is_not_reused_keep_the_two_parse_text(html: str) -> None:
    for name in extractor_names():
        assert get_extractor(name)(html.encode()) == two_parse_extraction(name, html.encode(), None), name


def test_an_elements_text_is_the_join_of_its_itertext(corpus: Path) -> None:
    """The step reads an element's text with XPath's ``string()``: the same as joining ``itertext()``, on
    every element of sample corpus pages, through either parser (the step's own and trafilatura's)."""
    from trafilatura.utils import load_html

    pages = sorted((corpus / "pages").rglob("*.html.gz"))[::60]
    assert len(pages) > 20
    for path in pages:
        html = decode_html(gzip.decompress(path.read_bytes()))
        for doc in (boilerplate.parse_page(html), load_html(html)):
            if doc is None:
                continue
            for element in doc.iter("*"):
                assert boilerplate._text(element) == "".join("".join(element.itertext()).split()), path


# The template step's searches as first written (``.//x``, ``count(.//a) >= 2``): the step now spells them
# with ``descendant::`` axes and ``descendant::a[2]``, which libxml2 evaluates in about half the time; they
# must find the same elements, in the same order.
PLAIN_SEARCHES = {
    "_ATTRIBUTED_XPATH": ".//*[@id or @class or @role or @itemprop]",
    "_LINK_BLOCKS_XPATH": ".//ul[not(ancestor::ul | ancestor::ol)] | .//ol[not(ancestor::ul | ancestor::ol)]"
    " | .//dl | .//p[count(.//a) >= 2] | .//div[count(.//a) >= 2][not(.//div | .//p)]",
    "_LONG_PARAGRAPHS_XPATH": f".//p[string-length(normalize-space()) >= {boilerplate.LONG_PARAGRAPH}]",
}


@pytest.fixture(scope="module")
def parsed_bodies(corpus: Path) -> dict[str, Any]:
    """The ``body`` of every ninth corpus page as the step parses it (None: no body), parsed once for
    all the searches below: they only read the trees."""
    pages = sorted((corpus / "pages").rglob("*.html.gz"))[::9]
    bodies = {}
    for path in pages:
        doc = boilerplate.parse_page(decode_html(gzip.decompress(path.read_bytes())))
        bodies[path.relative_to(corpus).as_posix()] = doc.find("body") if doc is not None else None
    return bodies


@pytest.mark.parametrize("search", sorted(PLAIN_SEARCHES))
def test_each_search_finds_what_its_plain_spelling_finds(search: str, parsed_bodies: dict[str, Any]) -> None:
    from lxml import etree

    fast, plain = getattr(boilerplate, search), etree.XPath(PLAIN_SEARCHES[search])
    assert len(parsed_bodies) > 100
    differ = []
    for name, body in parsed_bodies.items():
        if body is not None and fast(body) != plain(body):
            differ.append(name)
    assert differ == []


def test_one_walk_over_attributes_finds_what_the_separate_searches_found(
    parsed_bodies: dict[str, Any],
) -> None:
    """The rules that read id, class, role and itemprop share one walk of the tree (and search each distinct
    name once): the template elements and the article's markers are those the separate searches found."""
    from lxml import etree

    named, roles = etree.XPath(".//*[@id or @class]"), etree.XPath(".//*[@role]")
    anchors = etree.XPath(".//*[@role='main' or @itemprop='articleBody']")
    assert len(parsed_bodies) > 100
    differ, found = [], 0
    for name, body in parsed_bodies.items():
        if body is None:
            continue
        template = {el for el in roles(body) if el.get("role") in boilerplate._ROLES}
        template |= {
            el
            for el in named(body)
            if boilerplate._NAMED.search(f"{el.get('id', '')} {el.get('class', '')}".lower())
        }
        attributed = boilerplate._by_attributes(body)
        found += len(template)
        if set(attributed.template) != template or set(attributed.article) != set(anchors(body)):
            differ.append(name)
    assert found > 1000
    assert differ == []
