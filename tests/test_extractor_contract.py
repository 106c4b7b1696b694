"""The contract every registered extractor keeps, whatever its library.

Parametrized over :func:`~scrapy_simhash.extract.extractor_names`, so an extractor registered later
is held to the same rules without a new test: bad input gives a reason (never an exception), the
same encodings are read the same way, the same bytes give the same text in any order and in
another process, every corpus page is read, and hostile HTML found by hypothesis breaks nothing.
Tests of one extractor's own options stay in ``test_<name>``-style files (``test_extract.py`` for
trafilatura).
"""

from __future__ import annotations

import gzip
import json
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from scrapy_simhash import tokens
from scrapy_simhash.extract import Extraction, Extractor, decode_html, extractor_names, get_extractor
from scrapy_simhash.page import fingerprint_page

REASONS = {"empty", "binary", "too_large", "no_text", "boilerplate", "extractor_error"}
"""Every reason an extractor gives (``boilerplate``: what it found was the page's template, e.g. the text
outside a short ``article``, as on ``00<article>0``)."""

ARTICLE = (
    "<html><head>{meta}</head><body><article>"
    + "".join(
        f"<p>Paragraph {n} of an article about the café on the river, long enough to be the main text of "
        "the page and to give the fingerprint its thirty tokens and more.</p>"
        for n in range(6)
    )
    + "</article></body></html>"
)
FRENCH = "Ça coûte très cher à Zürich, dit-elle, mais la qualité des pâtisseries est élevée. " * 12


@pytest.fixture(params=extractor_names())
def extractor(request: pytest.FixtureRequest) -> Extractor:
    return get_extractor(request.param)


def french_page(meta: str = "") -> str:
    return f"<html><head>{meta}</head><body><article><p>{FRENCH}</p></article></body></html>"


# -- reasons --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        (b"   \n\t ", "empty"),
        ("", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "binary"),
        (b"%PDF-1.4\n\x00\x01\x02", "binary"),
        ("<p>text</p>\x00\x00", "binary"),
        (b"<html><head><script>var x = 1;</script></head><body></body></html>", "no_text"),
        (b"<html><body><style>p { color: red }</style></body></html>", "no_text"),
    ],
)
def test_bad_input_gives_its_reason(extractor: Extractor, body: bytes | str, reason: str) -> None:
    assert extractor(body) == Extraction(None, reason)


@pytest.mark.parametrize(
    "body",
    [
        "<div>" * 5000 + "deep" + "</div>" * 5000,
        b"<<<<>>>><html<body",  # HTML5 reads "<<<<>>>>" as text: a text or no_text, as the extractor sees it
        b"<p>\xff\xfe\xfd broken \xc3 bytes \xe2\x82</p>" * 50,
    ],
)
def test_malformed_html_gives_a_text_or_a_reason(extractor: Extractor, body: bytes | str) -> None:
    result = extractor(body)
    assert result.reason in (None, "no_text", "extractor_error")
    assert (result.text is None) == (result.reason is not None)


def test_size_cap_in_bytes_and_in_text(extractor: Extractor) -> None:
    page = ARTICLE.format(meta="")
    small = type(extractor)(max_bytes=100)
    assert small(page.encode()) == Extraction(None, "too_large")
    assert small(page) == Extraction(None, "too_large")
    assert extractor(page.encode()).ok


def test_an_article_is_read(extractor: Extractor) -> None:
    text = extractor(ARTICLE.format(meta="").encode()).text
    assert text is not None and "Paragraph 5 of an article" in text


# -- encodings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "encoding"),
    [
        (french_page('<meta charset="iso-8859-1">').encode("latin-1"), None),  # declared in the page
        (french_page().encode("latin-1"), "latin-1"),  # declared by HTTP
        (french_page().encode("latin-1"), None),  # detected
        (french_page().encode("utf-8"), None),
        (b"\xef\xbb\xbf" + french_page().encode("utf-8"), "latin-1"),  # a BOM beats HTTP
        (french_page().encode("utf-16"), None),  # a UTF-16 BOM: NUL bytes, but text
        (french_page().encode("latin-1"), "utf-8"),  # a wrong declaration: detection wins
        pytest.param(
            french_page('<meta charset="utf-8">').encode("cp1252"),
            None,
            marks=pytest.mark.xfail(
                strict=True,
                reason="a wrong <meta> declaration: charset_normalizer reads these cp1252 bytes as cp1250",
            ),
        ),
    ],
)
def test_encodings_give_the_same_words(extractor: Extractor, body: bytes, encoding: str | None) -> None:
    result = extractor(body, encoding=encoding)
    assert result.text is not None, result.reason
    assert "\ufffd" not in result.text
    assert set(tokens(result.text)) == set(tokens(FRENCH))


