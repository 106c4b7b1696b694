"""How a page's main text changed since its last capture, in real crawls of a local site whose pages change
between crawls in known ways (tests/change_support.py): the WARC metadata records, response.meta, stats,
the DEBUG log, ``SIMHASH_ACTION = "drop_unchanged"``, the Redis store and a damaged store."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from change_support import EXPECTED, changing_site, metadata_by_path, run_crawl, version

from scrapy_simhash.change import CHANGED, MINOR, SAME_TEXT, UNCHANGED, classify
from scrapy_simhash.index.archive.captures import DATABASE, Capture
from scrapy_simhash.warc.records import SimhashFields, TextChange

ARTICLES = ["/same.html", "/ad.html", "/edit.html", "/rewrite.html"]


def _captures(crawl: dict[str, object]) -> dict[str, dict[str, str]]:
    """The WARC headers of each response or revisit record, by the URL's path."""
    from urllib.parse import urlsplit

    return {
        urlsplit(r["headers"]["WARC-Target-URI"]).path: r["headers"]
        for r in crawl["records"]
        if r["type"] in ("response", "revisit")
    }


def _kinds(crawl: dict[str, object]) -> dict[str, str]:
    return {
        path: fields["text-change"]
        for path, fields in metadata_by_path(crawl).items()
        if "text-change" in fields
    }


def _change_stats(crawl: dict[str, object]) -> dict[str, int]:
    return {
        k.removeprefix("simhash/change/"): v
        for k, v in crawl["stats"].items()
        if k.startswith("simhash/change/")
    }


def _count(kinds: dict[str, str]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for kind in kinds.values():
        counted[kind] = counted.get(kind, 0) + 1
    return counted


def _crawl_versions(tmp: Path, index: str, numbers: list[int], **settings: object) -> list[dict[str, object]]:
    crawls = []
    with changing_site() as site:
        for number in numbers:
            site["pages"] = version(number)
            crawls.append(run_crawl(site, tmp / f"v{number}", index, **settings))
    return crawls


@pytest.fixture(scope="module")
def three_crawls(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, object]]:
    """Versions 1, 2 and 3 of the site, crawled in turn through one embedded index."""
    root = tmp_path_factory.mktemp("changes")
    return _crawl_versions(root, str(root / "index"), [1, 2, 3])


def test_first_crawl_has_no_previous_capture(three_crawls: list[dict[str, object]]) -> None:
    first = three_crawls[0]
    assert set(metadata_by_path(first)) == set(ARTICLES)
    assert _kinds(first) == {}
    assert _change_stats(first) == {}
    assert all(item["result"] is None or item["result"]["change"] is None for item in first["items"])


def test_second_crawl_says_how_each_page_changed(three_crawls: list[dict[str, object]]) -> None:
    first, second = three_crawls[0], three_crawls[1]
    assert _kinds(second) == EXPECTED[2]
    assert _change_stats(second) == _count(EXPECTED[2])
    earlier = _captures(first)
    fields = metadata_by_path(second)
    for path in ARTICLES:  # the previous capture is the first crawl's record of the same URL
        assert fields[path]["previous-capture"] == earlier[path]["WARC-Record-ID"]
        assert fields[path]["previous-capture-date"] == earlier[path]["WARC-Date"]
    similarity = {path: float(fields[path]["text-similarity"]) for path in ARTICLES}
    assert similarity["/same.html"] == similarity["/ad.html"] == 1.0
    assert 0.5 <= similarity["/edit.html"] < 1.0
    assert similarity["/rewrite.html"] < 0.5


def test_change_is_in_response_meta_and_the_debug_log(three_crawls: list[dict[str, object]]) -> None:
    second = three_crawls[1]
    meta = {
        item["url"].rsplit("/", 1)[1]: item["result"]["change"] for item in second["items"] if item["result"]
    }
    assert {name: change["kind"] for name, change in meta.items()} == {
        path.lstrip("/"): kind for path, kind in EXPECTED[2].items()
    }
    fields = metadata_by_path(second)
    assert meta["edit.html"]["previous_capture"] == fields["/edit.html"]["previous-capture"]
    assert meta["edit.html"]["similarity"] == pytest.approx(float(fields["/edit.html"]["text-similarity"]))
    for path, kind in EXPECTED[2].items():
        assert f"{path} is {kind} since its capture of" in second["log"]


