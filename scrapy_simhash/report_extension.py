"""``SIMHASH_REPORT = "path.html"``: the crawl writes the HTML report of its index when the spider closes.

A small Scrapy extension (the add-on installs it); without the setting it is quietly not configured
(no report was asked for: nothing to warn about). The
report is read from the index as stored (read-only: the middleware may still hold it open), with the
crawl's stats for the pages skipped by reason. A report that cannot be written is logged and counted
(``simhash/error/report``); it never fails the crawl.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future

from .crawl_config import crawl_settings, spider_name
from .crawl_index import default_location

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

    from .report import Written
    from .settings import SimhashSettings

logger = logging.getLogger(__name__)


class SimhashReportExtension:
    """Writes ``SIMHASH_REPORT`` from the crawl's index on ``spider_closed``."""

    def __init__(self, crawler: Crawler, path: str, config: SimhashSettings) -> None:
        self.crawler = crawler
        self.path = path
        self.index = config.index
        self.rule = config.rule  # the crawl's own: applied and drawn
        self.extractor = config.extractor  # the crawl's own: names the fingerprints, re-reads the pair texts
        warcs = crawler.settings.getbool("SIMHASH_WARC_ENABLED", False)
        self.archives = (
            [os.path.abspath(crawler.settings.get("SIMHASH_WARC_DIR") or "warcs")] if warcs else []
        )
        """The crawl's WARCs, where the pair texts are found by the record ids the index keeps."""

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        path = crawler.settings.get("SIMHASH_REPORT")
        if not path:
            raise NotConfigured  # without a message: Scrapy then disables it without a warning
        config = crawl_settings(crawler)  # a wrong value refuses the crawl here, in one line
        if not config.enabled:
            raise NotConfigured("SIMHASH_ENABLED is off")
        extension = cls(crawler, str(path), config)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    async def spider_closed(self, spider: Spider | None = None) -> None:
        """Write once every other ``spider_closed`` handler has run (the middleware has then closed
        the index, its last write committed), in a thread: the reactor is not blocked meanwhile."""
        from twisted.internet import reactor
        from twisted.internet.task import deferLater
        from twisted.internet.threads import deferToThread

        location = self.index or default_location(spider_name(spider, self.crawler))
        stats = dict(self.crawler.stats.get_stats()) if self.crawler.stats else {}
        await maybe_deferred_to_future(deferLater(reactor, 0, lambda: None))
        self._written(await maybe_deferred_to_future(deferToThread(self._write, location, stats)))

    def _write(self, location: str, stats: dict[str, Any]) -> Written | Exception:
        from .report import write_report
        from .report.indexes import load_index

        try:
            rule = self.rule
            data = load_index(
                location,
                k=rule.distance,
                threshold=rule.similarity,
                mode=rule.mode,
                stats=stats,
                archives=self.archives,
            )
            data.extractor = self.extractor.description
            return write_report(data, self.path, extractor=self.extractor)
        except Exception as exc:  # a report is a by-product: it never fails the crawl
            return exc

    def _written(self, result: Written | Exception) -> None:
        if isinstance(result, Exception):
            if self.crawler.stats:
                self.crawler.stats.inc_value("simhash/error/report")
            logger.error("simhash: the report %s could not be written: %s", self.path, result)
            return
        t = result.data.totals
        logger.info(
            "simhash: report written to %s (%d clusters, %d near-duplicates, %d bytes)",
            result.path,
            t.clusters,
            t.near_duplicates,
            result.bytes,
        )
