"""End-to-end: real Scrapy crawls of a real local site with scrapy-simhash enabled."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import uuid
import zlib

import boilerplate_site as briefs_site
import pytest
import scrapy.crawler
from crawl_support import demo_site, run_crawl, scrapy_crawl

from scrapy_simhash import from_base32, hamming
from scrapy_simhash.extract import DEFAULT_EXTRACTOR as DEFAULT
from scrapy_simhash.extract import TrafilaturaExtractor
from scrapy_simhash.extract.registry import DEFAULT_NAME
from scrapy_simhash.index import open_index

ARTICLES = 8
CLUSTERS = demo_site.expected_clusters(ARTICLES)
NEAR_DUPLICATES = sum(len(c) - 1 for c in CLUSTERS)
ARTICLE_PAGES = sum(len(c) for c in CLUSTERS)
# What simhash alone (SIMHASH_MODE = "simhash", k = 3) finds: the planted edits are clusters of their own.
SIMHASH_CLUSTERS = demo_site.expected_clusters(ARTICLES, mode="simhash")
SIMHASH_NEAR_DUPLICATES = sum(len(c) - 1 for c in SIMHASH_CLUSTERS)
DEFAULT_EXTRACTOR = DEFAULT.description
TRAFILATURA_EXTRACTOR = TrafilaturaExtractor().description  # the default until 2026-11-27
PRECISION_EXTRACTOR = TrafilaturaExtractor(favor_precision=True).description
EDITED = [path for c in CLUSTERS for path in c if path.endswith(("-corrected.html", "-comments.html"))]
PARTNER = [path for c in CLUSTERS for path in c if path.startswith("/partner/")]


@pytest.fixture(scope="module")
def site():
    with demo_site.serve(demo_site.build_site(ARTICLES)) as base:
        yield base


def pages_with_sketch(path) -> int:
    """How many of the index's pages carry a minhash sketch (read-only: nothing is created)."""
    with open_index(path, read_only=True) as index:
        return len(index) - index.stats()["without_sketch"]


def _settings(tmp_path, **extra):
    # The first copy fetched is the original here: with 8 requests in flight a tracking-parameter variant
    # sometimes arrives before its plain URL, which SIMHASH_KEEP = "preferred" (the default) would make a
    # replacement instead of a near-duplicate, and these tests count near-duplicates. The preferred
    # policy is tested on its own, in a fixed order, in test_keep_crawl.py.
    return {
        "SIMHASH_INDEX": str(tmp_path / "index"),
        "SIMHASH_WORKERS": 1,
        "LOG_LEVEL": "INFO",
        "SIMHASH_KEEP": "first",
        **extra,
    }


@pytest.fixture(scope="module")
def default_crawl(site, tmp_path_factory):
    """One crawl of the site with the default settings into a new index (DEBUG log), made once for the
    tests that read it; a test that crawls on from its index takes a copy (:func:`index_after`)."""
    root = tmp_path_factory.mktemp("default-crawl")
    return root, run_crawl(site + "/", root / "run", _settings(root, LOG_LEVEL="DEBUG"))


def index_after(default_crawl, tmp_path):
    """A copy of the default crawl's index at ``tmp_path / "index"`` (where :func:`_settings` points),
    and that crawl's result: as if the test had run it itself."""
    root, result = default_crawl
    shutil.copytree(root / "index", tmp_path / "index")
    return result


def test_tag_mode_finds_every_near_duplicate(site, default_crawl):
    """The default (verified) rule: every planted near-duplicate, the one-sentence corrections and the
    appended comments included, with the similarity and distance that decided it."""
    result = default_crawl[1]
    assert result.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    assert result.stat("simhash/dropped") == 0
    # the front page is a list of links, the site's template only: skipped
    assert result.stat("simhash/computed") == ARTICLE_PAGES
    assert result.stat("simhash/skipped/boilerplate") >= 1
    assert result.stat("simhash/unique") == ARTICLE_PAGES - NEAR_DUPLICATES
    assert result.stat("simhash/skipped/too_few_tokens") > 0
    assert result.stat("simhash/index/size") == ARTICLE_PAGES
    pages = result.by_path(site)
    for cluster in CLUSTERS:
        members = [pages[path] for path in cluster]
        originals = [m for m in members if not m["near_duplicate_of"]]
        assert len(originals) == 1, cluster
        urls = {m["url"]: m for m in members}
        for member in members:
            # the most similar page seen before: the cluster's original, or a near-duplicate of it
            assert member["near_duplicate_of"] in (None, *urls)
            if member["near_duplicate_of"]:
                named = urls[member["near_duplicate_of"]]
                distance = hamming(from_base32(member["simhash"]), from_base32(named["simhash"]))
                assert member["near_duplicate_distance"] == distance
                assert 0.5 <= member["near_duplicate_similarity"] <= 1.0
            else:
                assert member["near_duplicate_distance"] is member["near_duplicate_similarity"] is None
    for path in EDITED:  # caught only by the sketches: simhash alone (k = 3) would miss them
        article = pages[re.sub(r"-(corrected|comments)\.html$", ".html", path)]
        assert hamming(from_base32(pages[path]["simhash"]), from_base32(article["simhash"])) > 3, path
    assert "simhash/decided_by_simhash" not in result.stats
    assert "mode=verified (similarity >= 0.5" in result.log
    said = re.findall(
        r"(\S+) is a near-duplicate of (\S+) \(similarity ([01]\.\d\d), (\d+) bits\)", result.log
    )
    assert len(said) == NEAR_DUPLICATES  # one line each (DEBUG), saying both measures
    assert any(int(bits) > 3 and "-corrected" in a + b for a, b, _, bits in said)
    # different articles in one template are not near-duplicates of each other
    cluster_of = {path: i for i, cluster in enumerate(CLUSTERS) for path in cluster}
    for path, item in pages.items():
        if item.get("near_duplicate_of"):
            assert cluster_of[path] == cluster_of[item["near_duplicate_of"][len(site) :]]
    assert "simhash: " in result.log and "near-duplicates" in result.log


