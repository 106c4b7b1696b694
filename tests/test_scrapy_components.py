"""The Scrapy components without a crawl: settings, add-on, original selection, item stamping."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import scrapy
from hypothesis import given, settings
from hypothesis import strategies as st
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from scrapy_simhash import Addon, SimhashMiddleware, SimhashPipeline
from scrapy_simhash.crawl_index import derived_location
from scrapy_simhash.decision import DEFAULT_RULE, Rule
from scrapy_simhash.extract.registry import DEFAULT_NAME
from scrapy_simhash.index import IndexLostError, IndexUnavailableError, Match, SimhashIndexError
from scrapy_simhash.index_guard import IndexGuard, IndexSkipped
from scrapy_simhash.matches import duplicate_of, verdict_text
from scrapy_simhash.page import fingerprint_page
from scrapy_simhash.settings import SimhashConfigError, SimhashSettings
from scrapy_simhash.spidermiddleware import SimhashItemMiddleware
from scrapy_simhash.warc.write.crawl import fields_from_result


def _addon_settings(**project) -> Settings:
    settings = Settings()
    settings.setdict(project, priority="project")
    Addon().update_settings(settings)
    return settings


def test_addon_installs_components_and_defaults():
    settings = _addon_settings()
    assert settings.getdict("DOWNLOADER_MIDDLEWARES")["scrapy_simhash.middleware.SimhashMiddleware"] == 543
    assert "scrapy_simhash.pipeline.SimhashPipeline" in settings.getdict("ITEM_PIPELINES")
    assert "scrapy_simhash.spidermiddleware.SimhashItemMiddleware" in settings.getdict("SPIDER_MIDDLEWARES")
    assert settings.getint("SIMHASH_DISTANCE") == 3
    assert "scrapy_simhash.warc.write.crawl.WarcWriterExtension" not in settings.getdict("EXTENSIONS")


SCRAPY_COMPRESSION = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
COUNTING_COMPRESSION = "scrapy_simhash.compression.SizeCountingHttpCompressionMiddleware"
MIB = 1024 * 1024


def test_addon_bounds_download_size_and_counts_what_decompression_drops():
    settings = _addon_settings()
    assert settings.getint("DOWNLOAD_MAXSIZE") == 16 * MIB  # Scrapy's own: 1 GiB
    middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
    assert middlewares[SCRAPY_COMPRESSION] is None
    assert (
        middlewares[COUNTING_COMPRESSION]
        == settings.getdict("DOWNLOADER_MIDDLEWARES_BASE")[SCRAPY_COMPRESSION]
    )
    # fingerprinting larger bodies: the bound follows
    assert _addon_settings(SIMHASH_MAX_BODY_SIZE=20 * MIB).getint("DOWNLOAD_MAXSIZE") == 40 * MIB


def test_project_download_size_and_compression_middleware_win_over_the_addon():
    """The opt-outs: a DOWNLOAD_MAXSIZE of the project's own, and a compression middleware it configures."""
    assert _addon_settings(DOWNLOAD_MAXSIZE=64 * MIB).getint("DOWNLOAD_MAXSIZE") == 64 * MIB
    from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware

    for configured in (SCRAPY_COMPRESSION, HttpCompressionMiddleware):
        settings = _addon_settings(DOWNLOADER_MIDDLEWARES={configured: 580})
        middlewares = settings.getdict("DOWNLOADER_MIDDLEWARES")
        assert middlewares[configured] == 580 and COUNTING_COMPRESSION not in middlewares


def test_project_settings_win_over_addon_defaults():
    settings = _addon_settings(SIMHASH_ACTION="drop", SIMHASH_DISTANCE=5, SIMHASH_WARC_ENABLED=True)
    assert settings["SIMHASH_ACTION"] == "drop"
    assert settings.getint("SIMHASH_DISTANCE") == 5
    assert settings.getdict("EXTENSIONS")["scrapy_simhash.warc.write.crawl.WarcWriterExtension"] == 500


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SIMHASH_ACTION", "delete"),
        ("SIMHASH_DISTANCE", 9),
        ("SIMHASH_DISTANCE", "three"),
        ("SIMHASH_MIN_TOKENS", -1),
        ("SIMHASH_ON_INDEX_ERROR", "ignore"),
        ("SIMHASH_TIMEOUT", 0),
        ("SIMHASH_EXTRACTOR_FALLBACK", "raw"),
        ("SIMHASH_MODE", "fuzzy"),
        ("SIMHASH_SIMILARITY", 0),
        ("SIMHASH_SIMILARITY", 1.5),
        ("SIMHASH_SIMILARITY", "half"),
        ("SIMHASH_SIMILARITY", "nan"),
        ("SIMHASH_TIMEOUT", "nan"),
    ],
)
def test_bad_settings_name_the_setting(name, value):
    with pytest.raises(ValueError, match=name):
        SimhashSettings.from_settings(Settings({name: value}))


