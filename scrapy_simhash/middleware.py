"""SimhashMiddleware: fingerprints HTML responses and tags or drops near-duplicates.

Enable with the add-on (``ADDONS = {"scrapy_simhash.Addon": 500}``) or by hand::

    DOWNLOADER_MIDDLEWARES = {"scrapy_simhash.SimhashMiddleware": 543}

Priority 543 places it after decompression (590), redirects (600) and retries
(550) in the response chain, so it sees the final, decompressed body.

For each fingerprinted response, ``response.meta["simhash"]`` holds::

    {"simhash": "<base32>", "simhash_hex": "<hex>", "scheme": "simhash-doc/1",
     "minhash": "<base64url>", "minhash_scheme": "minhash-doc/1", "mode": "verified",
     "extractor": "resiliparse+trafilatura/...", "tokens": 812, "near_duplicate": True,
     "duplicate_of": {"key": ..., "url": ..., "date": ..., "record_id": ...,
                      "distance": 7, "similarity": 0.9297, "method": "verified"},
     "canonical": "https://example.org/a", "replaces": None,
     "change": {"kind": "minor", "similarity": 0.8125, "distance": 5,
                "previous_capture": "<urn:uuid:...>", "previous_capture_date": "2026-..."}}

``distance`` is the Hamming distance of the simhashes in bits, ``similarity`` the estimated
Jaccard similarity of the minhash-doc/1 sketches (0..1; None when the decision was made by
simhash alone: ``SIMHASH_MODE = "simhash"``, or a stored page without sketch, counted in
``simhash/decided_by_simhash``). ``minhash`` is None in simhash mode.

``canonical`` is the URL the page declares canonical (None: none, or ``SIMHASH_KEEP = "first"``).
``replaces`` describes, like ``duplicate_of``, the stored original a more preferred copy replaced as
its cluster's original (``SIMHASH_KEEP = "preferred"``, :mod:`.preferred`); such a page is not a
near-duplicate and is never dropped.

``change`` says how the page's main text changed since its URL's last capture (:mod:`.crawl_changes`):
``kind`` is ``unchanged``, ``same-text``, ``minor`` or ``changed``; None for a URL's first capture.
With ``SIMHASH_ACTION = "drop_unchanged"``, ``unchanged`` and ``same-text`` pages are dropped.

Responses that are not fingerprinted carry the reason in
``response.meta["simhash_skipped"]``. ``request.meta["dont_simhash"] = True``
skips a request.
"""

from __future__ import annotations

import dataclasses
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.misc import load_object

from .crawl_changes import DROPPED, CrawlChanges, described, open_beside_index, text_unchanged
from .crawl_config import crawl_settings, refuse_to_start, spider_name, stop_crawl
from .crawl_index import default_location, open_crawl_index
from .extract import declared_encoding
from .fingerprint import SCHEME, hamming, to_base32, to_hex
from .index import (
    IndexLostError,
    IndexUnavailableError,
    Match,
    NearDuplicateIndex,
    SimhashIndexError,
)
from .index_guard import IndexGuard, IndexSkipped
from .matches import described_match, duplicate_of, verdict_text
from .page import PageFingerprint
from .pool import FingerprintPool
from .preferred import Preference
from .settings import SimhashConfigError, SimhashSettings
from .shown import shown_location
from .signals import fingerprint_computed

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

    from .change import Change

logger = logging.getLogger(__name__)

# Reasons a page has no fingerprint that are about the page, not about us.
_SKIP_REASONS = {
    "dont_simhash",
    "status",
    "content_type",
    "empty",
    "binary",
    "too_large",
    "no_text",
    "boilerplate",
    "too_few_tokens",
}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _declared_encoding(response: Response) -> str | None:
    return declared_encoding((response.headers.get(b"Content-Type") or b"").decode("latin-1"))