def test_simhash_mode_misses_the_edits_the_verified_mode_catches(site, tmp_path):
    """SIMHASH_MODE = "simhash", the old rule (no sketch, distance <= 3): the planted edits pass as unique,
    and so do the partner site's copies (9-10 bits away with the default extractor)."""
    assert EDITED and PARTNER
    assert NEAR_DUPLICATES - len(EDITED) - len(PARTNER) == SIMHASH_NEAR_DUPLICATES
    result = run_crawl(site + "/", tmp_path / "run", _settings(tmp_path, SIMHASH_MODE="simhash"))
    assert result.stat("simhash/near_duplicate") == SIMHASH_NEAR_DUPLICATES
    assert result.stat("simhash/computed") == ARTICLE_PAGES
    pages = result.by_path(site)
    for path in EDITED + PARTNER:
        assert pages[path]["near_duplicate_of"] is None, path
    tagged = [item for item in result.items if item.get("near_duplicate_of")]
    assert len(tagged) == SIMHASH_NEAR_DUPLICATES
    for item in tagged:
        assert item["near_duplicate_similarity"] is None and item["near_duplicate_distance"] <= 3
    assert "simhash/decided_by_simhash" not in result.stats  # only counted where sketches were wanted
    assert pages_with_sketch(tmp_path / "index") == 0  # nothing computed, nothing stored
    assert "mode=simhash (k=3)" in result.log


def test_an_index_without_sketches_is_reopened_and_its_pages_gain_sketches_on_revisit(site, tmp_path):
    """An index whose pages were stored without sketch (by a simhash-mode crawl) under a verified crawl:
    it opens, its pages, which have no sketch, are judged by simhash alone, counted as such, and each
    revisited page gains its sketch without being re-added (it keeps its age); the next crawl is verified
    throughout and catches the edits, tagged as copies of their older originals."""
    old = run_crawl(site + "/", tmp_path / "old", _settings(tmp_path, SIMHASH_MODE="simhash"))
    assert old.stat("simhash/index/size") == ARTICLE_PAGES
    assert old.stat("simhash/near_duplicate") == SIMHASH_NEAR_DUPLICATES
    assert pages_with_sketch(tmp_path / "index") == 0
    new = run_crawl(site + "/", tmp_path / "new", _settings(tmp_path))
    assert new.stats["finish_reason"] == "finished"
    assert not any(name.startswith("simhash/error/") for name in new.stats), new.stats
    assert new.stat("simhash/index/without_sketch") == ARTICLE_PAGES
    assert new.stat("simhash/revisit") == ARTICLE_PAGES
    assert new.stat("simhash/index/sketch_added") == ARTICLE_PAGES
    assert SIMHASH_NEAR_DUPLICATES <= new.stat("simhash/near_duplicate") <= NEAR_DUPLICATES
    for item in new.items:
        if item.get("near_duplicate_of") and item["near_duplicate_similarity"] is None:
            assert item["near_duplicate_distance"] <= 3
    third = run_crawl(site + "/", tmp_path / "third", _settings(tmp_path))
    assert third.stat("simhash/index/without_sketch") == 0
    assert third.stat("simhash/revisit") == ARTICLE_PAGES
    assert third.stat("simhash/index/sketch_added") == 0
    assert "simhash/decided_by_simhash" not in third.stats
    assert third.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    first = {i["url"]: i.get("near_duplicate_of") for i in old.items}
    assert all(first[site + path] is None for path in EDITED)  # simhash alone missed every edit
    pages = third.by_path(site)
    cluster_of = {path: i for i, cluster in enumerate(CLUSTERS) for path in cluster}
    for cluster in CLUSTERS:  # now one original per planted cluster, edits included
        assert sum(not pages[path]["near_duplicate_of"] for path in cluster) == 1, cluster
        for path in cluster:
            original = pages[path]["near_duplicate_of"]
            assert not original or cluster_of[original[len(site) :]] == cluster_of[path]


