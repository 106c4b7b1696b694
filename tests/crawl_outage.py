"""Test-only downloader middleware: a Redis outage in the middle of a crawl, and a reactor heartbeat.

Installed below SimhashMiddleware (priority < 543), so it sees each response after scrapy-simhash
tagged it (or passed it untagged). Settings:

- ``OUTAGE_REDIS_DIR`` / ``OUTAGE_REDIS_PORT``: the redis-server the crawl's index lives on;
- ``OUTAGE_STOP_AFTER``: stop that server after this many tagged pages;
- ``OUTAGE_RESTART_AFTER``: start it again (same data directory) after this many pages passed
  untagged because of the index (0: at once);
- ``OUTAGE_RESTART_EMPTY``: restart it without persistence, so it comes back without the index;
- ``OUTAGE_START_DOWN``: the server is not running when the crawl starts (started after
  ``OUTAGE_RESTART_AFTER`` untagged pages).

Counts, not clocks, decide when, and what is measured is counted, not timed: the heartbeat (a
LoopingCall every 50 ms) counts its ticks, and each pause of the index client between two retries of
one call (its "retry N/M" warnings, N >= 2) is counted with whether the reactor ticked during it. A
reactor blocked by the retrying call would tick in none of them. The one clock:
``outage/max_page_gap_ms_while_down`` is the longest wait between two responses handed on towards the
spider from the stop until the server is back: pages held back behind an index call that retries show
as a long gap. Results land in the crawl's stats under ``outage/``.

``outage/tagged_after_restart`` counts the tagged pages that were downloaded after the old server had
stopped: only the restarted server can have answered their lookups. A page downloaded before the stop may
have been looked up (and stored) by the old server just before it went, and reach the drill only after
the restart (its index call ends with a write beside the index that waits for the restarted server, or the
reactor is slow to hand it on); when tagged, it is counted in ``outage/tagged_fetched_before_stop``. (Had
the restarted server answered such a page's lookup, it would have stored it there too.)
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis_server import RedisServer
from scrapy import signals
from twisted.internet import task, threads

TICK = 0.05
UNTAGGED = ("index_error", "index_unavailable")
OUTAGE = ("stopping", "down", "restarting")  # from the stop request until the server is back
FETCHED_AFTER_STOP = "outage_fetched_after_stop"
"""request.meta: whether the old server had stopped when the response was downloaded."""
RETRYING_CLIENT = "scrapy_simhash.index.redis.redis_client"
"""The logger whose "retry N/M" warnings mark the pauses of a retrying index call."""


class OutageDrill:
    def __init__(self, crawler: Any) -> None:
        settings = crawler.settings
        self.stats = crawler.stats
        self.directory = Path(settings["OUTAGE_REDIS_DIR"])
        self.port = settings.getint("OUTAGE_REDIS_PORT")
        self.stop_after = settings.getint("OUTAGE_STOP_AFTER")
        self.restart_after = settings.getint("OUTAGE_RESTART_AFTER")
        self.restart_empty = settings.getbool("OUTAGE_RESTART_EMPTY")
        self.phase = "down" if settings.getbool("OUTAGE_START_DOWN") else "up"
        # up -> stopping -> down -> restarting -> back
        self.stopped = threading.Event()
        """Set once the old server has stopped answering (at once when the crawl starts with it down)."""
        if self.phase == "down":
            self.stopped.set()
        self.tagged = self.untagged = 0
        self.ticks = 0
        self._ticks_at_retry: dict[int, int] = {}
        """Per thread: the tick count when the index client last logged a retry there."""
        self.last_page: float | None = None
        self.heartbeat = task.LoopingCall(self._tick)
        self._retries = _RetryWatch(self)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)
        crawler.signals.connect(self.response_downloaded, signal=signals.response_downloaded)

    @classmethod
    def from_crawler(cls, crawler: Any) -> OutageDrill:
        return cls(crawler)

    def spider_opened(self, spider: Any) -> None:
        logging.getLogger(RETRYING_CLIENT).addHandler(self._retries)
        self.heartbeat.start(TICK)

    def spider_closed(self, spider: Any) -> None:
        logging.getLogger(RETRYING_CLIENT).removeHandler(self._retries)
        if self.heartbeat.running:
            self.heartbeat.stop()
        self.stats.set_value("outage/phase", self.phase)

    def _tick(self) -> None:
        self.ticks += 1
        if self.phase in OUTAGE:
            self.stats.inc_value("outage/ticks_while_down")

    def retry_logged(self, attempt: int) -> None:
        """The index client is about to pause before retry ``attempt`` of a call (in the call's thread)."""
        thread = threading.get_ident()
        before, self._ticks_at_retry[thread] = self._ticks_at_retry.get(thread), self.ticks
        if attempt >= 2 and before is not None:  # the pause before this call's previous retry is over
            self.stats.inc_value("outage/retry_pauses")
            if self.ticks > before:
                self.stats.inc_value("outage/retry_pauses_with_ticks")

    def response_downloaded(self, response: Any, request: Any, spider: Any = None) -> None:
        """Before any downloader middleware sees the response, so before scrapy-simhash looks it up."""
        request.meta[FETCHED_AFTER_STOP] = self.stopped.is_set()

    def process_response(self, request: Any, response: Any, spider: Any = None) -> Any:
        now = time.monotonic()
        if self.phase in OUTAGE and self.last_page is not None:
            self.stats.max_value("outage/max_page_gap_ms_while_down", round((now - self.last_page) * 1000))
        self.last_page = now
        tagged = "simhash" in request.meta
        if self.phase == "up" and tagged:
            self.tagged += 1
            if self.tagged >= self.stop_after:
                self.phase = "stopping"
                if self.restart_after == 0:
                    threads.deferToThread(self._stop_and_restart).addCallback(lambda _: self._set("back"))
                else:
                    threads.deferToThread(self._stop).addCallback(lambda _: self._set("down"))
        elif self.phase == "down" and request.meta.get("simhash_skipped") in UNTAGGED:
            self.untagged += 1
            self.stats.inc_value("outage/untagged_while_down")
            if self.untagged >= self.restart_after:
                self.phase = "restarting"
                threads.deferToThread(self._restart).addCallback(lambda _: self._set("back"))
        elif tagged and request.meta.get(FETCHED_AFTER_STOP):  # looked up after the old server was gone
            self.stats.inc_value("outage/tagged_after_restart")
        elif self.phase == "back":
            late = "outage/tagged_fetched_before_stop"  # the old server's answer, handed on late
            self.stats.inc_value(late if tagged else "outage/untagged_after_restart")
        return response

    def _set(self, phase: str) -> None:
        self.phase = phase

    def _stop(self) -> None:
        client = redis.Redis(host="127.0.0.1", port=self.port, retry=Retry(NoBackoff(), 0))
        try:
            client.shutdown(nosave=True)  # the AOF (appendfsync always) already holds every write
        except redis.ConnectionError:
            pass  # the server closed the connection: it has stopped (or was not running)
        finally:
            client.close()
        self.stopped.set()

    def _restart(self) -> None:
        RedisServer(self.directory, self.port).start(persistent=not self.restart_empty)

    def _stop_and_restart(self) -> None:
        self._stop()
        self._restart()


class _RetryWatch(logging.Handler):
    """Tells the drill of each retry the index client logs (``... retry N/M in S s``)."""

    def __init__(self, drill: OutageDrill) -> None:
        super().__init__(logging.WARNING)
        self.drill = drill

    def emit(self, record: logging.LogRecord) -> None:
        if "; retry %d/%d" in str(record.msg) and isinstance(record.args, tuple):
            self.drill.retry_logged(int(record.args[-3]))
