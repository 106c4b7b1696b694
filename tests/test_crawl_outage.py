"""The Redis outage drill of the crawl tests (``crawl_outage.OutageDrill``) counts what its stats say."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from crawl_outage import OutageDrill
from redis_server import RedisServer
from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.settings import Settings
from scrapy.signalmanager import SignalManager
from scrapy.statscollectors import MemoryStatsCollector


def _drill(srv: RedisServer) -> OutageDrill:
    settings = Settings(
        {
            "OUTAGE_REDIS_DIR": str(srv.directory),
            "OUTAGE_REDIS_PORT": srv.port,
            "OUTAGE_STOP_AFTER": 6,
            "OUTAGE_RESTART_AFTER": 0,
            "OUTAGE_RESTART_EMPTY": True,
        }
    )
    crawler = SimpleNamespace(settings=settings, signals=SignalManager())
    crawler.stats = MemoryStatsCollector(crawler)
    return OutageDrill.from_crawler(crawler)


def _downloaded(drill: OutageDrill, path: str) -> tuple[Request, HtmlResponse]:
    request = Request(f"http://127.0.0.1/{path}")
    response = HtmlResponse(request.url, body=b"<html></html>", request=request)
    drill.response_downloaded(response, request)
    return request, response


def test_a_page_fetched_before_the_stop_is_not_counted_as_tagged_after_the_restart(tmp_path: Path) -> None:
    """The race behind a flaky ``tagged_after_restart == 1``: the old server answered a page's lookup
    just before it stopped, and the page reached the drill only after the empty server was back."""
    srv = RedisServer(tmp_path / "redis").start()
    try:
        drill = _drill(srv)
        drill.phase = "stopping"  # the sixth tagged page has just passed
        early = _downloaded(drill, "early")  # in flight: looked up by the old server
        drill._stop()  # the old server is gone
        late = _downloaded(drill, "late")  # only the restarted server can answer its lookup
        untagged = _downloaded(drill, "untagged")
        for request, _ in (early, late):
            request.meta["simhash"] = {"near_duplicate": False}  # as SimhashMiddleware tags
        untagged[0].meta["simhash_skipped"] = "index_lost"
        drill.process_response(*late)  # before the drill saw the restart finish: counted all the same
        drill._set("back")
        drill.process_response(*early)
        drill.process_response(*untagged)
    finally:
        srv.stop()
    stats = drill.stats.get_stats()
    assert stats.get("outage/tagged_after_restart") == 1
    assert stats.get("outage/tagged_fetched_before_stop") == 1
    assert stats.get("outage/untagged_after_restart") == 1