def test_drop_mode_drops_near_duplicates(site, tmp_path):
    result = run_crawl(site + "/", tmp_path / "run", _settings(tmp_path, SIMHASH_ACTION="drop"))
    assert result.stat("simhash/dropped") == NEAR_DUPLICATES
    assert result.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    stamped = [i for i in result.items if i.get("simhash")]
    assert len(stamped) == ARTICLE_PAGES - NEAR_DUPLICATES
    assert not any(i.get("near_duplicate_of") for i in result.items)
    dropped_paths = {path for cluster in CLUSTERS for path in cluster} - set(result.by_path(site))
    assert len(dropped_paths) == NEAR_DUPLICATES


def test_short_briefs_in_one_template_are_not_dropped_as_near_duplicates(tmp_path):
    """Short briefs whose extracted text is mostly the site's template (cookie banner, menu, footer)
    were near-duplicates of each other; a drop crawl dropped all but one. Now each is skipped as
    ``boilerplate`` (or fingerprinted by its own text) and none is dropped."""
    with briefs_site.serve_site() as base:
        result = run_crawl(base + "/", tmp_path / "run", _settings(tmp_path, SIMHASH_ACTION="drop"))
    assert result.stat("simhash/dropped") == 0
    assert result.stat("simhash/near_duplicate") == 0
    crawled = result.by_path(base)
    assert set(briefs_site.BRIEFS) <= set(crawled)
    # every page of this site (the briefs, and the front page: links only) is all template
    assert result.stat("simhash/skipped/boilerplate") == result.stat("downloader/response_status_count/200")


def test_second_run_sees_the_first_and_reset_forgets(site, default_crawl, tmp_path):
    first = index_after(default_crawl, tmp_path)
    second = run_crawl(site + "/", tmp_path / "two", _settings(tmp_path))
    assert second.stat("simhash/revisit") == ARTICLE_PAGES
    assert second.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    assert second.stat("simhash/index/size") == first.stat("simhash/index/size")
    # every page keeps the original it had in the first run
    before = {i["url"]: i.get("near_duplicate_of") for i in first.items}
    after = {i["url"]: i.get("near_duplicate_of") for i in second.items}
    assert before == after
    third = run_crawl(site + "/", tmp_path / "three", _settings(tmp_path, SIMHASH_RESET=True))
    assert third.stat("simhash/revisit") == 0
    assert third.stat("simhash/near_duplicate") == NEAR_DUPLICATES


def test_a_crawl_without_simhash_index_outside_a_project_keeps_its_index_in_the_working_directory(
    site, tmp_path
):
    """A script (CrawlerProcess) run in a folder without scrapy.cfg: Scrapy's data path is not there,
    the index goes to .scrapy/simhash/<spider> under the working directory, and the log says so."""
    run = tmp_path / "run"
    assert not (run / "scrapy.cfg").exists()
    result = run_crawl(site + "/", run, {"SIMHASH_WORKERS": 1, "LOG_LEVEL": "INFO", "SIMHASH_KEEP": "first"})
    assert result.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    location = run / ".scrapy" / "simhash" / "site"
    assert location.is_dir()
    assert f"simhash: index {location} (SIMHASH_INDEX is not set: the spider's own)" in result.log
    assert pages_with_sketch(location) == ARTICLE_PAGES


def test_a_plain_crawl_logs_no_warning(default_crawl):
    """No SIMHASH_REPORT is no reason for a warning, and no handler of ours is deprecated."""
    result = default_crawl[1]
    assert result.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    assert "ScrapyDeprecationWarning" not in result.log
    assert "SimhashReportExtension" not in result.log
    assert result.stat("log_count/WARNING") == 0, result.log


def _built_with_distance_3(path):
    open_index(path, k=3).close()


def _built_with_similarity_0_5(path):
    open_index(path, k=3, similarity=0.5).close()


def _a_minhash_index(path):
    open_index(path, kind="minhash").close()


def _an_index_of_an_earlier_format(path):
    """Written by an earlier development version (format 2, sketches in a second store); left as it was."""
    from index_old_layouts import pages, two_stores

    if path.exists():
        assert sqlite3.connect(f"file:{path / 'index.sqlite3'}?mode=ro&immutable=1", uri=True).execute(
            "SELECT value FROM settings WHERE name = 'format'"
        ).fetchone() == ("2",)
        assert (path / "sketches" / "minhash.sqlite3").exists()
        return
    two_stores(path, pages(8))