def test_mode_and_similarity_defaults_and_the_rule_they_make():
    config = SimhashSettings.from_settings(_addon_settings())
    assert (config.mode, config.similarity, config.distance) == ("verified", 0.5, 3)
    assert config.verified and config.rule == DEFAULT_RULE
    old = SimhashSettings.from_settings(Settings({"SIMHASH_MODE": "SimHash", "SIMHASH_DISTANCE": 5}))
    assert old.mode == "simhash" and not old.verified and old.rule == Rule(mode="simhash", distance=5)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=True, allow_infinity=True, width=32) | st.text(max_size=5))
def test_similarity_setting_is_a_number_in_0_exclusive_to_1_or_an_error_naming_it(value):
    try:
        valid = 0 < float(value) <= 1
    except ValueError:
        valid = False
    if not valid:
        with pytest.raises(ValueError, match="SIMHASH_SIMILARITY"):
            SimhashSettings.from_settings(Settings({"SIMHASH_SIMILARITY": value}))
        return
    config = SimhashSettings.from_settings(Settings({"SIMHASH_SIMILARITY": value}))
    assert config.similarity == float(value) and config.rule.similarity == float(value)


def test_verdict_text_says_similarity_and_bits():
    assert verdict_text(Match("a", 1, 7, {}, 1, 0.9297)) == "similarity 0.93, 7 bits"
    assert verdict_text(Match("a", 1, 2, {}, 1, None)) == "2 bits, by simhash alone"


def test_metadata_fields_from_the_middlewares_result_carry_sketch_and_similarity():
    sketch = fingerprint_page(
        b"<html><body><p>" + b"alpha beta gamma delta " * 20 + b"</p></body></html>"
    ).minhash
    result = {
        "simhash": "aaaaaaaaaaaaa",
        "tokens": 80,
        "extractor": "x",
        "scheme": "simhash-doc/1",
        "minhash": sketch.to_text(),
        "duplicate_of": {
            "record_id": "<urn:uuid:1>",
            "url": "u",
            "date": "d",
            "distance": 7,
            "similarity": 0.9297,
        },
    }
    fields = fields_from_result(result)
    assert fields.minhash == sketch and fields.duplicate.similarity == 0.9297
    assert ("near-duplicate-similarity", "0.9297") in fields.to_pairs()
    older = fields_from_result(
        {**result, "minhash": None, "duplicate_of": {**result["duplicate_of"], "similarity": None}}
    )
    names = [name for name, _ in older.to_pairs()]
    assert "minhash" not in names and "near-duplicate-similarity" not in names


def test_settings_parse_extractor_and_workers():
    config = SimhashSettings.from_settings(Settings({"SIMHASH_WORKERS": "3", "SIMHASH_MAX_BODY_SIZE": 1000}))
    assert config.workers == 3
    assert config.extractor.name == DEFAULT_NAME and config.extractor.max_bytes == 1000
    trafilatura = {"SIMHASH_EXTRACTOR": "trafilatura", "SIMHASH_EXTRACTOR_FAST": False}
    config = SimhashSettings.from_settings(Settings({**trafilatura, "SIMHASH_MAX_BODY_SIZE": 1000}))
    assert config.extractor.fast is False
    assert config.extractor.max_bytes == 1000
    assert "fast=0" in config.extractor.description


def test_trafilatura_options_without_trafilatura_refuse_with_the_setting_to_add():
    """The default extractor is not trafilatura: its options alone are refused, not ignored."""
    with pytest.raises(SimhashConfigError, match="set SIMHASH_EXTRACTOR = 'trafilatura'"):
        SimhashSettings.from_settings(Settings({"SIMHASH_EXTRACTOR_FAST": False}))


def test_disabled_components_raise_not_configured():
    # Only the settings are read before NotConfigured (and get_crawler needs a reactor on Scrapy 2.13).
    crawler = SimpleNamespace(settings=Settings({"SIMHASH_ENABLED": False}))
    with pytest.raises(NotConfigured):
        SimhashMiddleware.from_crawler(crawler)
    with pytest.raises(NotConfigured):
        SimhashPipeline.from_crawler(crawler)


def _match(key: str, distance: int, seq: int) -> Match:
    return Match(key, 1, distance, {"url": key}, seq)


def test_duplicate_of_skips_itself_and_prefers_the_closest_oldest():
    matches = [_match("a", 0, 5), _match("b", 0, 2), _match("c", 1, 1)]
    assert duplicate_of(matches, "a", None).key == "b"
    assert duplicate_of([_match("a", 0, 5)], "a", None) is None
    # a re-crawled page is the original when nothing older than its first visit matches
    assert duplicate_of(matches, "b", _match("b", 0, 2)).key == "c"
    assert duplicate_of([_match("a", 0, 9)], "b", _match("b", 0, 2)) is None


def test_derived_location():
    assert derived_location("/data/idx", "-items") == "/data/idx-items"
    uri = derived_location("redis://127.0.0.1:6379/0?prefix=crawl1", "-items")
    assert uri.startswith("redis://127.0.0.1:6379/0?") and "prefix=crawl1-items" in uri
    assert "prefix=simhash-items" in derived_location("redis://127.0.0.1:6379/0", "-items")


class DeclaredItem(scrapy.Item):
    url = scrapy.Field()
    simhash = scrapy.Field()
    near_duplicate_of = scrapy.Field()