def test_a_str_page_with_a_lone_surrogate_is_read(extractor: Extractor) -> None:
    # The parsers read UTF-8 bytes; a str that cannot be encoded (a surrogate left by a bad decode) is
    # read as a str, not refused as an extractor error.
    page = ARTICLE.format(meta="").replace("café", "caf\udce9")
    result = extractor(page)
    assert result.text is not None, result.reason
    assert "Paragraph 5 of an article" in result.text


@pytest.mark.parametrize("charset", ["rot13", "base64", "zlib", "idna", "punycode", "no-such-charset"])
def test_a_declared_codec_that_is_no_charset_is_ignored_like_an_unknown_one(
    extractor: Extractor, charset: str
) -> None:
    """w3lib accepts any Python codec name as a charset; bytes-to-bytes codecs and the IDNA ones
    must be ignored as an unknown name is, in the HTTP header and in the page's own declarations."""
    plain = ARTICLE.format(meta="").encode()
    expected = fingerprint_page(plain, extractor=extractor)
    assert expected.simhash is not None
    assert fingerprint_page(plain, encoding=charset, extractor=extractor) == expected
    declared_in_page = [
        ARTICLE.format(meta=f'<meta charset="{charset}">').encode(),
        f'<?xml version="1.0" encoding="{charset}"?>'.encode() + plain,
    ]
    for body in declared_in_page:
        page = fingerprint_page(body, extractor=extractor)
        assert page.reason is None and page.simhash == expected.simhash
    assert "café" in decode_html(plain, charset)


def test_an_xml_prolog_with_an_encoding_is_accepted(extractor: Extractor) -> None:
    body = '<?xml version="1.0" encoding="utf-8"?>' + ARTICLE.format(meta="")
    assert extractor(body).ok
    assert extractor(body.encode()).ok


# -- determinism ----------------------------------------------------------------------------------

SAMPLE = 24


