"""The Resiliparse extractor: main content only, its options in the description, reasons not exceptions."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from scrapy_simhash.extract import Extraction, ResiliparseExtractor, get_extractor

pytest.importorskip("resiliparse")

ARTICLE = (
    "<html><head><title>Harbour lights</title></head><body>"
    '<nav class="menu"><a href="/">Home</a> <a href="/news">News</a> <a href="/sport">Sport</a></nav>'
    "<article><h1>Harbour lights</h1>"
    + "".join(
        f"<p>Paragraph {n} tells the reader about lighthouses, harbours and the keepers who lived there, "
        'and <a href="/keepers">their families</a>.</p>'
        for n in range(8)
    )
    + '<img src="/lamp.jpg" alt="ALTTEXTMARKER">'
    + '<form><input type="text" value="FORMFIELDMARKER"></form>'
    + "<noscript>NOSCRIPTMARKER</noscript>"
    + "</article>"
    '<section id="comments" class="comments"><h3>Comments</h3><div class="comment">'
    "<p>COMMENTMARKER I really liked this article about lighthouses and keepers.</p></div></section>"
    '<footer class="footer"><p>Copyright FOOTERMARKER. All rights reserved.</p></footer>'
    "</body></html>"
)


def test_registered_by_name():
    assert get_extractor("resiliparse") == ResiliparseExtractor()


def test_main_text_without_alt_texts_form_fields_noscript_comments_or_footer():
    """Reader comments change over time, the article does not: they stay out, as with trafilatura."""
    result = ResiliparseExtractor()(ARTICLE.encode())
    assert result.ok, result
    text = result.text
    assert "Paragraph 0 tells the reader" in text and "Paragraph 7" in text
    assert "their families" in text  # a link's text is the article's text; its target is not
    assert "/keepers" not in text
    for marker in ("ALTTEXTMARKER", "FORMFIELDMARKER", "NOSCRIPTMARKER", "FOOTERMARKER", "COMMENTMARKER"):
        assert marker not in text, marker


CAPTIONED = ARTICLE.replace(
    '<img src="/lamp.jpg" alt="ALTTEXTMARKER">',
    '<div class="wp-caption"><img src="/lamp.jpg">'
    '<p class="wp-caption-text">CAPTIONMARKER The lamp room at dusk.</p>'
    '<div class="InlineImage-imageEmbedCredit">CREDITMARKER Harbour Museum</div></div>',
)


@pytest.mark.parametrize("name", ["resiliparse", "resiliparse+trafilatura"])
def test_picture_captions_and_credits_are_not_main_text(name: str) -> None:
    """A photo's caption and credit are not the article (Resiliparse keeps them, the corpus's truth not)."""
    text = get_extractor(name)(CAPTIONED.encode()).text
    assert "Paragraph 0 tells the reader" in text and "Paragraph 7" in text
    assert "CAPTIONMARKER" not in text and "CREDITMARKER" not in text
    kept = ResiliparseExtractor(captions=True)(CAPTIONED.encode()).text
    assert "CAPTIONMARKER" in kept and "CREDITMARKER" in kept  # the option's other setting
    options = [option.removeprefix("fast.") for option in get_extractor(name).description.split(";")]
    assert "captions=0" in options


@pytest.mark.parametrize("name", ["resiliparse", "resiliparse+trafilatura"])
def test_the_headline_is_not_main_text(name: str) -> None:
    """The page's ``h1`` is its title, not its text: trafilatura's text and the corpus's truth omit it."""
    page = ARTICLE.replace("<h1>Harbour lights</h1>", "<h1>HEADLINEMARKER Harbour lights</h1>").encode()
    text = get_extractor(name)(page).text
    assert "Paragraph 0 tells the reader" in text and "Paragraph 7" in text
    assert "HEADLINEMARKER" not in text
    assert "HEADLINEMARKER" in ResiliparseExtractor(headline=True)(page).text  # the option's other setting
    options = [option.removeprefix("fast.") for option in get_extractor(name).description.split(";")]
    assert "h1=0" in options


def test_description_names_library_version_and_options():
    from importlib.metadata import version

    description = ResiliparseExtractor().description
    assert description.startswith(f"resiliparse/{version('resiliparse')};main=1;")
    for option in ("alt=0", "links=0", "forms=0", "noscript=0", "comments=0", "meta=0"):
        assert option in description.split(";")
    assert ResiliparseExtractor(main_content=False).description != description


def test_deterministic_across_calls_and_pickling():
    extractor = ResiliparseExtractor()
    first = extractor(ARTICLE.encode())
    clone = pickle.loads(pickle.dumps(extractor))
    assert clone == extractor
    assert [extractor(ARTICLE.encode()) for _ in range(3)] == [first] * 3
    assert clone(ARTICLE.encode()) == first


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "binary"),
        (b"<html><head><script>var x = 1;</script></head><body></body></html>", "no_text"),
        (b"<<<<>>>><html<body", None),
        ("<div>" * 5000 + "deep" + "</div>" * 5000, None),
        (b"<p>\xff\xfe\xfd broken \xc3 bytes \xe2\x82</p>" * 50, None),
    ],
)
def test_bad_input_gives_a_reason_not_an_exception(body, reason):
    result = ResiliparseExtractor()(body)
    assert isinstance(result, Extraction)
    assert (result.text is None) == (result.reason is not None)
    if reason is not None:
        assert result.reason == reason
    assert result.reason != "extractor_error"


def test_size_cap():
    assert ResiliparseExtractor(max_bytes=100)(ARTICLE.encode()).reason == "too_large"


_TAGS = st.sampled_from(
    ["p", "div", "article", "nav", "script", "style", "table", "td", "li", "a", "noscript", "!--"]
)
_HTMLISH = st.lists(
    st.one_of(
        st.text(max_size=40),
        _TAGS.map(lambda t: f"<{t}>"),
        _TAGS.map(lambda t: f"</{t}>"),
        st.sampled_from(
            ["<", ">", "&amp;", "&#0;", "&#xD800;", "<?xml encoding='rot13'?>", "<meta charset=utf-7>"]
        ),
    ),
    max_size=60,
).map("".join)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    body=st.one_of(
        st.binary(max_size=2000), _HTMLISH, _HTMLISH.map(lambda s: s.encode("utf-8", "surrogatepass"))
    )
)
@example(body="<NAV></NAV>\x08")  # a control character in the tail of a template region
def test_fuzzed_input_gives_text_or_a_reason_never_an_error(body):
    result = ResiliparseExtractor()(body)
    assert (result.text is None) == (result.reason is not None)
    assert result.reason != "extractor_error", body


def test_same_text_in_another_process():
    code = (
        "import sys; from scrapy_simhash.extract import get_extractor; "
        "sys.stdout.write(get_extractor('resiliparse')(sys.stdin.buffer.read()).text)"
    )
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "LANG"))}
    done = subprocess.run(
        [sys.executable, "-c", code], input=ARTICLE.encode(), capture_output=True, check=True, env=env
    )
    assert done.stdout.decode() == ResiliparseExtractor()(ARTICLE.encode()).text


def test_without_the_package_configuring_it_says_how_to_install(monkeypatch):
    """Refused when configured, instead of every page failing with ``extractor_error``."""
    monkeypatch.setitem(sys.modules, "resiliparse.extract.html2text", None)
    with pytest.raises(ImportError, match=r"a dependency of scrapy-simhash.*pip install resiliparse"):
        ResiliparseExtractor()