ITEMS_ONLY = {
    "DOWNLOADER_MIDDLEWARES": '{"scrapy_simhash.middleware.SimhashMiddleware": null}',
    "SIMHASH_ITEM_FIELD": "text",
}


@pytest.mark.parametrize(
    ("build", "built", "settings", "said"),
    [
        (
            _built_with_distance_3,
            "index",
            {"SIMHASH_DISTANCE": 5},
            "was built with SIMHASH_DISTANCE = 3 and cannot answer SIMHASH_DISTANCE = 5 exactly: "
            "set SIMHASH_DISTANCE back to 3",
        ),
        (
            _built_with_similarity_0_5,
            "index",
            {"SIMHASH_SIMILARITY": 0.7},
            "was built with SIMHASH_SIMILARITY = 0.5, not 0.7: set SIMHASH_SIMILARITY back to 0.5",
        ),
        (_a_minhash_index, "index", {}, "holds a MinHash index"),
        (
            _an_index_of_an_earlier_format,
            "index",
            {},
            "was written by format 2 of scrapy-simhash, which this version does not read (format 3); "
            "convert it once with `scrapy-simhash index upgrade ",
        ),
        (  # the item pipeline's own index
            _built_with_distance_3,
            "index-items",
            {**ITEMS_ONLY, "SIMHASH_DISTANCE": 4},
            "index-items was built with SIMHASH_DISTANCE = 3 and cannot answer SIMHASH_DISTANCE = 4",
        ),
    ],
)
def test_an_index_that_cannot_honour_the_settings_refuses_the_crawl(
    site, tmp_path, build, built, settings, said
):
    """A configuration error, not an outage: the crawl fails at start (exit status, one clear line
    naming the setting), crawls nothing, retries nothing and leaves the index as it was."""
    index = tmp_path / "index"
    build(tmp_path / built)
    done = scrapy_crawl(site + "/", tmp_path, {"SIMHASH_INDEX": index, "SIMHASH_WORKERS": 1, **settings})
    assert done.returncode != 0
    assert said in done.stderr
    assert "The crawl does not start." in done.stderr
    assert "index_unavailable" not in done.stderr and "pages pass untagged" not in done.stderr
    assert "Spider opened" not in done.stderr
    if hasattr(scrapy.crawler, "AsyncCrawlerProcess"):  # the crawl runs as an asyncio task: no traceback
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
    build(tmp_path / built)  # still the index it was: it opens with its own settings


def test_an_index_of_another_extractor_refuses_the_crawl_until_mixing_is_allowed(
    site, default_crawl, tmp_path
):
    """Fingerprints of another extractor are not comparable: the crawl records its extractor in the
    index, a crawl with another one fails at start (one line naming both and the way out, the index's
    extractor by its setting), and SIMHASH_EXTRACTOR_MIX lets it store its pages beside them, the index
    saying it is mixed."""
    index = tmp_path / "index"
    first = index_after(default_crawl, tmp_path)
    with open_index(index, read_only=True) as stored:
        assert stored.notes() == {"extractor": DEFAULT_EXTRACTOR}
    size = first.stat("simhash/index/size")

    precision = {"SIMHASH_EXTRACTOR": "trafilatura", "SIMHASH_EXTRACTOR_FAVOR_PRECISION": True}
    done = scrapy_crawl(site + "/", tmp_path, {"SIMHASH_INDEX": index, "SIMHASH_WORKERS": 1, **precision})
    assert done.returncode != 0
    line = next(line for line in done.stderr.splitlines() if "ERROR: simhash: " in line)
    assert (
        f"the index at {index} stores pages fingerprinted by the extractor {DEFAULT_EXTRACTOR}, and this "
        f"crawl's is {PRECISION_EXTRACTOR} (name {DEFAULT_NAME} -> trafilatura" in line
    )
    assert f"Set SIMHASH_EXTRACTOR = '{DEFAULT_NAME}' (the index's extractor)" in line
    assert "SIMHASH_RESET = True" in line and "or set SIMHASH_EXTRACTOR_MIX = True" in line
    assert line.endswith("The crawl does not start.")
    assert "Spider opened" not in done.stderr
    with open_index(index, read_only=True) as stored:
        assert len(stored) == size and stored.notes() == {"extractor": DEFAULT_EXTRACTOR}

    mixed = run_crawl(
        site + "/", tmp_path / "two", _settings(tmp_path, **precision, SIMHASH_EXTRACTOR_MIX=True)
    )
    assert mixed.stat("simhash/computed") > 0 and mixed.stat("simhash/revisit") > 0
    assert mixed.log.count(f"adds pages made by {PRECISION_EXTRACTOR}, as asked") == 1
    with open_index(index, read_only=True) as stored:
        assert stored.notes() == {"extractor": DEFAULT_EXTRACTOR, f"extractor+{PRECISION_EXTRACTOR}": "1"}


