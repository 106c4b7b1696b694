"""SimhashPipeline: near-duplicate items, tagged or dropped.

Items arrive stamped by :class:`~scrapy_simhash.spidermiddleware.SimhashItemMiddleware`
with the fingerprint of the page they came from. When the spider extracts the
text itself, ``SIMHASH_ITEM_FIELD`` names the item field to fingerprint
instead; those fingerprints live in an index of their own (``<index>-items``),
so that an item never matches the page it was extracted from.

``SIMHASH_ITEM_ACTION = "drop"`` drops near-duplicate items (DropItem).

Item texts are judged by the same rule as pages (``SIMHASH_MODE``): in verified mode each text
gets a minhash-doc/1 sketch too, and the item's ``near_duplicate_similarity`` and
``near_duplicate_distance`` say why it matched.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter
from scrapy import signals
from scrapy.exceptions import DropItem, NotConfigured
from scrapy.pipelines import ItemPipelineManager
from scrapy.utils.defer import deferred_from_coro, maybe_deferred_to_future

from .crawl_config import crawl_settings, refuse_to_start, spider_name, stop_crawl
from .crawl_index import default_location, derived_location, open_crawl_index
from .fingerprint import simhash_with_count, to_base32
from .fingerprint.minhash import simhash_and_minhash
from .index import IndexLostError, IndexUnavailableError, NearDuplicateIndex, SimhashIndexError
from .index_guard import IndexGuard, IndexSkipped
from .matches import duplicate_of, verdict_text
from .settings import SimhashConfigError, SimhashSettings
from .shown import shown_location
from .spidermiddleware import stamp

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from typing_extensions import Self

logger = logging.getLogger(__name__)

ITEM_INDEX_SUFFIX = "-items"

_AWAITS_COROUTINES = hasattr(ItemPipelineManager, "open_spider_async")
"""Scrapy 2.14+ awaits a pipeline's coroutine open_spider (and deprecates a returned Deferred)."""


