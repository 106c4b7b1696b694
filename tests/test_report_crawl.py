"""``SIMHASH_REPORT``: a real crawl of a local site writes the HTML report of its index when it closes."""

from __future__ import annotations

import json
import re

import pytest
from crawl_support import demo_site, run_crawl

from scrapy_simhash.cli import main

ARTICLES = 6
CLUSTERS = [c for c in demo_site.expected_clusters(ARTICLES) if len(c) > 1]
NEAR_DUPLICATES = sum(len(c) - 1 for c in CLUSTERS)


@pytest.fixture(scope="module")
def site():
    with demo_site.serve(demo_site.build_site(ARTICLES)) as base:
        yield base


def test_the_crawl_writes_the_report_and_names_it(site, tmp_path):
    out = tmp_path / "crawl-report.html"
    settings = {
        "SIMHASH_INDEX": str(tmp_path / "index"),
        "SIMHASH_WORKERS": 1,
        "LOG_LEVEL": "INFO",
        "SIMHASH_REPORT": str(out),
        "SIMHASH_KEEP": "first",  # the order of arrival varies: no replacement, near-duplicates counted
    }
    result = run_crawl(site + "/", tmp_path / "run", settings)
    assert result.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    assert f"simhash: report written to {out}" in result.log
    # written after the middleware closed the index (its closing line comes first)
    assert result.log.index("pages fingerprinted") < result.log.index("simhash: report written")
    page = out.read_text()
    assert f'data-count="{len(CLUSTERS)}"' in page
    assert f'id="total-near-duplicates" data-value="{NEAR_DUPLICATES}"' in page
    fingerprinted = result.stat("simhash/computed")
    assert f'id="total-fingerprinted" data-value="{fingerprinted}"' in page
    skipped = sum(v for k, v in result.stats.items() if k.startswith("simhash/skipped/"))
    assert skipped > 0 and f'id="total-skipped" data-value="{skipped}"' in page
    payload = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    members = {m[0][len(site) :] for c in payload["clusters"] for m in c["members"]}
    assert members == {path for cluster in CLUSTERS for path in cluster}
    assert result.stat("simhash/error/report") == 0


def test_without_the_setting_no_report_and_a_bad_path_does_not_fail_the_crawl(site, tmp_path):
    base = {"SIMHASH_INDEX": str(tmp_path / "index"), "SIMHASH_WORKERS": 1, "LOG_LEVEL": "INFO"}
    result = run_crawl(site + "/", tmp_path / "plain", base)
    assert "report written" not in result.log
    blocked = tmp_path / "a-file"
    blocked.write_text("not a directory")
    result = run_crawl(site + "/", tmp_path / "bad", {**base, "SIMHASH_REPORT": str(blocked / "r.html")})
    assert result.stats["finish_reason"] == "finished"
    assert result.stat("simhash/error/report") == 1
    assert "could not be written" in result.log


def test_the_crawl_s_own_warcs_give_the_same_clusters_with_their_texts(site, tmp_path):
    warcs = tmp_path / "warcs"
    settings = {
        "SIMHASH_INDEX": str(tmp_path / "index"),
        "SIMHASH_WORKERS": 1,
        "LOG_LEVEL": "INFO",
        "SIMHASH_WARC_ENABLED": True,
        "SIMHASH_WARC_DIR": str(warcs),
        # every page as a full response record: the site serves some pages byte for byte under two URLs,
        # and a revisit record is counted apart by the report, not shown as a member of its cluster
        "SIMHASH_WARC_REVISITS": False,
    }
    run_crawl(site + "/", tmp_path / "run", settings)
    out = tmp_path / "from-warcs.html"
    assert main(["report", str(warcs), "-o", str(out)]) == 0
    page = out.read_text()
    payload = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    clusters = {frozenset(m[0][len(site) :] for m in c["members"]) for c in payload["clusters"]}
    assert clusters == {frozenset(c) for c in CLUSTERS}
    assert payload["diffs"] and all(d["reason"] is None and d["left"] for d in payload["diffs"])
    assert 'id="total-pages" data-value=""' not in page  # the crawl's responses are in its WARCs


def test_a_second_run_s_report_says_the_index_holds_earlier_pages(site, tmp_path):
    settings = {"SIMHASH_INDEX": str(tmp_path / "index"), "SIMHASH_WORKERS": 1, "LOG_LEVEL": "INFO"}
    first = run_crawl(site + "/", tmp_path / "first", settings)
    out = tmp_path / "second.html"
    second = run_crawl(site + "/", tmp_path / "second", {**settings, "SIMHASH_REPORT": str(out)})
    page = out.read_text()
    stored = first.stat("simhash/index/size")
    assert second.stat("simhash/revisit") == stored  # every page was stored by the first run
    assert f"also hold {stored:,} page(s) stored by earlier runs ({stored:,} seen again)" in page
    assert f'id="total-fingerprinted" data-value="{stored}"' in page
    assert f'data-count="{len(CLUSTERS)}"' in page


def test_a_crawl_that_writes_warcs_shows_the_pair_texts_and_draws_its_own_rule(site, tmp_path):
    """The index keeps each page's WARC record id, the crawl's WARCs the record: the pair texts are
    read from them; the similarity drawn is the crawl's SIMHASH_SIMILARITY."""
    out = tmp_path / "crawl-report.html"
    settings = {
        "SIMHASH_INDEX": str(tmp_path / "index"),
        "SIMHASH_WORKERS": 1,
        "LOG_LEVEL": "INFO",
        "SIMHASH_REPORT": str(out),
        "SIMHASH_WARC_ENABLED": True,
        "SIMHASH_WARC_DIR": "warcs",  # relative: the crawl's working directory
        "SIMHASH_SIMILARITY": 0.6,
    }
    result = run_crawl(site + "/", tmp_path / "run", settings)
    assert result.stat("simhash/error/report") == 0
    page = out.read_text()
    payload = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))
    unshown = [
        (d["a"], d["b"], d["reason"]) for d in payload["diffs"] if d["reason"] is not None or not d["left"]
    ]
    assert payload["diffs"] and not unshown
    warcs = str(tmp_path / "run" / "warcs")
    locators = [m[2] for c in payload["clusters"] for m in c["members"] if c["diff"] is not None]
    assert any(locator.startswith(warcs) for locator in locators)  # file@offset in the crawl's WARCs
    similarity = re.search(r'<svg[^>]*id="hist-similarity".*?</svg>', page, re.S).group(0)
    assert 'class="mt">similarity 0.6</text>' in similarity
    assert "rule: verified, similarity &gt;= 0.6" in page
