"""Index calls of a crawl: off the reactor thread, behind a circuit breaker.

Why: a Redis index retries with back-off while its server is down (in a crawl for about a second,
see :mod:`.crawl_index`; longer when the URI asks for it). Run on the Twisted reactor thread, every
such call froze the whole crawl: no downloads, no timers, no other page. Here each call runs on
one dedicated worker thread (one: calls keep their order, and an index client is never used by two
threads at once), and the reactor only waits for its Deferred.

The breaker: after an :class:`IndexUnavailableError`, for ``retry_after`` seconds pages pass untagged
at once, without asking the index (calls already queued behind the failed one are skipped too).
Then one page probes the index; while that probe runs, the others still pass. A probe that succeeds
closes the breaker and tagging resumes. An :class:`IndexLostError` (the index's data is gone) opens
it for good: retrying cannot bring the data back. Transitions are logged once each, not per page.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from twisted.internet import defer, threads
from twisted.python.threadpool import ThreadPool

from .index import IndexLostError, IndexUnavailableError

logger = logging.getLogger(__name__)

T = TypeVar("T")

UNAVAILABLE = "index_unavailable"
LOST = "index_lost"

_CALL, _PROBE = "call", "probe"


class IndexSkipped(Exception):
    """The breaker refused the call: the index is known to be down (or lost). ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class IndexGuard:
    """Runs index calls on a worker thread; opens a circuit breaker while the index is down."""

    def __init__(
        self,
        name: str,
        retry_after: float,
        *,
        reactor: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if reactor is None:
            from twisted.internet import reactor
        self.name = name
        self.retry_after = retry_after
        self._reactor = reactor
        self._clock = clock
        self._lock = threading.Lock()
        self._open_since: float | None = None  # None: closed (the index answers)
        self._retry_at = 0.0
        self._probing = False
        self._passed = 0  # pages passed untagged since the breaker opened
        self.lost: IndexLostError | None = None
        self._pool = ThreadPool(minthreads=1, maxthreads=1, name=f"simhash-index-{name}")
        self._pool.start()
        if hasattr(reactor, "addSystemEventTrigger"):  # never keep a stopped crawl's process alive
            reactor.addSystemEventTrigger("during", "shutdown", self.close)

    @property
    def is_open(self) -> bool:
        return self._open_since is not None or self.lost is not None

    def run(self, fn: Callable[[], T]) -> defer.Deferred[T]:
        """``fn()`` on the worker thread; fails with :class:`IndexSkipped` when the breaker refuses it."""
        try:
            ticket = self._admit()
        except IndexSkipped as skipped:
            return defer.fail(skipped)
        return threads.deferToThreadPool(self._reactor, self._pool, self._call, fn, ticket)

    def close(self) -> None:
        """Wait for the calls in flight and stop the thread. Idempotent."""
        if self._pool.started:
            self._pool.stop()

    # -- the breaker -----------------------------------------------------------------------------

    def _admit(self) -> str:
        """On the reactor: run the call, run it as the probe, or refuse it now."""
        with self._lock:
            if self.lost is not None:
                raise IndexSkipped(LOST)
            if self._open_since is None:
                return _CALL
            if self._probing or self._clock() < self._retry_at:
                self._passed += 1
                raise IndexSkipped(UNAVAILABLE)
            self._probing = True
            return _PROBE

    def _call(self, fn: Callable[[], T], ticket: str) -> T:
        """On the worker thread: a call queued behind a failure is refused without touching the index."""
        with self._lock:
            if self.lost is not None:
                raise IndexSkipped(LOST)
            if ticket == _CALL and self._open_since is not None:
                self._passed += 1
                raise IndexSkipped(UNAVAILABLE)
        try:
            result = fn()
        except IndexUnavailableError as exc:
            self._failed(exc)
            raise
        except IndexLostError as exc:
            self._lose(exc)
            raise
        except BaseException:
            if ticket == _PROBE:
                self._recovered()  # the server answered (with an error of another kind)
            raise
        if ticket == _PROBE:
            self._recovered()
        return result

    def _failed(self, exc: IndexUnavailableError) -> None:
        with self._lock:
            now = self._clock()
            first = self._open_since is None
            if first:
                self._open_since = now
                self._passed = 0
            self._retry_at = now + self.retry_after
            self._probing = False
        if first:
            logger.error(
                "simhash: the %s index is unavailable; pages pass untagged, next try in %g s "
                "(SIMHASH_INDEX_RETRY_AFTER): %s",
                self.name, self.retry_after, exc,
            )  # fmt: skip
        else:
            logger.warning(
                "simhash: the %s index is still unavailable; next try in %g s", self.name, self.retry_after
            )

    def _recovered(self) -> None:
        with self._lock:
            since, self._open_since, self._probing = self._open_since, None, False
            passed, self._passed = self._passed, 0
        if since is not None:
            logger.info(
                "simhash: the %s index is back after %.1f s; tagging resumes (%d page(s) passed untagged)",
                self.name, self._clock() - since, passed,
            )  # fmt: skip

    def _lose(self, exc: IndexLostError) -> None:
        with self._lock:
            first, self.lost, self._probing = self.lost is None, exc, False
        if first:
            logger.error("simhash: %s; from now on pages pass untagged", exc)
