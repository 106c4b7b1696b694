"""Revisit records: a payload the crawl has archived before is written as a reference, not again.

With ``SIMHASH_WARC_REVISITS`` (on by default with the WARC writer), a response whose payload
digest (sha1 of the entity body as received) equals one already archived through the same index
location is written as a WARC/1.1 ``revisit`` record, profile ``identical-payload-digest``: the HTTP
headers only, with ``WARC-Refers-To``, ``WARC-Refers-To-Target-URI`` and ``WARC-Refers-To-Date``
naming the response record that holds the payload. Replay tools (pywb, OpenWayback) serve the
revisit's URL with the original's payload.

Order (see :mod:`scrapy_simhash.index.archive.payload_digests`): a payload is registered only after its
response record is written and flushed, so a crawl killed in between leaves no registration, and
no revisit can ever point to a record that is not in a WARC file.

A store that cannot be used (a damaged digest file, a Redis that is down) never stops the crawl:
the response is written in full, counted in ``simhash/warc/revisit_errors``, and the error logged
once; a Redis store is tried again after :data:`RETRY_AFTER` seconds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ...index.archive.payload_digests import Claim, Original, PayloadDigestError, PayloadDigests
from ...side_store import SideStore
from ..records import HTTP_RESPONSE, WarcRecord

logger = logging.getLogger(__name__)

IDENTICAL_PAYLOAD_DIGEST = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
RETRY_AFTER = 30.0
"""Seconds without revisits after a store error, before the store is tried again."""

REVISITS = "simhash/warc/revisits"
BYTES_SAVED = "simhash/warc/revisit_bytes_saved"
ERRORS = "simhash/warc/revisit_errors"
BUSY = "simhash/warc/revisit_busy"
"""Responses written in full because another crawler's claim on their payload was still pending."""


def revisit_record(
    uri: str,
    date: str,
    head: bytes,
    payload_digest: str,
    original: Original,
    *,
    ip_address: str | None = None,
) -> WarcRecord:
    """A WARC/1.1 ``revisit`` record (identical-payload-digest): the HTTP head only, no body.

    No ``WARC-Truncated``: the block is complete as the profile defines it (the payload is in the
    record referred to)."""
    headers = [("WARC-Target-URI", uri), ("WARC-Date", date)]
    if ip_address:
        headers.append(("WARC-IP-Address", ip_address))
    headers += [
        ("WARC-Profile", IDENTICAL_PAYLOAD_DIGEST),
        ("WARC-Refers-To", original.record_id),
        ("WARC-Refers-To-Target-URI", original.uri),
        ("WARC-Refers-To-Date", original.date),
        ("Content-Type", HTTP_RESPONSE),
        ("WARC-Payload-Digest", payload_digest),
    ]
    return WarcRecord("revisit", headers, head)


class CrawlRevisits:
    """The WARC writer's use of a digest store: claims, confirmations, errors and stats.

    ``open_store`` is called lazily (on the first payload, and again :data:`RETRY_AFTER` seconds
    after a failure); ``clock`` is injectable."""

    def __init__(
        self,
        open_store: Callable[[], PayloadDigests],
        stats: Any,
        *,
        location: str,
        reset: bool = False,
        retry_after: float = RETRY_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stats = stats
        self.location = location
        self._store = SideStore(
            open_store,
            location=lambda: location,
            what="payload digests",
            without="responses are written in full (no revisit records)",
            resumes="revisits resume",
            counted_in=ERRORS,
            log=logger,
            reset=reset,
            retry_after=retry_after,
            clock=clock,
        )

    def _failed(self, exc: Exception) -> None:
        self.stats.inc_value(ERRORS)
        self._store.failed(exc)

    def claim(self, digest: str, candidate: Original) -> Claim:
        """What to write for this payload; a full response (``Claim()``) when the store fails."""
        try:
            store = self._store.get()
            if store is None:
                self.stats.inc_value(ERRORS)
                return Claim()
            claim = store.claim(digest, candidate)
        except PayloadDigestError as exc:
            self._failed(exc)
            return Claim()
        if claim.original is None and not claim.claimed:
            self.stats.inc_value(BUSY)
        return claim

    def confirm(self, digest: str, candidate: Original) -> None:
        """Register the response just written (and flushed) as the payload's original."""
        store = self._store.store
        if store is None:
            return
        try:
            store.confirm(digest, candidate)
        except PayloadDigestError as exc:
            self._failed(exc)

    def release(self, digest: str, candidate: Original) -> None:
        """The claimed response could not be written: let others archive the payload."""
        store = self._store.store
        if store is None:
            return
        try:
            store.release(digest, candidate)
        except PayloadDigestError as exc:
            self._failed(exc)

    def written(self, payload_bytes: int) -> None:
        self.stats.inc_value(REVISITS)
        self.stats.inc_value(BYTES_SAVED, payload_bytes)

    def close(self) -> None:
        self._store.close()
