"""The crawl's change kinds: each fingerprinted page compared with its URL's last capture.

The middleware calls :meth:`CrawlChanges.observe` on its index thread, after the page's response (or
revisit) record was written: it looks the URL's last capture up, classifies the change
(:mod:`scrapy_simhash.change`) and records this page as the URL's last capture. Then, in the
reactor thread, :meth:`CrawlChanges.count` counts it (``simhash/change/<kind>``) and logs it
(DEBUG), and :func:`described` is what ``response.meta["simhash"]["change"]`` and the page's WARC
metadata record carry.

A store that cannot be used (a damaged ``captures.sqlite``, a Redis that is down) never stops the
crawl: the page gets no change kind, ``simhash/error/captures`` counts it, the error is logged once,
and the store is tried again after :data:`RETRY_AFTER` seconds.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from .change import TEXT_UNCHANGED, Change, classify
from .decision import Rule
from .index.archive.captures import Capture, CaptureStore, CaptureStoreError
from .page import PageFingerprint
from .side_store import SideStore

logger = logging.getLogger(__name__)

RETRY_AFTER = 30.0
"""Seconds without change kinds after a store error, before the store is tried again."""
ERRORS = "simhash/error/captures"
DROPPED = "simhash/dropped/unchanged"


def payload_digest(body: bytes) -> str:
    """``sha1:<base32>`` of the body, the form of a WARC payload digest."""
    import base64

    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class CrawlChanges:
    """The middleware's use of the capture store: look-ups, updates, errors and stats.

    ``open_store`` is called lazily (on the first page, and again :data:`RETRY_AFTER` seconds after a
    failure); ``clock`` is injectable."""

    def __init__(
        self,
        open_store: Callable[[], CaptureStore],
        stats: Any,
        rule: Rule,
        *,
        location: Callable[[], str],
        reset: bool = False,
        retry_after: float = RETRY_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stats = stats
        self.rule = rule
        self._store = SideStore(
            open_store,
            location=location,
            what="last captures",
            without="pages get no change kind",
            resumes="change kinds resume",
            counted_in=ERRORS,
            log=logger,
            reset=reset,
            retry_after=retry_after,
            clock=clock,
        )

    def observe(self, page: PageFingerprint, url: str, body: bytes, meta: dict[str, Any]) -> Change | None:
        """On the index thread: the change since the URL's last capture (None: its first capture, or
        the store failed, which is counted), after which this page is the URL's last capture.

        ``meta`` is the request's: the WARC writer put the record id, date and payload digest of the
        record it wrote there (``warc_record_id``, ``warc_date``, ``warc_payload_digest``: the digest of
        the bytes received, as archives give it); without WARC output, the digest of the body the
        middleware sees (decompressed) stands for it."""
        assert page.simhash is not None
        current = Capture(
            url=url,
            record_id=meta.get("warc_record_id"),
            date=meta.get("warc_date") or _now(),
            payload_digest=meta.get("warc_payload_digest") or payload_digest(body),
            text_digest=page.text_digest,
            simhash=page.simhash,
            sketch=None if page.minhash is None or not self.rule.verified else page.minhash.to_text(),
        )
        try:
            store = self._store.get()
            if store is None:
                self.stats.inc_value(ERRORS)
                return None
            previous = store.last(url)
            store.put(current)
        except CaptureStoreError as exc:
            self.stats.inc_value(ERRORS)
            self._store.failed(exc)
            return None
        if previous is None:
            return None
        try:
            return classify(previous, current, self.rule)
        except ValueError as exc:  # a stored sketch that cannot be read or compared: this page has no kind
            self.stats.inc_value(ERRORS)
            logger.warning("simhash: cannot compare %s with its last capture: %s", url, exc)
            return None

    def count(self, change: Change | None, url: str) -> None:
        """Stats and the DEBUG line of one page's change (nothing for a first capture)."""
        if change is None:
            return
        self.stats.inc_value(f"simhash/change/{change.kind}")
        similarity = "" if change.similarity is None else f", similarity {change.similarity:.2f}"
        logger.debug(
            "simhash: %s is %s since its capture of %s (%d bits%s)",
            url,
            change.kind,
            change.previous.date,
            change.distance,
            similarity,
        )

    def close(self) -> None:
        self._store.close()


def described(change: Change | None) -> dict[str, Any] | None:
    """``response.meta["simhash"]["change"]``: the kind, the similarity, the previous capture."""
    if change is None:
        return None
    return {
        "kind": change.kind,
        "similarity": None if change.similarity is None else round(change.similarity, 4),
        "distance": change.distance,
        "previous_capture": change.previous.record_id,
        "previous_capture_date": change.previous.date,
    }


def text_unchanged(change: Change | None) -> bool:
    """Whether the page's main text is the one of its last capture (``drop_unchanged`` drops it)."""
    return change is not None and change.kind in TEXT_UNCHANGED


def open_beside_index(location: str) -> CaptureStore:
    """The capture store of the crawl's index location (a Redis one with the crawl's short timeouts)."""
    from .crawl_index import with_crawl_options
    from .index import is_server_uri
    from .index.archive.captures import open_captures

    return open_captures(with_crawl_options(location) if is_server_uri(location) else location)