def test_third_crawl_compares_with_the_last_capture(three_crawls: list[dict[str, object]]) -> None:
    second, third = three_crawls[1], three_crawls[2]
    assert _kinds(third) == EXPECTED[3]  # /rewrite.html: unchanged since the second crawl, not the first
    assert _change_stats(third) == _count(EXPECTED[3])
    earlier = _captures(second)
    fields = metadata_by_path(third)
    for path in ARTICLES:
        assert fields[path]["previous-capture"] == earlier[path]["WARC-Record-ID"]


def test_drop_unchanged_drops_exactly_the_pages_whose_text_is_unchanged(tmp_path: Path) -> None:
    first, second = _crawl_versions(
        tmp_path, str(tmp_path / "index"), [1, 2], SIMHASH_ACTION="drop_unchanged"
    )
    assert {item["url"].rsplit("/", 1)[1] for item in first["items"]} >= {p.lstrip("/") for p in ARTICLES}
    seen = {item["url"].rsplit("/", 1)[1] for item in second["items"]}
    assert seen == {"", "edit.html", "rewrite.html"}  # the front page, and the two whose text changed
    assert second["stats"]["simhash/dropped/unchanged"] == 2
    # dropped pages are archived all the same: the identical one as a revisit
    kinds = {path: r["WARC-Type"] for path, r in _captures(second).items()}
    assert kinds["/same.html"] == "revisit" and kinds["/ad.html"] == "response"
    assert _kinds(second) == EXPECTED[2]


def test_a_url_fetched_again_in_the_same_crawl_is_compared_with_its_first_fetch(tmp_path: Path) -> None:
    (crawl,) = _crawl_versions(tmp_path, str(tmp_path / "index"), [1], TEST_FETCH_AGAIN=["/edit.html"])
    records = [r for r in crawl["records"] if r["headers"].get("WARC-Target-URI", "").endswith("/edit.html")]
    captures = [r["headers"] for r in records if r["type"] in ("response", "revisit")]
    changes = [r["fields"] for r in records if r["type"] == "metadata" and "text-change" in r["fields"]]
    assert len(captures) == 2 and len(changes) == 1
    assert changes[0]["text-change"] == "unchanged"
    assert changes[0]["previous-capture"] in {h["WARC-Record-ID"] for h in captures}
    assert _change_stats(crawl) == {"unchanged": 1}


