"""Fingerprinting in worker processes, so extraction never blocks the crawl.

trafilatura is CPU-bound and not thread-safe (adbar/trafilatura#925), so pages
are fingerprinted in a process pool. A worker that crashes or hangs costs its
own page only:

- a page that runs past the timeout is answered ``timeout`` and its pool is
  replaced; the other pages that were in flight there start again;
- when a worker dies, the pool cannot tell which page killed it, so every page
  that was in flight is re-run alone in a one-worker *isolation* pool: the page
  that crashes there is the culprit (``worker_crash``), the others succeed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import signal
from collections import deque
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, succeed

from .canonical import canonical_url
from .extract import Extractor
from .page import PageFingerprint, fingerprint_page
from .workers import (
    SCRIPT_RERUN_MESSAGE,
    exit_with_parent,
    needs_main,
    unguarded_main_script,
    worker_context,
)

logger = logging.getLogger(__name__)

FingerprintFunction = Callable[..., PageFingerprint]

# Set in each worker by _init_worker: sent once, not with every page.
_worker_function: FingerprintFunction = fingerprint_page
_worker_options: dict[str, Any] = {}


def _init_worker(function: FingerprintFunction, options: dict[str, Any]) -> None:
    global _worker_function, _worker_options
    exit_with_parent()
    _worker_function, _worker_options = function, options
    # Pay the one-time costs (imports, the tokeniser's class table) before the first page.
    fingerprint_page(b"<html><body><p>warm up</p></body></html>", None, None, **options)


def _run_in_worker(body: bytes, url: str | None, encoding: str | None) -> PageFingerprint:
    return _worker_function(body, url, encoding, **_worker_options)


def with_canonical(
    page: PageFingerprint, body: bytes, url: str | None, encoding: str | None
) -> PageFingerprint:
    """``page`` with the canonical URL ``body`` declares (read from the head: no second parse), when it
    has a fingerprint; pages without one are never compared, so their head is not read."""
    if page.simhash is None or page.canonical is not None:
        return page
    canonical = canonical_url(body, url, encoding)
    return page if canonical is None else dataclasses.replace(page, canonical=canonical)


def _run_in_worker_with_canonical(body: bytes, url: str | None, encoding: str | None) -> PageFingerprint:
    return with_canonical(_run_in_worker(body, url, encoding), body, url, encoding)


@dataclass(eq=False)
class _Task:
    body: bytes
    url: str | None
    encoding: str | None
    deferred: Deferred = field(default_factory=Deferred)
    timer: Any = None


def _ready() -> int:
    return os.getpid()


class _Workers:
    """One ProcessPoolExecutor, its queue and the tasks in flight on it; replaced, never repaired.

    At most ``PREFETCH`` tasks per worker are in the executor at once, so a task's
    timeout measures its own run plus at most one short wait, not a long queue;
    and none is sent before every worker has started (imports and warm-up are not
    charged to a page).
    """

    def __init__(
        self, size: int, function: FingerprintFunction, options: dict[str, Any], *, isolation: bool = False
    ) -> None:
        self.size = size
        self.executor = ProcessPoolExecutor(
            max_workers=size,
            # The workers import the crawl script only when the function or options live there.
            mp_context=worker_context(keep_main=needs_main(function, options)),
            initializer=_init_worker,
            initargs=(function, options),
        )
        self.pending: deque[_Task] = deque()
        self.in_flight: set[_Task] = set()
        self.ready = False
        self.killed_for_timeout = False
        self.isolation = isolation
        """Runs one suspect page at a time after a crash, to find the page that crashed."""

    def kill(self) -> None:
        # ProcessPoolExecutor has no public way to kill a hung worker: kill its processes by pid.
        pids = list(getattr(self.executor, "_processes", None) or {})
        self.executor.shutdown(wait=False, cancel_futures=True)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


class FingerprintPool:
    """Fingerprints pages in ``workers`` processes (0: inline, in the calling thread).

    Each answer is the worker's :class:`PageFingerprint` as pickled back, its minhash-doc/1 sketch
    included (``minhash=False``: computed without one), and with ``canonical=True`` the canonical URL
    the page declares (read in the worker from the bytes it already has).
    """

    PREFETCH = 2
    """Pages in flight per worker: the second one waits in the executor's queue, so a
    worker never idles while its last result travels back through the busy reactor.
    A waiting page's timeout runs while it waits, at most one page's run of the first
    worker to free up; only when every worker hangs can a waiting page time out wrongly."""

    def __init__(
        self,
        workers: int,
        *,
        extractor: Extractor,
        min_tokens: int,
        timeout: float,
        function: FingerprintFunction = fingerprint_page,
        reactor: Any = None,
        minhash: bool = True,
        canonical: bool = False,
    ) -> None:
        self.workers = workers
        # canonical: each fingerprinted page also carries the canonical URL it declares (SIMHASH_KEEP)
        self.canonical = canonical
        self._runner = _run_in_worker_with_canonical if canonical else _run_in_worker
        self.timeout = timeout
        self.function = function
        self.options: dict[str, Any] = {"extractor": extractor, "min_tokens": min_tokens}
        if not minhash:  # simhash mode pays nothing for sketches; the default (a sketch) is not passed,
            self.options["minhash"] = False  # so a replacement function written before sketches still runs
        if workers > 0 and needs_main(function, self.options) and (script := unguarded_main_script()):
            # The workers would have to import a script that re-runs itself: refuse, once.
            raise RuntimeError(SCRIPT_RERUN_MESSAGE.format(script=script))
        if reactor is None:
            from twisted.internet import reactor
        self._reactor = reactor
        self._closed = False
        self._main: _Workers | None = self._new(workers) if workers > 0 else None
        self._isolation: _Workers | None = None

    # -- pools -----------------------------------------------------------

    def _new(self, size: int, *, isolation: bool = False) -> _Workers:
        workers = _Workers(size, self.function, self.options, isolation=isolation)
        warmups = [workers.executor.submit(_ready) for _ in range(size)]
        remaining = [len(warmups)]

        def started(future: Future) -> None:
            remaining[0] -= 1
            if future.cancelled() or future.exception() is not None:
                self._replace(workers)
            elif remaining[0] == 0:
                workers.ready = True
                self._dispatch(workers)

        for future in warmups:
            future.add_done_callback(lambda f: self._reactor.callFromThread(started, f))
        return workers

    def _replace(self, workers: _Workers) -> None:
        """Swap a broken or hung pool for a fresh one (once per pool)."""
        if self._closed:
            return
        if workers is self._main:
            self._main = self._new(self.workers)
            self._main.pending.extend(workers.pending)
        elif workers is self._isolation:
            self._isolation = None
            if workers.pending:
                self._isolated().pending.extend(workers.pending)
        else:
            return
        workers.pending.clear()
        workers.kill()

    def _isolated(self) -> _Workers:
        if self._isolation is None:
            self._isolation = self._new(1, isolation=True)
        return self._isolation

    # -- tasks -----------------------------------------------------------

    def submit(self, body: bytes, url: str | None = None, encoding: str | None = None) -> Deferred:
        """A Deferred that fires with the page's :class:`PageFingerprint` (never errbacks)."""
        if self._main is None:
            if self._closed:
                return succeed(PageFingerprint(None, 0, "worker_error"))
            page = self.function(body, url, encoding, **self.options)
            return succeed(with_canonical(page, body, url, encoding) if self.canonical else page)
        task = _Task(body, url, encoding)
        self._main.pending.append(task)
        self._dispatch(self._main)
        return task.deferred

    def _dispatch(self, workers: _Workers) -> None:
        # The isolation pool runs one page at a time: that is how it finds the culprit.
        depth = workers.size * (1 if workers.isolation else self.PREFETCH)
        while workers.ready and workers.pending and len(workers.in_flight) < depth:
            task = workers.pending.popleft()
            try:
                future = workers.executor.submit(self._runner, task.body, task.url, task.encoding)
            except (BrokenProcessPool, RuntimeError):  # broke between two of our callbacks
                workers.pending.appendleft(task)
                self._replace(workers)
                return
            workers.in_flight.add(task)
            task.timer = self._reactor.callLater(self.timeout, self._on_timeout, task, workers)
            future.add_done_callback(functools.partial(self._done_in_thread, task, workers))

    def _done_in_thread(self, task: _Task, workers: _Workers, future: Future) -> None:
        """A worker's future is done (in the executor's thread): hand it to the reactor."""
        self._reactor.callFromThread(self._on_done, task, workers, future)

    def _on_done(self, task: _Task, workers: _Workers, future: Future) -> None:
        workers.in_flight.discard(task)
        if task.timer is not None and task.timer.active():
            task.timer.cancel()
        if task.deferred.called:  # answered by its timeout already
            return
        try:
            result = future.result()
        except (BrokenProcessPool, CancelledError):
            isolated = workers.isolation
            self._replace(workers)
            if self._closed:
                task.deferred.callback(PageFingerprint(None, 0, "worker_error"))
            elif workers.killed_for_timeout and not isolated:  # another page hung: not this one's fault
                assert self._main is not None
                self._main.pending.appendleft(task)
                self._dispatch(self._main)
            elif isolated:  # it ran alone, so it killed its worker
                logger.warning("A fingerprint worker died while processing %s", task.url)
                task.deferred.callback(PageFingerprint(None, 0, "worker_crash"))
            else:  # one of the pages in flight killed the pool: re-run each alone
                isolation = self._isolated()
                isolation.pending.append(task)
                self._dispatch(isolation)
            return
        except Exception as exc:  # a bug in a custom function must not stop the crawl
            logger.error("Fingerprinting %s failed: %r", task.url, exc)
            result = PageFingerprint(None, 0, "worker_error")
        task.deferred.callback(result)
        self._dispatch(workers)

    def _on_timeout(self, task: _Task, workers: _Workers) -> None:
        if task.deferred.called:
            return
        logger.warning(
            "Fingerprinting %s took more than %.1f s; its worker is replaced", task.url, self.timeout
        )
        task.deferred.callback(PageFingerprint(None, 0, "timeout"))
        workers.killed_for_timeout = True
        self._replace(workers)

    def close(self) -> None:
        """Stop the workers; pages still waiting are answered ``worker_error``."""
        self._closed = True
        for workers in (self._main, self._isolation):
            if workers is None:
                continue
            for task in [*workers.pending, *workers.in_flight]:
                if not task.deferred.called:
                    task.deferred.callback(PageFingerprint(None, 0, "worker_error"))
            workers.kill()
        self._main = self._isolation = None