def _one_page_index(location, recorded: str | None) -> None:
    """An index holding one other page, recording the extractor ``recorded`` (None: nothing, as an index
    written before indexes recorded their extractor)."""
    from scrapy_simhash.index.extractor_record import check_extractor

    with open_index(location) as index:
        if recorded is not None:
            check_extractor(index, recorded)
        index.add(0x1234_5678_9ABC_DEF0, "https://example.org/elsewhere")


@pytest.mark.parametrize(
    ("recorded", "extractor", "said"),
    [
        (  # the libraries upgraded: the same extraction asked for
            f"{DEFAULT_NAME}/0.0.1+0.0.1;" + DEFAULT_EXTRACTOR.split(";", 1)[1],
            None,
            "uses the same extractor and options at another version",
        ),
        (  # trafilatura was the only extractor before records: a trafilatura crawl takes the index as its own
            None,
            "trafilatura",
            "does not record its extractor (written by an earlier version of scrapy-simhash",
        ),
    ],
)
def test_an_index_of_another_version_or_without_record_warns_once_and_the_crawl_goes_on(
    site, tmp_path, recorded, extractor, said
):
    _one_page_index(tmp_path / "index", recorded)
    result = run_crawl(site + "/", tmp_path / "run", _settings(tmp_path, SIMHASH_EXTRACTOR=extractor))
    assert result.stat("simhash/near_duplicate") == NEAR_DUPLICATES
    [line] = [line for line in result.log.splitlines() if said in line]
    assert "WARNING: simhash: the index at" in line
    with open_index(tmp_path / "index", read_only=True) as index:
        assert index.notes() == {"extractor": recorded or TRAFILATURA_EXTRACTOR}  # the index's own stays


@pytest.mark.parametrize("recorded", [TRAFILATURA_EXTRACTOR, None])
def test_an_index_of_the_former_default_refuses_a_crawl_with_the_default(site, tmp_path, recorded):
    """An index trafilatura filled (the default until 2026-11-27; recorded, or before records): a crawl with
    today's default does not turn every stored page into a changed one; it refuses and names the setting
    that reads the index as before."""
    _one_page_index(tmp_path / "index", recorded)
    done = scrapy_crawl(site + "/", tmp_path, {"SIMHASH_INDEX": tmp_path / "index", "SIMHASH_WORKERS": 1})
    assert done.returncode != 0
    line = next(line for line in done.stderr.splitlines() if "ERROR: simhash: " in line)
    assert f"(name trafilatura -> {DEFAULT_NAME})" in line
    assert "Set SIMHASH_EXTRACTOR = 'trafilatura' (the index's extractor)" in line
    assert "Spider opened" not in done.stderr
    with open_index(tmp_path / "index", read_only=True) as index:
        assert len(index) == 1


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"SIMHASH_DISTANCE": "abc"}, "SIMHASH_DISTANCE must be a number; got 'abc'"),
        (
            {"SIMHASH_ACTION": "delete"},
            "SIMHASH_ACTION must be one of tag, drop, drop_unchanged; got 'delete'",
        ),
        ({"SIMHASH_RESET": "maybe"}, "Supported values for boolean settings"),
        # the report extension is built before the middleware: it reads the settings the same way
        ({"SIMHASH_DISTANCE": "abc", "SIMHASH_REPORT": "r.html"}, "SIMHASH_DISTANCE must be a number"),
    ],
)
def test_a_bad_setting_value_fails_the_crawl_with_one_clear_line(site, tmp_path, settings, said):
    done = scrapy_crawl(site + "/", tmp_path, {"SIMHASH_INDEX": tmp_path / "index", **settings})
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if said in line]
    assert lines and "ERROR: simhash: " in lines[0], done.stderr[-3000:]
    assert "Spider opened" not in done.stderr
    if hasattr(scrapy.crawler, "AsyncCrawlerProcess"):  # the crawl runs as an asyncio task: no traceback
        assert "Traceback" not in done.stderr, done.stderr[-3000:]
    # (Scrapy 2.13 runs it in a Deferred, and Twisted logs the failure again with its traceback)


def test_dont_simhash_and_disabled(site, tmp_path):
    off = run_crawl(site + "/", tmp_path / "off", _settings(tmp_path, SIMHASH_ENABLED=False))
    assert not any(k.startswith("simhash/") for k in off.stats)
    assert len(off.items) > ARTICLE_PAGES