class SimhashMiddleware:
    """Downloader middleware: fingerprint, look up, tag or drop."""

    def __init__(self, crawler: Crawler, config: SimhashSettings) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.config = config
        self.index: NearDuplicateIndex | None = None
        self.location: str | None = None
        self._open_error: Exception | None = None
        self.guard: IndexGuard | None = None
        function = crawler.settings.get("SIMHASH_FINGERPRINT_FUNCTION")
        self.pool = FingerprintPool(
            config.workers,
            extractor=config.extractor,
            min_tokens=config.min_tokens,
            timeout=config.timeout,
            minhash=config.verified,
            canonical=config.keep == "preferred",
            **({"function": load_object(function)} if function else {}),
        )
        self.preference = Preference.with_extra(config.tracking_params)
        self.changes = CrawlChanges(
            lambda: open_beside_index(self.location or ""),
            self.stats,
            config.rule,
            location=lambda: shown_location(self.location or ""),
            reset=config.reset,
        )

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        config = crawl_settings(crawler)
        if not config.enabled:
            raise NotConfigured("SIMHASH_ENABLED is off")
        middleware = cls(crawler, config)
        crawler.signals.connect(middleware.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        spider = getattr(crawler, "spider", None)
        if spider is not None:
            middleware.location = config.index or default_location(spider.name)
            middleware._open_before_start()
        return middleware

    def _open_before_start(self) -> None:
        """The index opens before the crawl starts, so that one that cannot honour the settings refuses
        the crawl (non-zero exit status: Scrapy fails a crawl only for errors raised before it starts).
        One that cannot be opened (a Redis that is down) lets the crawl go on with pages untagged and
        is retried, or with ``SIMHASH_ON_INDEX_ERROR = "stop"`` fails the start too. This blocks once,
        before any page is fetched, for at most the index's opening (a crawl's Redis client gives up
        within about a second)."""
        try:
            sizes = self._open()
        except SimhashConfigError as exc:
            self.pool.close()
            refuse_to_start(exc)
        except SimhashIndexError as exc:
            if self.config.on_index_error != "stop":
                self._open_failed(exc)
            else:
                self._open_error = exc
                self.stats.inc_value("simhash/error/index_open")
                logger.error(
                    "simhash: cannot open the index, the crawl does not start "
                    "(SIMHASH_ON_INDEX_ERROR=stop): %s",
                    exc,
                )
                self.pool.close()
                self._log_summary("could not be opened")
                raise
        else:
            self._opened(sizes)
        self.guard = IndexGuard("page", self.config.index_retry_after)

    async def spider_opened(self, spider: Spider | None = None) -> None:
        if self.guard is None:  # not opened yet (no spider at from_crawler: a crawler built by hand)
            name = spider_name(spider, self.crawler)
            self.location = self.location or self.config.index or default_location(name)
            # Index calls run on the guard's thread (a Redis that is down retries for a second), opening too.
            self.guard = IndexGuard("page", self.config.index_retry_after)
            try:
                sizes = await maybe_deferred_to_future(self.guard.run(self._open))
            except SimhashConfigError as exc:  # found only now that the server answers: stop at once
                self._open_error = exc
                self.stats.inc_value("simhash/error/config")
                logger.error("simhash: %s. Stopping the crawl.", exc)
                stop_crawl(self.crawler, "simhash_config_error")
                return
            except SimhashIndexError as exc:
                self._open_failed(exc)
            else:
                self._opened(sizes)
        if self._open_error is not None and self.config.on_index_error == "stop":
            stop_crawl(self.crawler, "simhash_index_error")

    def _open(self) -> tuple[int, int]:
        """Open the index (on the index thread, or before the crawl starts); its size, and how many of
        its pages have no sketch."""
        assert self.location is not None
        index = open_crawl_index(
            self.location,
            self.config.distance,
            reset=self.config.reset,
            sync=self.config.index_sync,
            mode=self.config.mode,
            similarity=self.config.similarity,
            extractor=self.config.extractor.description,
            mix_extractors=self.config.extractor_mix,
        )
        self.index, self._open_error = index, None
        size = len(index)
        sketches = getattr(index, "sketches", None)  # a VerifiedIndex's sketch store
        return size, (max(0, size - len(sketches)) if sketches is not None and self.config.verified else 0)

    def _opened(self, sizes: tuple[int, int]) -> None:
        size, without_sketch = sizes
        logger.info(
            "simhash: index %s%s (%d fingerprints), %s, action=%s, %d worker(s)",
            shown_location(self.location or ""),
            "" if self.config.index else " (SIMHASH_INDEX is not set: the spider's own)",
            size,
            self._rule_text(),
            self.config.action,
            self.config.workers,
        )
        self.stats.set_value("simhash/index/size", size)
        if without_sketch:
            self.stats.set_value("simhash/index/without_sketch", without_sketch)
            logger.warning(
                "simhash: %d of the index's pages have no minhash sketch (stored before sketches, or with "
                "SIMHASH_MODE=simhash): they are judged by simhash alone (distance <= %d), counted in "
                "simhash/decided_by_simhash; each one this crawl revisits gains its sketch "
                "(simhash/index/sketch_added)",
                without_sketch,
                self.config.distance,
            )

    def _rule_text(self) -> str:
        if self.config.verified:
            return (
                f"mode=verified (similarity >= {self.config.similarity:g}; "
                f"k={self.config.distance} for pages without sketch)"
            )
        return f"mode=simhash (k={self.config.distance})"

    def _open_failed(self, exc: SimhashIndexError) -> None:
        """Counted and logged; the crawl goes on with pages untagged (SIMHASH_ON_INDEX_ERROR=stop: it
        stops once the spider is open)."""
        self._open_error = exc
        self.stats.inc_value("simhash/error/index_open")
        if self.config.on_index_error == "stop":
            logger.error("simhash: cannot open the index, stopping the crawl: %s", exc)
        else:
            logger.error("simhash: cannot open the index, pages pass untagged: %s", exc)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        self.pool.close()
        if self.guard is not None:
            self.guard.close()  # waits for the index call in flight, if any
        self.changes.close()
        if self.index is None:  # never opened (the errors say why): the summary still counts the pages
            self._log_summary("could not be opened")
            return
        size = self._index_size()
        self.index.close()
        self.index = None
        self._log_summary(f"holds {size} fingerprints")

    def _log_summary(self, index_state: str) -> None:
        """The one INFO line that sums up the crawl for scrapy-simhash, whatever became of the index."""
        get = self.stats.get_value
        stats = self.stats.get_stats()
        logger.info(
            "simhash: %d pages fingerprinted, %d unique, %d near-duplicates (%d dropped, %d decided by "
            "simhash alone), %d skipped, %d errors; index %s %s",
            get("simhash/computed", 0),
            get("simhash/unique", 0),
            get("simhash/near_duplicate", 0),
            get("simhash/dropped", 0),
            get("simhash/decided_by_simhash", 0),
            sum(v for k, v in stats.items() if k.startswith("simhash/skipped/")),
            sum(v for k, v in stats.items() if k.startswith("simhash/error/")),
            shown_location(self.location or ""),
            index_state,
        )

    def _index_size(self) -> int | str:
        if self.guard is not None and self.guard.is_open:
            return "?"  # the index is down or lost: do not wait for its retries while closing
        try:
            size = len(self.index) if self.index is not None else 0
        except SimhashIndexError:
            return "?"
        self.stats.set_value("simhash/index/size", size)
        return size

    # -- the response path ------------------------------------------------

    def _skip_reason(self, request: Request, response: Response) -> str | None:
        if request.meta.get("dont_simhash"):
            return "dont_simhash"
        if not 200 <= response.status < 300:
            return "status"
        content_type = (response.headers.get(b"Content-Type") or b"").decode("latin-1").split(";")[0]
        if content_type.strip().lower() not in self.config.content_types:
            return "content_type"
        if len(response.body) > self.config.max_body_size:
            return "too_large"
        return None

    def _skip(self, request: Request, response: Response, reason: str) -> Response:
        kind = "skipped" if reason in _SKIP_REASONS else "error"
        self.stats.inc_value(f"simhash/{kind}/{reason}")
        request.meta["simhash_skipped"] = reason
        return response

    async def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Response:
        reason = self._skip_reason(request, response)
        if reason is not None:
            return self._skip(request, response, reason)
        page: PageFingerprint = await maybe_deferred_to_future(
            self.pool.submit(response.body, response.url, _declared_encoding(response))
        )
        if page.simhash is None:
            return self._skip(request, response, page.reason or "no_text")
        self.stats.inc_value("simhash/computed")
        assert self.guard is not None, "the index opens with the spider"
        try:
            (original, replaced), change = await maybe_deferred_to_future(
                self.guard.run(
                    lambda: (
                        self._record(page, response.url, request),
                        self.changes.observe(page, response.url, response.body, request.meta),
                    )
                )
            )
        except IndexSkipped as skipped:  # the index is known to be down: no call, no wait
            return self._skip(request, response, skipped.reason)
        except SimhashIndexError as exc:
            return self._index_failed(request, response, exc)
        result = self._result(page, None if replaced else original, original if replaced else None)
        result["change"] = described(change)
        self.changes.count(change, response.url)
        request.meta["simhash"] = result
        self.crawler.signals.send_catch_log(
            fingerprint_computed,
            response=response,
            request=request,
            result=result,
            spider=self.crawler.spider,
        )
        if original is None:
            self.stats.inc_value("simhash/unique")
            return self._unless_unchanged(response, change)
        url = original.meta.get("url", original.key)
        if replaced:  # a more preferred copy than the stored original: it is the original from now on
            self.stats.inc_value("simhash/original_replaced")
            logger.info("simhash: %s replaces %s as original (%s)", response.url, url, verdict_text(original))
            return self._unless_unchanged(response, change)
        self.stats.inc_value("simhash/near_duplicate")
        if self.config.verified and original.similarity is None:
            self.stats.inc_value("simhash/decided_by_simhash")
        logger.debug("simhash: %s is a near-duplicate of %s (%s)", response.url, url, verdict_text(original))
        if self.config.action == "drop":
            self.stats.inc_value("simhash/dropped")
            raise IgnoreRequest(f"near-duplicate of {url} ({verdict_text(original)})")
        return self._unless_unchanged(response, change)

    def _unless_unchanged(self, response: Response, change: Change | None) -> Response:
        """``SIMHASH_ACTION = "drop_unchanged"``: a page whose main text is its last capture's is dropped."""
        if self.config.action == "drop_unchanged" and change is not None and text_unchanged(change):
            self.stats.inc_value(DROPPED)
            raise IgnoreRequest(f"main text unchanged since {change.previous.date} ({change.kind})")
        return response

    def _record(self, page: PageFingerprint, url: str, request: Request) -> tuple[Match | None, bool]:
        """On the index thread: look the page up and store it; the match it duplicates, if any, and
        whether the page replaces that match as its cluster's original (``SIMHASH_KEEP``)."""
        if self.index is None:
            if not isinstance(self._open_error, IndexUnavailableError):  # retrying will not help
                where = shown_location(self.location or "")
                raise IndexUnavailableError(f"the index at {where} could not be opened: {self._open_error}")
            # the server was down at start: try again (the breaker paces the tries)
            try:
                self._open()
            except Exception as exc:  # whatever stops it opening, the page passes untagged
                raise IndexUnavailableError(
                    f"the index at {shown_location(self.location or '')} could not be opened: {exc}"
                ) from exc
            assert self.index is not None
            logger.info(
                "simhash: index %s opened (%d fingerprints)",
                shown_location(self.location or ""),
                len(self.index),
            )
        index, simhash = self.index, page.simhash
        assert simhash is not None
        # simhash mode: the simhash index, which takes no sketch
        sketch: dict[str, Any] = {"sketch": page.minhash} if self.config.verified else {}
        known = index.get(url)
        stored_sketch = self._stored_sketch(known)
        if known is not None and self._unchanged(known, page, stored_sketch):
            # Seen before with the same content (a re-crawl): do not re-add, so it keeps its age;
            # a page stored before sketches gets this visit's sketch, so that it is verified from now on
            self.stats.inc_value("simhash/revisit")
            if stored_sketch is None and page.minhash is not None and self.config.verified:
                add_sketch = getattr(index, "add_sketch", None)
                if add_sketch is not None and add_sketch(url, page.minhash):
                    self.stats.inc_value("simhash/index/sketch_added")
            return duplicate_of(self._aged(index.query(simhash, **sketch)), url, known), False
        meta: dict[str, Any] = {
            "url": url,
            "date": request.meta.get("warc_date") or _now(),
            "record_id": request.meta.get("warc_record_id"),
        }
        if page.canonical is not None:
            meta["canonical"] = page.canonical
        matches = index.check_and_add(simhash, url, meta, **sketch)
        if known is None:
            self.stats.inc_value("simhash/index/size")
        original = duplicate_of(matches, url, None)
        if original is None or self.config.keep != "preferred" or not self._preferred(page, url, original):
            return original, False
        # the page is stored again, saying which original it replaces: later lookups pass that one over
        index.add(simhash, url, {**meta, "replaces": original.key}, **sketch)
        return original, True

    def _preferred(self, page: PageFingerprint, url: str, original: Match) -> bool:
        """Whether this page is a more preferred copy than the stored ``original`` it duplicates."""
        meta = original.meta or {}
        return self.preference.prefers(
            url, page.canonical, meta.get("url", original.key), meta.get("canonical")
        )

    def _stored_sketch(self, known: Match | None) -> Any:
        """On the index thread: the sketch stored with ``known`` (None: no such page, no sketch, or
        simhash mode)."""
        if known is None or not self.config.verified:
            return None
        sketch_of = getattr(self.index, "sketch", None)  # a VerifiedIndex's; other indexes keep none
        return sketch_of(known.key) if sketch_of is not None else None

    def _unchanged(self, known: Match, page: PageFingerprint, stored_sketch: Any) -> bool:
        """On the index thread: whether the page stored under this URL is, by the rule, ``page`` again."""
        assert page.simhash is not None
        if not self.config.verified:
            return hamming(known.simhash, page.simhash) <= self.config.distance
        verdict = self.config.rule.compare_values(known.simhash, page.simhash, stored_sketch, page.minhash)
        return verdict.near_duplicate

    def _aged(self, matches: list[Match]) -> list[Match]:
        """The matches with their insertion order: a sketch match beyond the simhash radius comes
        back without it (seq 0), and a re-crawl must know which pages are older than its first visit."""
        assert self.index is not None
        aged = []
        for match in matches:
            stored = self.index.get(match.key) if match.seq == 0 else None
            aged.append(dataclasses.replace(match, seq=stored.seq) if stored is not None else match)
        return aged

    def _result(
        self, page: PageFingerprint, original: Match | None, replaced: Match | None = None
    ) -> dict[str, Any]:
        """``response.meta["simhash"]``: ``duplicate_of`` the original this page duplicates, or
        ``replaces`` the stored original this more preferred copy replaces (both described alike)."""
        assert page.simhash is not None
        sketch = page.minhash if self.config.verified else None
        return {
            "simhash": to_base32(page.simhash),
            "simhash_hex": to_hex(page.simhash),
            "scheme": SCHEME,
            "minhash": None if sketch is None else sketch.to_text(),
            "minhash_scheme": None if sketch is None else sketch.scheme,
            "mode": self.config.mode,
            "extractor": self.config.extractor.description,
            "tokens": page.tokens,
            "canonical": page.canonical,
            "near_duplicate": original is not None,
            "duplicate_of": None if original is None else described_match(original),
            "replaces": None if replaced is None else described_match(replaced),
        }

    def _index_failed(self, request: Request, response: Response, exc: Exception) -> Response:
        reason = "index_lost" if isinstance(exc, IndexLostError) else "index_error"
        self.stats.inc_value("simhash/error/index_lost" if reason == "index_lost" else "simhash/error/index")
        if self.config.on_index_error == "stop":
            logger.error("simhash: index error, stopping the crawl (SIMHASH_ON_INDEX_ERROR=stop): %s", exc)
            stop_crawl(self.crawler, "simhash_index_error")
        elif not isinstance(exc, (IndexUnavailableError, IndexLostError)):  # those: the guard logs once
            logger.error("simhash: index error, page passed on untagged: %s: %s", response.url, exc)
        request.meta["simhash_skipped"] = reason
        return response
