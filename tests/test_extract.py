"""The trafilatura extractor's own options and quality floor.

What every extractor must do (reasons, encodings, determinism, the whole corpus, hostile HTML) is
tested for each registered one in ``test_extractor_contract.py``.
"""

from __future__ import annotations

import json

from scrapy_simhash import tokens
from scrapy_simhash.extract import TrafilaturaExtractor as Extractor
from scrapy_simhash.extract import extract_text, get_extractor


def test_coverage_of_ground_truth_tokens(corpus):
    import gzip

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


def test_visible_fallback():
    page = b'<html><body><div class="comments"><p>Some reader words here today</p></div></body></html>'
    assert Extractor()(page).reason == "no_text"
    assert "reader words" in (Extractor(fallback="visible")(page).text or "")


def test_description_names_extractor_and_options():
    a, b = Extractor(), Extractor(favor_precision=True)
    assert a.description.startswith("trafilatura/")
    assert "fast=1" in a.description and "comments=0" in a.description
    assert a.description != b.description


def test_options_reach_the_registered_extractor():
    configured = get_extractor("trafilatura", fast=False, max_bytes=10)
    assert configured == Extractor(fast=False, max_bytes=10)
    assert extract_text("<p>" + "word " * 20 + "</p>", extractor=configured) is None  # too_large