BAD_PAGES = {
    "/image.png": demo_site.Page(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 10, "image/png"),
    "/binary.html": demo_site.Page(b"\x00\x01\x02\x03PK\x03\x04" + bytes(range(256)) * 10),
    "/empty.html": demo_site.Page(b""),
    "/huge.html": demo_site.Page(b"<html><body>" + b"<p>lorem ipsum dolor</p>" * 20000 + b"</body></html>"),
    "/missing.html": demo_site.Page(b"gone", status=404),
    "/latin1.html": demo_site.Page(
        (
            "<html><body><article>"
            + "".join(
                f"<p>Ça coûte très cher à Zürich, dit-elle; la qualité n° {n} des pâtisseries "
                f"françaises étonne "
                f"{word} chaque matin.</p>"
                for n, word in enumerate(
                    ["Éloïse", "Cécile", "Noël", "Zoé", "Hélène", "Jérôme", "André", "Loïc"]
                )
            )
            + "</article></body></html>"
        ).encode("latin-1"),
        "text/html; charset=utf-8",  # declared wrongly
    ),
    "/malformed.html": demo_site.Page(b"<html><body><p>unclosed <b><i><div></p></table>" * 50 + b"<<<>>>"),
    "/crash.html": demo_site.Page(b"<html><body><p>CRASH-THIS-WORKER</p></body></html>"),
    "/hang.html": demo_site.Page(b"<html><body><p>HANG-THIS-WORKER</p></body></html>"),
}


@pytest.fixture(scope="module")
def bad_site():
    pages = demo_site.build_site(4)
    links = "".join(f'<a href="{path}">{path}</a>' for path in BAD_PAGES)
    pages["/"] = pages["/"].replace(b"</ul>", links.encode() + b"</ul>")
    with demo_site.serve({**pages, **BAD_PAGES}) as base:
        yield base


def test_bad_responses_are_counted_and_the_crawl_goes_on(bad_site, tmp_path):
    settings = _settings(
        tmp_path,
        SIMHASH_WORKERS=2,
        SIMHASH_TIMEOUT=4,
        SIMHASH_MAX_BODY_SIZE=200_000,
        SIMHASH_FINGERPRINT_FUNCTION="worker_faults.fingerprint",
        HTTPERROR_ALLOW_ALL=True,
    )
    result = run_crawl(bad_site + "/", tmp_path / "run", settings)
    assert result.stat("simhash/skipped/content_type") == 1
    assert result.stat("simhash/skipped/binary") == 1
    assert result.stat("simhash/skipped/empty") == 1
    assert result.stat("simhash/skipped/too_large") == 1
    assert result.stat("simhash/skipped/status") >= 1
    assert result.stat("simhash/error/worker_crash") == 1
    assert result.stat("simhash/error/timeout") == 1
    pages = result.by_path(bad_site)
    assert pages["/latin1.html"]["simhash"]  # mis-declared encoding still fingerprinted
    good = demo_site.expected_clusters(4)
    assert all(pages[path].get("simhash") for cluster in good for path in cluster)
    assert result.stat("simhash/near_duplicate") == sum(len(c) - 1 for c in good)
    assert result.stats["finish_reason"] == "finished"


