"""Main-text extraction on every real page of the corpus, and on hostile input."""

from __future__ import annotations

import gzip
import json
from collections import Counter

import pytest

from scrapy_simhash import tokens
from scrapy_simhash.extract import Extraction, decode_html, extract_text
from scrapy_simhash.extract import TrafilaturaExtractor as Extractor


@pytest.fixture(scope="module")
def pages(corpus):
    files = sorted((corpus / "pages").rglob("*.html.gz"))
    assert len(files) > 1000, "the corpus should hold over a thousand pages"
    return files


def test_every_corpus_page_extracts_without_exception(pages):
    extractor = Extractor()
    reasons = Counter()
    for path in pages:
        result = extractor(gzip.decompress(path.read_bytes()), url=None)
        assert isinstance(result, Extraction)
        assert (result.text is None) == (result.reason is not None), path
        reasons[result.reason] += 1
        if result.text is not None:
            assert result.text.strip()
    # Nearly every page of an extraction benchmark has a main text.
    assert reasons[None] / len(pages) > 0.95, reasons
    assert "extractor_error" not in reasons, reasons
    # Real articles are not taken for the site's template: measured 7 of 1,424 pages
    assert reasons["boilerplate"] <= 10, reasons


def test_coverage_of_ground_truth_tokens(corpus):
    truth = json.loads((corpus / "truth/scrapinghub-aeb/ground-truth.json").read_text(encoding="utf-8"))
    extractor = Extractor()
    coverages = []
    for page_id, entry in truth.items():
        path = corpus / "pages/scrapinghub-aeb" / f"{page_id}.html.gz"
        expected = set(tokens(entry["articleBody"]))
        if len(expected) < 20:
            continue
        text = extractor(gzip.decompress(path.read_bytes()), url=entry["url"]).text or ""
        coverages.append(len(expected & set(tokens(text))) / len(expected))
    coverages.sort()
    median = coverages[len(coverages) // 2]
    mean = sum(coverages) / len(coverages)
    assert len(coverages) > 150
    assert median > 0.9, f"median coverage {median:.3f}"
    assert mean > 0.8, f"mean coverage {mean:.3f}"


ARTICLE = (
    "<html><body><article>"
    + "".join(
        f"<p>Paragraph {i} tells the reader about lighthouses, harbours and the keepers who lived there.</p>"
        for i in range(12)
    )
    + "</article></body></html>"
)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "empty"),
        (b"   \n\t ", "empty"),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "binary"),
        (b"%PDF-1.4\n\x00\x01\x02", "binary"),
        (b"<html><head><script>var x = 1;</script></head><body></body></html>", "no_text"),
        (b"<<<<>>>><html<body", "no_text"),
        ("<div>" * 5000 + "deep" + "</div>" * 5000, None),
    ],
)
def test_bad_input_gives_a_reason_not_an_exception(body, reason):
    result = Extractor()(body)
    if reason is None:
        assert result.reason in (None, "no_text", "extractor_error")
    else:
        assert result == Extraction(None, reason)


def test_size_cap():
    small = Extractor(max_bytes=100)
    assert small(ARTICLE.encode()).reason == "too_large"
    assert small(ARTICLE).reason == "too_large"
    assert Extractor()(ARTICLE.encode()).ok


def test_encodings_argument_meta_and_detection():
    text = "Ça coûte très cher à Zürich, dit-elle, mais la qualité est élevée. " * 20
    html = f"<html><head>{{meta}}</head><body><article><p>{text}</p></article></body></html>"
    latin1_meta = html.format(meta='<meta charset="iso-8859-1">').encode("latin-1")
    latin1_plain = html.format(meta="").encode("latin-1")
    utf8_plain = html.format(meta="").encode("utf-8")
    expected = set(tokens(text))
    for body, encoding in [(latin1_meta, None), (latin1_plain, "latin-1"), (utf8_plain, None)]:
        got = extract_text(body, encoding=encoding)
        assert got is not None
        assert set(tokens(got)) == expected
    # A wrong declaration in HTTP loses to a BOM.
    assert "été" in decode_html(b"\xef\xbb\xbf<p>\xc3\xa9t\xc3\xa9</p>", encoding="latin-1")


def test_xml_prolog_with_encoding_is_accepted():
    body = '<?xml version="1.0" encoding="utf-8"?>' + ARTICLE
    assert extract_text(body) is not None


def test_visible_fallback():
    page = b'<html><body><div class="comments"><p>Some reader words here today</p></div></body></html>'
    assert Extractor()(page).reason == "no_text"
    assert "reader words" in (Extractor(fallback="visible")(page).text or "")


def test_description_names_extractor_and_options():
    a, b = Extractor(), Extractor(favor_precision=True)
    assert a.description.startswith("trafilatura/")
    assert "fast=1" in a.description and "comments=0" in a.description
    assert a.description != b.description


def test_extractor_pickles_for_worker_processes():
    import pickle

    extractor = Extractor(fast=False)
    assert pickle.loads(pickle.dumps(extractor)) == extractor


def test_wrongly_declared_encoding_falls_back_to_detection():
    text = "Ça coûte très cher à Zürich, dit-elle, mais la qualité des pâtisseries est élevée. " * 10
    body = f"<html><body><article><p>{text}</p></article></body></html>".encode("latin-1")
    decoded = decode_html(body, encoding="utf-8")
    assert "\ufffd" not in decoded
    assert "pâtisseries" in decoded


ARTICLE = (
    "<html><head>{meta}</head><body><article>"
    + "".join(
        f"<p>Paragraph {n} of an article about the café on the river, long enough to be the main text of "
        "the page and to give the fingerprint its thirty tokens and more.</p>"
        for n in range(6)
    )
    + "</article></body></html>"
)


@pytest.mark.parametrize("charset", ["rot13", "base64", "zlib", "idna", "punycode", "no-such-charset"])
def test_a_declared_codec_that_is_no_charset_is_ignored_like_an_unknown_one(charset):
    """w3lib accepts any Python codec name as a charset; bytes-to-bytes codecs and the IDNA ones made
    decoding fail (``extractor_error``), while an unknown name was ignored. Both are ignored now, in
    the HTTP header and in the page's own <meta> and XML declarations."""
    from scrapy_simhash.extract import declared_encoding
    from scrapy_simhash.page import fingerprint_page

    plain = ARTICLE.format(meta="").encode()
    expected = fingerprint_page(plain)
    assert expected.simhash is not None
    assert declared_encoding(f"text/html; charset={charset}") is None
    declared_in_page = [
        ARTICLE.format(meta=f'<meta charset="{charset}">').encode(),
        f'<?xml version="1.0" encoding="{charset}"?>'.encode() + plain,
    ]
    assert fingerprint_page(plain, encoding=charset) == expected
    for body in declared_in_page:
        page = fingerprint_page(body)
        assert page.reason is None and page.simhash == expected.simhash
    assert "café" in decode_html(plain, charset)