class SimhashPipeline:
    """Item pipeline: fingerprint item texts (optional), tag, drop."""

    def __init__(self, crawler: Crawler, config: SimhashSettings) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.key_field = crawler.settings.get("SIMHASH_ITEM_KEY_FIELD", "url")
        self.index: NearDuplicateIndex | None = None
        self.location: str | None = None
        self.guard: IndexGuard | None = None
        self._stop_when_open = False  # the item index failed before the crawl, SIMHASH_ON_INDEX_ERROR=stop

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = crawl_settings(crawler)
        if not config.enabled:
            raise NotConfigured("SIMHASH_ENABLED is off")
        pipeline = cls(crawler, config)
        crawler.signals.connect(pipeline.spider_closed, signal=signals.spider_closed)
        spider = getattr(crawler, "spider", None)
        if config.item_field and spider is not None:
            pipeline.location = pipeline._location(spider.name)
            pipeline._open_before_start()
        return pipeline

    def _location(self, spider_name: str) -> str:
        return derived_location(self.config.index or default_location(spider_name), ITEM_INDEX_SUFFIX)

    def _open_before_start(self) -> None:
        """Like the middleware's: an item index that cannot honour the settings refuses the crawl; one
        that cannot be opened (a Redis that is down) is counted, and retried with the spider."""
        assert self.location is not None
        try:
            self._open(self.location)
        except SimhashConfigError as exc:
            refuse_to_start(exc)
        except SimhashIndexError as exc:
            self._open_failed(exc, self.location)
        self.guard = IndexGuard("item", self.config.index_retry_after)

    def open_spider(self, spider: Spider | None = None) -> Any:
        """Open a server item index, on the guard's thread (see index_guard); a coroutine where Scrapy
        awaits one (2.14+), a Deferred before."""
        if self._stop_when_open:
            stop_crawl(self.crawler, "simhash_index_error")
        if not self.config.item_field or self.guard is not None:
            return None
        opening = self._open_with_spider(spider_name(spider, self.crawler))
        return opening if _AWAITS_COROUTINES else deferred_from_coro(opening)

    async def _open_with_spider(self, spider_name: str) -> None:
        location = self.location = self.location or self._location(spider_name)
        self.guard = IndexGuard("item", self.config.index_retry_after)
        try:
            await maybe_deferred_to_future(self.guard.run(lambda: self._open(location)))
        except SimhashConfigError as exc:  # found only now that the server answers: stop at once
            self.stats.inc_value("simhash/error/config")
            logger.error("simhash: %s. Stopping the crawl.", exc)
            stop_crawl(self.crawler, "simhash_config_error")
        except SimhashIndexError as exc:
            self._open_failed(exc, location)
            if self.config.on_index_error == "stop":
                stop_crawl(self.crawler, "simhash_index_error")

    def _open(self, location: str) -> None:
        self.index = open_crawl_index(
            location,
            self.config.distance,
            reset=self.config.reset,
            sync=self.config.index_sync,
            mode=self.config.mode,
            similarity=self.config.similarity,
        )

    def _open_failed(self, exc: SimhashIndexError, location: str) -> None:
        """Like the middleware: an item index that cannot be opened is counted, never a crash of the crawl."""
        self.stats.inc_value("simhash/error/item_index_open")
        if self.config.on_index_error == "stop":
            logger.error(
                "simhash: cannot open the item index %s, stopping the crawl: %s",
                shown_location(location),
                exc,
            )
            self._stop_when_open = True
        else:
            logger.error(
                "simhash: cannot open the item index %s, items pass untagged: %s",
                shown_location(location),
                exc,
            )

    def spider_closed(self, spider: Spider) -> None:
        if self.guard is not None:
            self.guard.close()
        if self.index is not None:
            self.index.close()
            self.index = None

    async def process_item(self, item: Any, spider: Spider | None = None) -> Any:
        adapter = ItemAdapter(item)
        if self.config.item_field and adapter.get(self.config.item_field) and not adapter.get("simhash"):
            await self._fingerprint_item(item, adapter)
        if adapter.get("simhash") is None:
            return item
        if adapter.get("near_duplicate_of"):
            self.stats.inc_value("simhash/item/near_duplicate")
            if self.config.item_action == "drop":
                self.stats.inc_value("simhash/item/dropped")
                raise DropItem(f"near-duplicate of {adapter['near_duplicate_of']}{_why(adapter)}")
        else:
            self.stats.inc_value("simhash/item/unique")
        return item

    async def _fingerprint_item(self, item: Any, adapter: ItemAdapter) -> None:
        assert self.config.item_field is not None  # (items are fingerprinted only when it is set)
        text = str(adapter[self.config.item_field])
        sketch = None
        if self.config.verified:
            value, sketch, count = simhash_and_minhash(text)
        else:
            value, count = simhash_with_count(text)
        if count == 0 or count < self.config.min_tokens:
            self.stats.inc_value("simhash/item/skipped/too_few_tokens")
            return
        key = str(adapter.get(self.key_field) or f"item:{uuid.uuid4()}")
        if self.guard is None or self.index is None:  # it could not be opened (counted at open)
            self.stats.inc_value("simhash/item/skipped/index_open")
            return
        index, meta = self.index, {"url": adapter.get(self.key_field)}
        options = {"sketch": sketch} if self.config.verified else {}  # the simhash index takes none
        try:
            matches = await maybe_deferred_to_future(
                self.guard.run(lambda: index.check_and_add(value, key, meta, **options))
            )
        except IndexSkipped as skipped:  # the item index is known to be down: no call, no wait
            self.stats.inc_value(f"simhash/error/item_{skipped.reason}")
            return
        except SimhashIndexError as exc:
            lost = isinstance(exc, IndexLostError)
            self.stats.inc_value("simhash/error/item_index_lost" if lost else "simhash/error/index")
            if not isinstance(exc, (IndexUnavailableError, IndexLostError)):  # those: the guard logs once
                logger.error("simhash: item index error, item passed on untagged: %s", exc)
            return
        self.stats.inc_value("simhash/item/computed")
        original = duplicate_of(matches, key, None)
        if original is None:
            stamp(item, to_base32(value), None)
            return
        url = original.meta.get("url") or original.key
        if self.config.verified and original.similarity is None:
            self.stats.inc_value("simhash/item/decided_by_simhash")
        logger.debug("simhash: item %s is a near-duplicate of %s (%s)", key, url, verdict_text(original))
        similarity = None if original.similarity is None else round(original.similarity, 4)
        stamp(item, to_base32(value), url, similarity, original.distance)


def _why(adapter: ItemAdapter) -> str:
    """`` (similarity 0.93, 7 bits)`` from a stamped item's fields, where it has them."""
    similarity, distance = adapter.get("near_duplicate_similarity"), adapter.get("near_duplicate_distance")
    if distance is None:
        return ""
    if similarity is None:
        return f" ({distance} bits, by simhash alone)"
    return f" (similarity {similarity:.2f}, {distance} bits)"