@pytest.fixture(scope="module")
def sample_pages(corpus: Path) -> list[Path]:
    files = sorted((corpus / "pages").rglob("*.html.gz"))
    return files[:: max(1, len(files) // SAMPLE)][:SAMPLE]


def _texts(extractor: Extractor, paths: list[Path]) -> dict[str, str | None]:
    return {str(p): extractor(gzip.decompress(p.read_bytes())).text for p in paths}


_IN_ANOTHER_PROCESS = """
import gzip, json, sys
from scrapy_simhash.extract import get_extractor
extractor = get_extractor(sys.argv[1])
paths = json.loads(sys.stdin.read())
print(json.dumps({p: extractor(gzip.decompress(open(p, "rb").read())).text for p in paths}))
"""


def test_the_same_bytes_give_the_same_text_in_any_order_and_process(
    extractor: Extractor, sample_pages: list[Path]
) -> None:
    forward = _texts(extractor, sample_pages)
    assert sum(text is not None for text in forward.values()) > SAMPLE // 2
    backward = _texts(get_extractor(extractor.name), sample_pages[::-1])
    assert backward == forward
    again = _texts(extractor, sample_pages[1::2] + sample_pages[::2])
    assert again == forward
    done = subprocess.run(
        [sys.executable, "-c", _IN_ANOTHER_PROCESS, extractor.name],
        input=json.dumps([str(p) for p in reversed(sample_pages)]),
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    assert json.loads(done.stdout) == forward


def test_an_extractor_pickles_for_worker_processes(extractor: Extractor) -> None:
    copy = pickle.loads(pickle.dumps(extractor))
    assert copy == extractor and copy.description == extractor.description
    page = ARTICLE.format(meta="").encode()
    assert copy(page) == extractor(page)


def test_the_description_names_the_extractor_and_its_version(extractor: Extractor) -> None:
    name, _, _options = extractor.description.partition(";")
    assert name.startswith(f"{extractor.name}/") and len(name) > len(extractor.name) + 1
    assert " " not in extractor.description  # written into WARC fields and CDXJ as one token


# -- the corpus -----------------------------------------------------------------------------------


def test_every_corpus_page_extracts_without_exception(extractor: Extractor, corpus_page_extractions) -> None:
    extractions = corpus_page_extractions(extractor.name)  # extractor(page) of each page, made once
    pages = list(extractions)
    assert len(pages) > 1000, "the corpus should hold over a thousand pages"
    reasons: Counter[str | None] = Counter()
    for path in pages:
        result = extractions[path]
        assert isinstance(result, Extraction)
        assert (result.text is None) == (result.reason is not None), path
        reasons[result.reason] += 1
        if result.text is not None:
            assert result.text.strip()
    # Nearly every page of an extraction benchmark has a main text.
    assert reasons[None] / len(pages) > 0.95, reasons
    assert "extractor_error" not in reasons, reasons
    # Real articles are not taken for the site's template (trafilatura: 7 of 1,424 pages measured, the
    # cascade 5). Resiliparse alone: 14, of which 4 are pages where it finds no article at all and keeps only
    # a "you may also like" heading or the footer (dropped as template since link_blocks.py).
    assert reasons["boilerplate"] <= 15, reasons


# -- hostile HTML ---------------------------------------------------------------------------------

_PIECES = st.sampled_from(
    [
        "<html>", "</html>", "<head>", "<body>", "</body>", "<p>", "</p>", "<div>", "</div>", "<article>",
        "<table><tr><td>", "</td></tr>", "<script>", "</script>", "<style>", "</style>", "<!--", "-->",
        "<![CDATA[", "]]>", "<?xml version='1.0' encoding='rot13'?>", '<meta charset="utf-16">',
        '<meta http-equiv="content-type" content="text/html; charset=base64">', "<!DOCTYPE html>",
        "&amp;", "&#0;", "&#xD800;", "&#1114112;", "&nbsp;", "&bogus;", "<", ">", "</", "<p class='x", '"',
        "<svg><foreignObject><p>", "<math><mi>", "<noscript>", "<template>", "<select><option>",
        "<plaintext>", "<textarea>", "<title>", "<frameset>", "\x00", "\ufeff", "\u202e", "\ud7ff",
        "Words of the main text, long enough to matter. ",
    ]
)  # fmt: skip
_HOSTILE = st.lists(st.one_of(_PIECES, st.text(max_size=40)), max_size=80).map("".join)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    page=_HOSTILE,
    as_bytes=st.sampled_from([None, "utf-8", "utf-16", "latin-1"]),
    declared=st.sampled_from([None, "utf-8", "latin-1", "rot13", "utf-16", "bogus"]),
)
@example(page="00<article>0", as_bytes=None, declared=None)  # the line outside a short article: boilerplate
def test_hostile_html_gives_a_text_or_a_reason(
    extractor: Extractor, page: str, as_bytes: str | None, declared: str | None
) -> None:
    body: bytes | str = page if as_bytes is None else page.encode(as_bytes, errors="replace")
    result = extractor(body, "http://example.com/x", declared)
    assert isinstance(result, Extraction)
    if result.text is None:
        assert result.reason in REASONS
    else:
        assert isinstance(result.text, str) and result.text.strip() and result.reason is None
    assert extractor(body, "http://example.com/x", declared) == result


@pytest.mark.parametrize(
    "page",
    [
        "<NAV></NAV>\x08",  # found by the fuzz test: lxml refuses to set a text holding a control character
        "<body><p>Words of the page.</p><nav><a href='/'>Home</a></nav>\x01 words after the menu</body>",
    ],
)
def test_control_characters_beside_a_template_region_are_no_error(extractor: Extractor, page: str) -> None:
    result = extractor(page, "http://example.com/x")
    assert result.reason != "extractor_error"