def test_reset_forgets_the_last_captures(tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    with changing_site() as site:
        run_crawl(site, tmp_path / "v1", index)
        site["pages"] = version(2)
        second = run_crawl(site, tmp_path / "v2", index, SIMHASH_RESET=True)
    assert _kinds(second) == {}
    assert _change_stats(second) == {}


def test_drop_unchanged_is_a_valid_action_and_others_are_refused() -> None:
    from scrapy.settings import Settings

    from scrapy_simhash.settings import SimhashConfigError, SimhashSettings

    assert (
        SimhashSettings.from_settings(Settings({"SIMHASH_ACTION": "drop_unchanged"})).action
        == "drop_unchanged"
    )
    with pytest.raises(SimhashConfigError, match="SIMHASH_ACTION must be one of tag, drop, drop_unchanged"):
        SimhashSettings.from_settings(Settings({"SIMHASH_ACTION": "drop_same"}))
    with pytest.raises(SimhashConfigError, match="SIMHASH_ITEM_ACTION"):  # items have no previous capture
        SimhashSettings.from_settings(Settings({"SIMHASH_ITEM_ACTION": "drop_unchanged"}))


def test_a_damaged_store_is_counted_and_the_crawl_goes_on(tmp_path: Path) -> None:
    index = tmp_path / "index"
    with changing_site() as site:
        run_crawl(site, tmp_path / "v1", str(index))
        (index / DATABASE).write_bytes(b"this is not a SQLite database" * 100)
        site["pages"] = version(2)
        second = run_crawl(site, tmp_path / "v2", str(index))
    assert second["stats"]["simhash/error/captures"] == len(ARTICLES)
    assert _kinds(second) == {}
    assert set(metadata_by_path(second)) == set(ARTICLES)  # every page still archived and fingerprinted
    assert second["log"].count("cannot use the last captures of") == 1


# -- Redis ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def test_redis_index_gives_the_same_kinds(redis_server: object, tmp_path: Path) -> None:
    uri = f"{redis_server.url}?prefix=ch-{uuid.uuid4().hex[:12]}"
    first, second = _crawl_versions(tmp_path, uri, [1, 2])
    assert _kinds(second) == EXPECTED[2]
    assert _change_stats(second) == _count(EXPECTED[2])
    earlier = _captures(first)
    fields = metadata_by_path(second)
    assert all(fields[path]["previous-capture"] == earlier[path]["WARC-Record-ID"] for path in ARTICLES)


def test_redis_reset_forgets_only_its_own_prefixs_captures(redis_server: object) -> None:
    from scrapy_simhash.index import open_index
    from scrapy_simhash.index.archive.redis_captures import RedisCaptures

    uris = [f"{redis_server.url}?prefix=ch-{uuid.uuid4().hex[:12]}" for _ in range(2)]
    for uri in uris:
        open_index(uri).close()  # the stores beside an index write only while its namespace exists
    stores = [RedisCaptures.from_uri(uri) for uri in uris]
    urls = [f"http://x/{n}" for n in range(1200)]  # more than one batch of unlinks
    for store in stores:
        for url in urls:
            store.put(Capture(url, "<urn:uuid:1>", "d", "p", "t", 7, None))
    stores[0].clear()
    assert all(stores[0].last(url) is None for url in urls)
    assert all(stores[1].last(url) == Capture(url, "<urn:uuid:1>", "d", "p", "t", 7, None) for url in urls)
    for store in stores:
        store.close()


# -- the parts ------------------------------------------------------------------------------------------


def _capture(payload: str, text: str | None, simhash: int = 0) -> Capture:
    return Capture("http://x/", "<urn:uuid:1>", "2026-01-01T00:00:00Z", payload, text, simhash, None)


def test_classify_checks_payload_then_text_then_the_rule() -> None:
    from scrapy_simhash.decision import Rule

    rule = Rule(mode="simhash", distance=3)
    assert classify(_capture("p", "t"), _capture("p", "u", 0xFF), rule).kind == UNCHANGED
    assert classify(_capture("p", "t"), _capture("q", "t", 0xFF), rule).kind == SAME_TEXT
    assert (
        classify(_capture("p", None), _capture("q", None), rule).kind == MINOR
    )  # no text digest: by the rule
    assert classify(_capture("p", "t"), _capture("q", "u", 0b11), rule).kind == MINOR
    assert classify(_capture("p", "t"), _capture("q", "u", 0xFF), rule).kind == CHANGED


def test_metadata_fields_read_back() -> None:
    fields = SimhashFields(
        simhash=5, tokens=9, extractor="x", change=TextChange("minor", "<urn:uuid:1>", "d", 0.81)
    )
    assert SimhashFields.from_pairs(fields.to_pairs()).change == fields.change


def test_a_stored_capture_that_cannot_be_compared_is_counted_not_raised() -> None:
    from revisit_support import Stats

    from scrapy_simhash.crawl_changes import ERRORS, CrawlChanges
    from scrapy_simhash.decision import DEFAULT_RULE
    from scrapy_simhash.page import fingerprint_page

    page = fingerprint_page(version(1)["/edit.html"], "http://x/edit.html")
    bad = Capture("http://x/edit.html", None, "2026-01-01T00:00:00Z", "sha1:A", None, 1, "not a sketch")

    class Store:
        def last(self, url: str) -> Capture:
            return bad

        def put(self, capture: Capture) -> None:
            self.put_capture = capture

        def close(self) -> None:
            pass

    store, stats = Store(), Stats()
    changes = CrawlChanges(lambda: store, stats, DEFAULT_RULE, location=lambda: "here")
    assert changes.observe(page, "http://x/edit.html", b"<html>", {}) is None
    assert stats.values == {ERRORS: 1}
    assert store.put_capture.text_digest == page.text_digest  # this capture is the last one all the same
