"""``SIMHASH_KEEP``: in a crawl, the copy a person would keep is the original, whatever order it came in.

A local news site whose tracking-parameter variants and print view are linked (and so fetched, one
request at a time in link order) before the page they copy: with ``SIMHASH_ACTION = "drop"`` the
canonical page must still reach the spider, and the metadata record, ``response.meta`` and the
crawl's report must name it the original.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from crawl_support import demo_site, run_crawl
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.warc.records import SimhashFields, parse_fields

STORY_A = "/news/a.html"
A_UTM = "/news/a.html?utm_source=newsletter&utm_medium=email"
A_PRINT = "/print/a.html"
A_FBCLID = "/news/a.html?fbclid=IwAR0xyz"
STORY_B = "/news/b.html"
B_REF = "/news/b.html?ref=homepage"
STORY_C = "/news/c.html"
LINK_ORDER = [A_UTM, A_PRINT, STORY_A, A_FBCLID, B_REF, STORY_B, STORY_C]
"""Fetched in this order: the canonical pages after their variants (and one variant after)."""


def _page(title: str, paragraphs: list[str], canonical: str | None) -> bytes:
    link = "" if canonical is None else f'<link rel="canonical" href="{html.escape(canonical)}">'
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return (
        f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title}</title>{link}</head>'
        f"<body><article><h1>{title}</h1>{body}</article></body></html>"
    ).encode()


def build_site() -> dict[str, bytes]:
    """Article a declares its canonical URL on every copy (relative on the variants, absolute on
    itself: resolved alike); article b declares none, so only its tracking parameter tells."""
    articles = demo_site.make_articles(3, seed=7)
    a, b, c = (article.paragraphs for article in articles)
    pages = {
        A_UTM: _page("A", a, STORY_A),
        A_PRINT: _page("A (print)", a, STORY_A),
        STORY_A: _page("A", a, "http://{host}" + STORY_A),
        A_FBCLID: _page("A", a, STORY_A),
        B_REF: _page("B", b, None),
        STORY_B: _page("B", b, None),
        STORY_C: _page("C", c, None),
    }
    index = "".join(f'<li><a href="{html.escape(link)}">{html.escape(link)}</a></li>' for link in LINK_ORDER)
    pages["/"] = f"<html><body><ul>{index}</ul></body></html>".encode()
    return pages


@pytest.fixture(scope="module")
def site():
    pages = build_site()
    served: dict[str, bytes] = {}
    with demo_site.serve(served) as base:  # type: ignore[arg-type]
        host = base.removeprefix("http://")
        served.update({path: body.replace(b"{host}", host.encode()) for path, body in pages.items()})
        yield base


def crawl(site: str, tmp: Path, keep: str, action: str = "drop", run: str = "run") -> tuple:
    settings = {
        "SIMHASH_ACTION": action,
        "SIMHASH_KEEP": keep,
        "SIMHASH_WORKERS": 1,
        "SIMHASH_INDEX": str(tmp / "index"),
        "SIMHASH_WARC_ENABLED": True,
        "SIMHASH_WARC_DIR": str(tmp / run / "warcs"),
        "SIMHASH_REPORT": str(tmp / run / "report.html"),
        "CONCURRENT_REQUESTS": 1,  # one page at a time, in link order: the variants come first
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
        "LOG_LEVEL": "DEBUG",
    }
    result = run_crawl(site + "/", tmp / run, settings)
    return result, _metadata(tmp / run / "warcs")


def _metadata(directory: Path) -> dict[str, SimhashFields]:
    found = {}
    for path in sorted(directory.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for record in ArchiveIterator(fh):
                if record.rec_type == "metadata":
                    uri = record.rec_headers.get_header("WARC-Target-URI")
                    found[uri] = SimhashFields.from_pairs(parse_fields(record.content_stream().read()))
    return found


def _report_originals(report: Path) -> set[str]:
    """The URLs the HTML report marks as originals (from its embedded data)."""
    text = report.read_text(encoding="utf-8")
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', text, re.S)
    assert data is not None

    payload = json.loads(data.group(1).replace("<\\/", "</"))
    # each member: [uri, date, locator, distance, similarity, original]
    return {member[0] for cluster in payload["clusters"] for member in cluster["members"] if member[5]}


def test_drop_keeps_the_canonical_page_and_names_it_the_original(site: str, tmp_path: Path) -> None:
    result, metadata = crawl(site, tmp_path, "preferred")
    reached = {path for path in result.by_path(site) if path != "/"}
    # a: the print view (no tracking parameter) replaced the utm copy, the canonical page replaced the
    # print view, the fbclid copy that came after the canonical page was dropped; b: the plain URL replaced
    # the ?ref= copy
    assert reached == {A_UTM, A_PRINT, STORY_A, B_REF, STORY_B, STORY_C}
    assert result.stat("simhash/original_replaced") == 3
    assert result.stat("simhash/dropped") == 1 and result.stat("simhash/near_duplicate") == 1
    assert result.stat("simhash/unique") == 3
    assert f"{site}{STORY_A} replaces {site}{A_PRINT} as original" in result.log
    canonical = metadata[site + STORY_A]
    assert canonical.duplicate is None and canonical.replaces is not None
    assert canonical.replaces.uri == site + A_PRINT
    assert metadata[site + A_PRINT].replaces.uri == site + A_UTM  # type: ignore[union-attr]
    assert metadata[site + STORY_B].replaces.uri == site + B_REF  # type: ignore[union-attr]
    assert (metadata[site + STORY_B].replaces.record_id or "").startswith("<urn:uuid:")  # type: ignore[union-attr]
    # the crawl's report shows each cluster with the page a person would keep as its original
    assert _report_originals(tmp_path / "run" / "report.html") == {site + STORY_A, site + STORY_B}
    # the index keeps it: a re-crawl (tagging) finds every copy a near-duplicate of the new original
    again, _ = crawl(site, tmp_path, "preferred", action="tag", run="again")
    assert again.stat("simhash/revisit") == len(LINK_ORDER) and again.stat("simhash/original_replaced") == 0
    named = {path: item["near_duplicate_of"] for path, item in again.by_path(site).items() if path != "/"}
    assert named == {
        A_UTM: site + STORY_A,
        A_PRINT: site + STORY_A,
        STORY_A: None,
        A_FBCLID: site + STORY_A,
        B_REF: site + STORY_B,
        STORY_B: None,
        STORY_C: None,
    }


def test_keep_first_is_the_order_of_arrival(site: str, tmp_path: Path) -> None:
    result, metadata = crawl(site, tmp_path, "first")
    reached = {path for path in result.by_path(site) if path != "/"}
    assert reached == {A_UTM, B_REF, STORY_C}  # every later copy dropped, the canonical pages too
    assert result.stat("simhash/original_replaced") == 0 and result.stat("simhash/dropped") == 4
    assert metadata[site + STORY_A].duplicate.uri == site + A_UTM  # type: ignore[union-attr]
    assert all(fields.replaces is None for fields in metadata.values())
    assert _report_originals(tmp_path / "run" / "report.html") == {site + A_UTM, site + B_REF}


# -- the parts, without a crawl ------------------------------------------------------------------------


def test_the_canonical_link_is_read_from_the_head_and_resolved() -> None:
    from scrapy_simhash.canonical import canonical_url

    page = "http://example.org/news/a.html?utm_source=x"
    head = b"<html><head><title>t</title>%s</head><body>%s</body></html>"
    assert canonical_url(head % (b'<link rel="canonical" href="/news/a.html">', b""), page) == (
        "http://example.org/news/a.html"
    )
    # attribute order, quoting, case, rel lists and entities do not matter; fragments are dropped
    link = b"<LINK HREF='a.html?x=1&amp;y=2#top' Rel='alternate canonical'>"
    assert canonical_url(head % (link, b""), page) == "http://example.org/news/a.html?x=1&y=2"
    assert canonical_url(head % (b'<link rel="stylesheet" href="/s.css">', b""), page) is None
    # only the head counts: a link in the body (a page quoting markup) is not the page's
    assert canonical_url(head % (b"", b'<link rel="canonical" href="/other.html">'), page) is None
    assert canonical_url(head % (b'<link rel="canonical" href="javascript:void(0)">', b""), page) is None
    assert canonical_url(head % (b'<link rel="canonical" href="">', b""), page) is None
    latin = head % ('<link rel="canonical" href="/caf\xe9.html">'.encode("latin-1"), b"")
    assert canonical_url(latin, page, "latin-1") == "http://example.org/caf\xe9.html"


def test_the_preferred_copy_is_canonical_then_untracked_then_shorter() -> None:
    from scrapy_simhash.preferred import Preference

    prefer = Preference().prefers
    plain, tracked = "http://x/news/a.html", "http://x/news/a.html?utm_source=feed"
    printed = "http://x/print/a.html"
    assert prefer(plain, None, tracked, None) and not prefer(tracked, None, plain, None)
    assert prefer(printed, plain, tracked, plain)  # no tracking parameter beats one
    assert prefer(plain, plain, printed, plain)  # the canonical URL beats every other copy
    assert prefer(plain, None, printed, plain)  # ...also when only the stored copy declares it
    assert not prefer(printed, plain, plain, plain)
    assert prefer(plain, None, plain + "?print=1&page=all", None)  # else the shorter URL of one path
    assert not prefer(plain + "?page=1", None, plain + "?page=2", None)  # a tie keeps the first copy
    assert not prefer("http://x/p/a/", None, plain, None)  # a shorter URL elsewhere is not better
    assert not prefer("http://x/a?ref=home", None, "http://x/a-long-address", None)
    assert not Preference().has_tracking("http://x/a?page=2")
    custom = Preference.with_extra(["SessionID", "track*"])
    assert custom.has_tracking("http://x/a?sessionid=1") and custom.has_tracking("http://x/a?tracker=1")
    assert custom.has_tracking("http://x/a?UTM_Campaign=1")


def test_simhash_keep_must_be_a_known_value() -> None:
    from scrapy.settings import Settings

    from scrapy_simhash.settings import SimhashConfigError, SimhashSettings

    config = SimhashSettings.from_settings(Settings({"SIMHASH_TRACKING_PARAMS": "sessionid, src"}))
    assert (config.keep, config.tracking_params) == ("preferred", ("sessionid", "src"))
    assert SimhashSettings.from_settings(Settings({"SIMHASH_KEEP": "First"})).keep == "first"
    with pytest.raises(SimhashConfigError, match="SIMHASH_KEEP must be one of preferred, first"):
        SimhashSettings.from_settings(Settings({"SIMHASH_KEEP": "canonical"}))
