"""The Scrapy components without a crawl: settings, add-on, original selection, item stamping."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import scrapy
from scrapy.exceptions import NotConfigured
from scrapy.settings import Settings

from scrapy_simhash import Addon, SimhashMiddleware, SimhashPipeline
from scrapy_simhash.crawl_index import derived_location
from scrapy_simhash.index import Match
from scrapy_simhash.middleware import duplicate_of
from scrapy_simhash.settings import SimhashSettings
from scrapy_simhash.spidermiddleware import SimhashItemMiddleware


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
    assert "scrapy_simhash.warc.crawl.WarcWriterExtension" not in settings.getdict("EXTENSIONS")


def test_project_settings_win_over_addon_defaults():
    settings = _addon_settings(SIMHASH_ACTION="drop", SIMHASH_DISTANCE=5, SIMHASH_WARC_ENABLED=True)
    assert settings["SIMHASH_ACTION"] == "drop"
    assert settings.getint("SIMHASH_DISTANCE") == 5
    assert settings.getdict("EXTENSIONS")["scrapy_simhash.warc.crawl.WarcWriterExtension"] == 500


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
    ],
)
def test_bad_settings_name_the_setting(name, value):
    with pytest.raises(ValueError, match=name):
        SimhashSettings.from_settings(Settings({name: value}))


def test_settings_parse_extractor_and_workers():
    config = SimhashSettings.from_settings(
        Settings({"SIMHASH_WORKERS": "3", "SIMHASH_EXTRACTOR_FAST": False, "SIMHASH_MAX_BODY_SIZE": 1000})
    )
    assert config.workers == 3
    assert config.extractor.fast is False
    assert config.extractor.max_bytes == 1000
    assert "fast=0" in config.extractor.description


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


class PlainItem(scrapy.Item):
    url = scrapy.Field()


@dataclass
class DataItem:
    url: str


def test_item_middleware_stamps_items_that_can_hold_the_fields(caplog):
    request = scrapy.Request("http://127.0.0.1/a")
    request.meta["simhash"] = {"simhash": "aaaaaaaaaaaaa", "duplicate_of": {"url": "http://127.0.0.1/o"}}
    response = scrapy.http.HtmlResponse(request.url, body=b"<html></html>", request=request)
    out = list(
        SimhashItemMiddleware().process_spider_output(
            response, [{"url": "x"}, DeclaredItem(url="x"), PlainItem(url="x"), DataItem("x"), request]
        )
    )
    assert out[0]["simhash"] == "aaaaaaaaaaaaa" and out[0]["near_duplicate_of"] == "http://127.0.0.1/o"
    assert out[1]["near_duplicate_of"] == "http://127.0.0.1/o"
    assert "simhash" not in out[2]
    assert not hasattr(out[3], "simhash")
    assert out[4] is request
    assert "PlainItem items do not declare" in caplog.text