class VerdictItem(DeclaredItem):
    near_duplicate_similarity = scrapy.Field()
    near_duplicate_distance = scrapy.Field()


class PlainItem(scrapy.Item):
    url = scrapy.Field()


@dataclass
class DataItem:
    url: str


def test_item_middleware_stamps_items_that_can_hold_the_fields(caplog):
    request = scrapy.Request("http://127.0.0.1/a")
    request.meta["simhash"] = {
        "simhash": "aaaaaaaaaaaaa",
        "duplicate_of": {"url": "http://127.0.0.1/o", "distance": 7, "similarity": 0.9297},
    }
    response = scrapy.http.HtmlResponse(request.url, body=b"<html></html>", request=request)
    items = [{"url": "x"}, DeclaredItem(url="x"), PlainItem(url="x"), DataItem("x"), request, VerdictItem()]
    out = list(SimhashItemMiddleware().process_spider_output(response, items))
    assert out[0]["simhash"] == "aaaaaaaaaaaaa" and out[0]["near_duplicate_of"] == "http://127.0.0.1/o"
    assert (out[0]["near_duplicate_similarity"], out[0]["near_duplicate_distance"]) == (0.9297, 7)
    assert (
        out[1]["near_duplicate_of"] == "http://127.0.0.1/o"
    )  # declared before the verdict fields: still stamped
    assert "near_duplicate_similarity" not in out[1]
    assert (out[5]["near_duplicate_similarity"], out[5]["near_duplicate_distance"]) == (0.9297, 7)
    assert "simhash" not in out[2]
    assert not hasattr(out[3], "simhash")
    assert out[4] is request
    assert "PlainItem items do not declare" in caplog.text


# -- the index guard's circuit breaker (its policy, step by step on one thread; the crawl tests in
# -- test_redis_index.py drive it through a real Redis outage) ---------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _guard(retry_after: float = 5.0) -> tuple[IndexGuard, _Clock]:
    clock = _Clock()
    return IndexGuard("test", retry_after, reactor=object(), clock=clock), clock


def _page(guard: IndexGuard, fn) -> str:
    """One page through the breaker, as IndexGuard.run does it: 'ok', 'failed' or the skip reason."""
    try:
        ticket = guard._admit()
        guard._call(fn, ticket)
    except IndexSkipped as skipped:
        return skipped.reason
    except SimhashIndexError:
        return "failed"
    return "ok"


def _down():
    raise IndexUnavailableError("redis://127.0.0.1:1/0 is unavailable")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 4), st.booleans()), max_size=40), st.floats(0.1, 3))
def test_breaker_asks_the_index_only_when_closed_or_cooled_down(pages, retry_after):
    """Model: after a failure at time f, the index is asked again first at f + retry_after (a probe);
    a success closes the breaker. Every other page passes at once without a call."""
    guard, clock = _guard(retry_after)
    failed_at = None
    try:
        for wait, up in pages:
            clock.now += wait
            calls = []

            def fn(up=up, calls=calls):
                calls.append(1)
                if not up:
                    _down()

            outcome = _page(guard, fn)
            expect_call = failed_at is None or clock.now >= failed_at + retry_after
            assert bool(calls) == expect_call
            if expect_call:
                assert outcome == ("ok" if up else "failed")
                failed_at = None if up else clock.now
            else:
                assert outcome == "index_unavailable"
    finally:
        guard.close()


def test_breaker_skips_queued_calls_and_a_lost_index_stays_lost(caplog):
    caplog.set_level(logging.INFO, logger="scrapy_simhash")
    guard, clock = _guard(5.0)
    try:
        first, queued = guard._admit(), guard._admit()  # two pages sent before the index failed
        with pytest.raises(IndexUnavailableError):
            guard._call(_down, first)
        with pytest.raises(IndexSkipped, match="index_unavailable"):
            guard._call(lambda: pytest.fail("a call queued behind a failure reached the index"), queued)
        clock.now += 5
        probe = guard._admit()
        with pytest.raises(IndexSkipped):  # one probe at a time
            guard._admit()
        assert guard._call(lambda: 42, probe) == 42 and not guard.is_open
        assert caplog.text.count("index is unavailable") == 1 and "tagging resumes" in caplog.text

        def lost():
            raise IndexLostError("Redis at x lost the index namespace 'p'")

        assert _page(guard, lost) == "failed"
        clock.now += 3600
        assert _page(guard, lambda: pytest.fail("asked a lost index")) == "index_lost"
        assert caplog.text.count("lost the index namespace") == 1
    finally:
        guard.close()


def test_index_retry_after_setting():
    assert SimhashSettings.from_settings(Settings()).index_retry_after == 5.0
    assert (
        SimhashSettings.from_settings(Settings({"SIMHASH_INDEX_RETRY_AFTER": "0.5"})).index_retry_after == 0.5
    )
    with pytest.raises(ValueError, match="SIMHASH_INDEX_RETRY_AFTER"):
        SimhashSettings.from_settings(Settings({"SIMHASH_INDEX_RETRY_AFTER": -1}))
