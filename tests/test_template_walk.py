"""The template step's attribute walk in C (``extract/_template_walk.c``) answers as the Python walk does.

The C walk finds the elements whose role, id or class names a template part, and those that mark the
article, reading lxml's tree through lxml's C API. Its answers must be the Python walk's, element for
element and in document order, on every corpus page and on generated markup (case, non-ASCII names,
empty and repeated attributes, entities); a page it cannot fold exactly (an id or class that is not
ASCII) it hands back (``None``), and the step walks in Python.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lxml import etree

from scrapy_simhash.extract import boilerplate, decode_html, tree_text
from scrapy_simhash.extract.boilerplate import TEMPLATE_WORDS, parse_page
from scrapy_simhash.extract.tree_text import outermost


def body_of(html: str) -> etree._Element:
    doc = parse_page(html)
    assert doc is not None
    etree.strip_elements(doc, "script", "style", "noscript", "template", "head", with_tail=False)
    body = doc.find("body")
    assert body is not None
    return body


def c_walk(body: etree._Element) -> tuple[list[etree._Element], list[etree._Element]] | None:
    native = boilerplate._native
    assert native is not None, "the _template_walk C extension did not build or import"
    return native.attributed(body, boilerplate._WORD_BYTES, boilerplate._ROLE_BYTES)


def python_walk(body: etree._Element) -> tuple[list[etree._Element], list[etree._Element]]:
    found = boilerplate._by_attributes_in_python(body)
    return found.template, found.article


def test_the_extension_is_built_and_used() -> None:
    assert boilerplate._native is not None, "the _template_walk C extension did not build or import"
    body = body_of('<body><nav id="Main-MENU">x</nav><div role="main"><p class="share">y</p></div></body>')
    template, article = boilerplate._by_attributes(body).template, boilerplate._by_attributes(body).article
    assert [el.tag for el in template] == ["nav", "p"]
    assert [el.tag for el in article] == ["div"]


def test_words_are_lowercase_ascii() -> None:
    """The C walk lowercases ASCII only and searches for the words as bytes."""
    for word in TEMPLATE_WORDS:
        assert word.isascii() and word == word.lower(), word


def test_every_corpus_page_walks_alike(corpus_pages: list[Path]) -> None:
    handed_back = compared = 0
    for path in corpus_pages:
        doc = parse_page(decode_html(gzip.decompress(path.read_bytes())))
        if doc is None or doc.find("body") is None:
            continue
        etree.strip_elements(doc, "script", "style", "noscript", "template", "head", with_tail=False)
        body = doc.find("body")
        walked = c_walk(body)
        if walked is None:
            handed_back += 1
            continue
        compared += 1
        assert walked == python_walk(body), path
    assert compared > 0.9 * len(corpus_pages), (compared, handed_back)


def test_a_name_only_str_lower_folds_is_handed_back() -> None:
    # KELVIN SIGN lowercases to an ASCII "k": "CooKie" names a cookie banner for Python's str.lower()
    body = body_of('<body><div class="Coo\u212aie-bar">Accept</div><div class="menu">m</div></body>')
    assert c_walk(body) is None
    found = boilerplate._by_attributes(body).template
    assert [el.get("class") for el in found] == ["Coo\u212aie-bar", "menu"]


def test_not_an_element_is_a_type_error() -> None:
    native = boilerplate._native
    assert native is not None
    with pytest.raises(TypeError):
        native.attributed("<body/>", boilerplate._WORD_BYTES, boilerplate._ROLE_BYTES)
    with pytest.raises(TypeError):
        native.attributed(body_of("<body/>"), ("menu",), boilerplate._ROLE_BYTES)


KELVIN = "k\u212a"  # KELVIN SIGN: str.lower() folds it to an ASCII "k"
NAMES = st.sampled_from(
    [*TEMPLATE_WORDS, "Cookie-Notice", "SIDEBAR", "post", "entry-content", "", " ", "x-menu-y", "Ça", KELVIN]
)
ROLES = st.sampled_from(["navigation", "banner", "contentinfo", "search", "main", "Main", "article", ""])
ATTRIBUTES = st.lists(
    st.tuples(st.sampled_from(["id", "class", "role", "itemprop", "data-x", "ID"]), NAMES | ROLES), max_size=4
)


@st.composite
def documents(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 3 if depth < 3 else 0))):
        tag = draw(st.sampled_from(["div", "p", "nav", "section", "span", "ul", "li", "article"]))
        attrs = " ".join(
            f'{name}="{value}"' if draw(st.booleans()) else f"{name}='{value}&amp;'"
            for name, value in draw(ATTRIBUTES)
        )
        parts.append(f"<{tag} {attrs}>text{draw(documents(depth + 1))}</{tag}>")
    return "".join(parts)


@settings(max_examples=300, deadline=None)
@given(documents(), st.sampled_from(["articleBody", "ArticleBody", "other"]))
def test_generated_markup_walks_alike(markup: str, prop: str) -> None:
    body = body_of(f'<html><body><main itemprop="{prop}">{markup}</main></body></html>')
    walked = c_walk(body)
    if walked is not None:
        assert walked == python_walk(body)
    else:
        names = [(el.get("id") or "") + (el.get("class") or "") for el in body.iter()]
        assert not all(name.isascii() for name in names)


def outermost_in_python(elements: list[etree._Element]) -> list[etree._Element]:
    """What :func:`outermost` answers without the extension (its own fallback, not a copy of it)."""
    native, tree_text.native = tree_text.native, None
    try:
        return outermost(elements)
    finally:
        tree_text.native = native


@settings(max_examples=200, deadline=None)
@given(documents(), st.data())
def test_outermost_keeps_the_elements_no_other_holds(markup: str, data: st.DataObject) -> None:
    body = body_of(f"<html><body>{markup}</body></html>")
    elements = list(body.iter())
    picked = data.draw(st.lists(st.sampled_from(elements), max_size=12))  # the body and repeats among them
    assert outermost(picked) == outermost_in_python(picked)
    assert all(not any(a in picked for a in el.iterancestors()) for el in outermost(picked))
    native = boilerplate._native
    assert native is not None
    assert native.outermost(list(dict.fromkeys(picked))) == outermost_in_python(picked)
    with pytest.raises(TypeError):
        native.outermost([body, "p"])


# spaces str.split() splits at (NBSP, ideographic, thin, separators), then one it does not (zero width)
SPACES = st.sampled_from(
    ["", " ", "\n", "\t", "\xa0", "\u3000", "\u2009", "\x1c", "\x85", "\u2028", "\u200b"]
)
WORDS = st.sampled_from(["word", "Wört", "語", "😀", "a&amp;b", "x", "-"])


@st.composite
def texts(draw: st.DrawFn, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(0, 4 if depth < 3 else 1))):
        parts.append(draw(SPACES) + draw(WORDS) + draw(SPACES))
        if depth < 3 and draw(st.booleans()):
            tag = draw(st.sampled_from(["a", "b", "span", "p", "div", "li"]))
            parts.append(f"<{tag}>{draw(texts(depth + 1))}</{tag}>{draw(SPACES)}{draw(WORDS)}")
    return "".join(parts)


def python_link_share(block: etree._Element) -> tuple[int, int]:
    links = tree_text.flat("".join(block.xpath("descendant::a//text()")))
    return len(tree_text.flat(tree_text.STRING(block))), len(links)


@settings(max_examples=300, deadline=None)
@given(texts())
def test_text_and_link_share_are_counted_as_python_counts(markup: str) -> None:
    native = tree_text.native
    assert native is not None
    body = body_of(f"<html><body><div>{markup}</div>tail</body></html>")
    for element in body.iter():
        assert native.text_of(element) == tree_text.flat(tree_text.STRING(element))
        assert native.link_share(element) == python_link_share(element)


def test_every_corpus_block_is_counted_as_python_counts(corpus_pages: list[Path]) -> None:
    native = tree_text.native
    assert native is not None
    for path in corpus_pages[::7]:
        doc = parse_page(decode_html(gzip.decompress(path.read_bytes())))
        if doc is None:
            continue
        for element in [doc, *doc.iter("p", "div", "ul", "li", "nav")]:
            assert native.text_of(element) == tree_text.flat(tree_text.STRING(element)), path
            assert native.link_share(element) == python_link_share(element), path


def test_text_of_decodes_every_utf8_length() -> None:
    """Two- and four-byte sequences (three-byte ones are in the generated texts above). A text that is not
    UTF-8 as Python reads it would be handed back (None): libxml2's trees hold none to test with."""
    native = tree_text.native
    assert native is not None
    assert native.text_of(body_of("<body><p>caf\u00e9 \U0001f600</p></body>")) == "caf\u00e9\U0001f600"
    with pytest.raises(TypeError):
        native.text_of("p")


def test_the_step_gives_the_same_texts_without_the_extension(
    corpus_pages: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Python forms (a machine without a compiler) and the C ones clean a page alike: every fifth
    corpus page, Resiliparse's text through the whole template step, with and without the extension."""
    from scrapy_simhash.extract import get_extractor

    raw = get_extractor("resiliparse", drop_boilerplate=False)
    cleaned: dict[Path, list[boilerplate.Cleaned]] = {}
    for native in (tree_text.native, None):
        monkeypatch.setattr(tree_text, "native", native)
        monkeypatch.setattr(boilerplate, "_native", native)
        for path in corpus_pages[::5]:
            html = decode_html(gzip.decompress(path.read_bytes()))
            text = raw.main_text(html, None)
            if text:
                cleaned.setdefault(path, []).append(boilerplate.split_template(html, text))
    assert len(cleaned) > 200
    changed = [path for path, (c, python) in cleaned.items() if c != python]
    assert not changed, changed[:5]
    assert any(c.template_chars for c, _ in cleaned.values())  # the step did drop template text