def gzip_bomb(decoded_size: int) -> bytes:
    """An HTML page of ``decoded_size`` bytes (nearly all spaces), gzipped to about 1/1000 of that."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: the gzip format
    chunk = b" " * (1024 * 1024)
    parts = [packer.compress(b"<html><body><p>")]
    parts += [packer.compress(chunk) for _ in range(decoded_size // len(chunk))]
    return b"".join([*parts, packer.compress(b"</p></body></html>"), packer.flush()])


ARTICLE_TEXT = "".join(
    f"<p>Paragraph {n} of an article about the café by the river, long enough to be the main text of "
    "the page and to give its fingerprint more than thirty tokens.</p>"
    for n in range(6)
)
HOSTILE_PAGES = {
    # 64 MiB once decompressed: under Scrapy's 1 GiB DOWNLOAD_MAXSIZE, over the add-on's 16 MiB
    "/bomb.html": demo_site.Page(gzip_bomb(64 * 1024 * 1024), headers={"Content-Encoding": "gzip"}),
    "/rot13.html": demo_site.Page(
        f"<html><body><article>{ARTICLE_TEXT}</article></body></html>".encode(), "text/html; charset=rot13"
    ),
    "/meta-base64.html": demo_site.Page(
        f'<html><head><meta charset="base64"></head><body><article>{ARTICLE_TEXT.replace("café", "bistro")}'
        "</article></body></html>".encode(),
        "text/html",
    ),
}


@pytest.fixture(scope="module")
def hostile_site():
    pages = demo_site.build_site(4)
    links = "".join(f'<a href="{path}">{path}</a>' for path in HOSTILE_PAGES)
    pages["/"] = pages["/"].replace(b"</ul>", links.encode() + b"</ul>")
    with demo_site.serve({**pages, **HOSTILE_PAGES}) as base:
        yield base


def test_a_gzip_bomb_is_dropped_and_counted_and_codec_charsets_are_ignored(hostile_site, tmp_path):
    """The add-on bounds DOWNLOAD_MAXSIZE: the bomb is dropped after 16 MiB of decompression (counted),
    not decoded whole; pages declaring a codec as their charset are fingerprinted; the crawl goes on."""
    # Scrapy's own meta-refresh middleware fails on a codec charset before the add-on sees the page
    settings = _settings(tmp_path, METAREFRESH_ENABLED=False)
    result = run_crawl(hostile_site + "/", tmp_path / "run", settings)
    assert result.stats["finish_reason"] == "finished"
    assert result.stat("simhash/skipped/too_large_decompressed") == 1
    pages = result.by_path(hostile_site)
    assert "/bomb.html" not in pages
    assert "dropped (simhash/skipped/too_large_decompressed)" in result.log
    with open_index(tmp_path / "index", read_only=True) as index:  # (the spider cannot decode them:
        # Scrapy's TextResponse fails on such a charset, so their fingerprints are looked for here)
        assert all(index.get(hostile_site + path) for path in ("/rot13.html", "/meta-base64.html"))
    assert "simhash/error/extractor_error" not in result.stats
    good = demo_site.expected_clusters(4)
    assert all(pages[path].get("simhash") for cluster in good for path in cluster)
    assert re.search(r"simhash: \d+ pages fingerprinted, .*, [1-9]\d* skipped", result.log)


def test_item_pipeline_drops_items_stamped_from_pages(site, tmp_path):
    result = run_crawl(site + "/", tmp_path / "run", _settings(tmp_path, SIMHASH_ITEM_ACTION="drop"))
    assert result.stat("simhash/item/dropped") == NEAR_DUPLICATES
    assert result.stat("item_dropped_count") == NEAR_DUPLICATES
    said = re.findall(r"Dropped: near-duplicate of \S+ \(similarity [01]\.\d\d, \d+ bits\)", result.log)
    assert len(said) == NEAR_DUPLICATES
    assert not any(i.get("near_duplicate_of") for i in result.items)


def test_item_pipeline_fingerprints_an_item_field(site, tmp_path):
    settings = _settings(
        tmp_path,
        DOWNLOADER_MIDDLEWARES={"scrapy_simhash.middleware.SimhashMiddleware": None},
        SIMHASH_ITEM_FIELD="text",
    )
    result = run_crawl(site + "/", tmp_path / "run", settings, {"with_text": "1"})
    assert "simhash/computed" not in result.stats
    assert result.stat("simhash/item/near_duplicate") == NEAR_DUPLICATES
    assert result.stat("simhash/item/computed") == ARTICLE_PAGES
    assert (tmp_path / "index-items").is_dir()
    assert pages_with_sketch(tmp_path / "index-items") == ARTICLE_PAGES  # judged by the verified rule too
    tagged = [i for i in result.items if i.get("near_duplicate_of")]
    assert len(tagged) == NEAR_DUPLICATES
    for item in tagged:
        assert 0.5 <= item["near_duplicate_similarity"] <= 1.0 and item["near_duplicate_distance"] >= 0
    assert "simhash/item/decided_by_simhash" not in result.stats


def test_an_item_index_that_cannot_be_opened_is_counted_and_items_pass(site, tmp_path):
    """The item index is held by another writer: the crawl goes on, items pass untagged, counted once."""
    from scrapy_simhash import SimhashIndex

    settings = _settings(
        tmp_path,
        DOWNLOADER_MIDDLEWARES={"scrapy_simhash.middleware.SimhashMiddleware": None},
        SIMHASH_ITEM_FIELD="text",
    )
    with SimhashIndex(tmp_path / "index-items"):  # holds the writer's lock for the whole crawl
        result = run_crawl(site + "/", tmp_path / "run", settings, {"with_text": "1"})
    assert result.stats["finish_reason"] == "finished"
    assert result.stat("simhash/error/item_index_open") == 1
    assert result.stat("simhash/item/skipped/index_open") == ARTICLE_PAGES
    assert "simhash/item/computed" not in result.stats
    assert len(result.items) >= ARTICLE_PAGES
    assert not any(i.get("near_duplicate_of") for i in result.items)
    assert "cannot open the item index" in result.log


@pytest.mark.slow  # two Scrapy crawls and a redis-server, ~10 s
def test_verified_crawl_on_redis_catches_the_edits_and_reset_forgets_the_sketches_too(site, tmp_path):
    """On Redis the sketches live under <prefix>-sketches: SIMHASH_RESET must empty them with the rest,
    or the pages of the run before would still be found by their sketches."""
    from redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    try:
        uri = f"{server.url}?prefix=crawl-{uuid.uuid4().hex[:8]}"
        first = run_crawl(site + "/", tmp_path / "one", _settings(tmp_path, SIMHASH_INDEX=uri))
        assert first.stat("simhash/near_duplicate") == NEAR_DUPLICATES  # the edits included
        assert server.client().keys("*-sketches*"), "no sketch stored in Redis"
        again = run_crawl(
            site + "/", tmp_path / "two", _settings(tmp_path, SIMHASH_INDEX=uri, SIMHASH_RESET=True)
        )
        assert again.stat("simhash/revisit") == 0
        assert again.stat("simhash/near_duplicate") == NEAR_DUPLICATES
        assert again.stat("simhash/unique") == ARTICLE_PAGES - NEAR_DUPLICATES
    finally:
        server.stop()


@pytest.mark.slow  # a redis-server and a Scrapy crawl, ~5 s
def test_a_redis_namespace_created_with_another_distance_refuses_the_crawl(site, tmp_path):
    """A server index is opened before the crawl starts too: its configuration error fails the crawl
    (exit status, one clear line), before any page, instead of passing every page untagged."""
    from redis_server import RedisServer

    server = RedisServer(tmp_path / "redis").start()
    try:
        uri = f"{server.url}?prefix=crawl-{uuid.uuid4().hex[:8]}"
        open_index(uri, k=3).close()
        done = scrapy_crawl(site + "/", tmp_path, {"SIMHASH_INDEX": uri, "SIMHASH_DISTANCE": 5})
        with open_index(uri, k=3) as index:  # still the namespace it was
            assert len(index) == 0
    finally:
        server.stop()
    assert done.returncode != 0, done.stderr[-3000:]
    assert (
        f"the index at {uri} cannot be used with this crawl's settings (SIMHASH_DISTANCE = 5" in done.stderr
    )
    assert "The crawl does not start." in done.stderr
    assert "Spider opened" not in done.stderr and "index_unavailable" not in done.stderr


@pytest.mark.slow  # a redis-server and a Scrapy crawl, ~5 s
def test_a_redis_index_of_another_extractor_refuses_the_crawl(site, tmp_path):
    from redis_server import RedisServer

    from scrapy_simhash.index.extractor_record import check_extractor

    server = RedisServer(tmp_path / "redis").start()
    try:
        uri = f"{server.url}?prefix=crawl-{uuid.uuid4().hex[:8]}"
        with open_index(uri) as index:
            check_extractor(index, PRECISION_EXTRACTOR)
        done = scrapy_crawl(site + "/", tmp_path, {"SIMHASH_INDEX": uri, "SIMHASH_WORKERS": 1})
        with open_index(uri) as index:  # still the namespace it was
            assert len(index) == 0 and index.notes() == {"extractor": PRECISION_EXTRACTOR}
    finally:
        server.stop()
    assert done.returncode != 0, done.stderr[-3000:]
    assert (
        f"stores pages fingerprinted by the extractor {PRECISION_EXTRACTOR}, and this crawl's is"
        in done.stderr
    )
    assert "The crawl does not start." in done.stderr
    assert "Spider opened" not in done.stderr


SUMMARY = re.compile(r"simhash: (\d+) pages fingerprinted, .*, (\d+) skipped, (\d+) errors; index (.*)")


@pytest.mark.parametrize("on_error", ["continue", "stop"])
def test_redis_unreachable_at_start_prints_the_summary_and_stop_fails_the_crawl(site, tmp_path, on_error):
    """Redis is not there when the crawl starts: ``continue`` crawls every page untagged and exits 0;
    ``stop`` does not start the crawl and exits non-zero. Both count the error and print the summary."""
    from redis_server import free_port

    uri = f"redis://127.0.0.1:{free_port()}/0?prefix=down"
    settings = {"SIMHASH_INDEX": uri, "SIMHASH_ON_INDEX_ERROR": on_error, "SIMHASH_WORKERS": 1}
    output = tmp_path / "items.jsonl"
    done = scrapy_crawl(site + "/", tmp_path, settings, output=output)
    items = [json.loads(line) for line in output.read_text().splitlines()] if output.exists() else []
    summary = SUMMARY.search(done.stderr)
    assert summary is not None, done.stderr[-3000:]
    assert int(summary.group(3)) >= 1  # the index error is counted
    assert summary.group(4).startswith(f"{uri.split('?')[0]}") and "could not be opened" in summary.group(4)
    assert "is unavailable" in done.stderr
    if on_error == "stop":
        assert done.returncode != 0
        assert items == [] and int(summary.group(1)) == 0
        assert "the crawl does not start (SIMHASH_ON_INDEX_ERROR=stop)" in done.stderr
    else:
        assert done.returncode == 0, done.stderr[-3000:]
        assert len(items) > ARTICLE_PAGES and not any(item.get("near_duplicate_of") for item in items)
        assert int(summary.group(1)) >= ARTICLE_PAGES  # fingerprinted, then passed untagged
        assert "'simhash/error/index_open': 1" in done.stderr
