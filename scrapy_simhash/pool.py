"""Fingerprinting in worker processes, so extraction never blocks the crawl.

trafilatura is CPU-bound and not thread-safe (adbar/trafilatura#925), so pages
are fingerprinted in a process pool. A worker that crashes or hangs costs its
page only: the pool is replaced, the other pages that were in flight are
retried once on the new pool, and the failed page is reported as
``worker_crash`` or ``timeout``.
"""

from __future__ import annotations

import logging
import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, succeed

from .extract import Extractor
from .page import PageFingerprint, fingerprint_page

logger = logging.getLogger(__name__)

FingerprintFunction = Callable[..., PageFingerprint]

# Set in each worker by _init_worker: sent once, not with every page.
_worker_function: FingerprintFunction = fingerprint_page
_worker_options: dict[str, Any] = {}


def _init_worker(function: FingerprintFunction, options: dict[str, Any]) -> None:
    global _worker_function, _worker_options
    _worker_function, _worker_options = function, options
    # Pay the one-time costs (imports, the tokeniser's class table) before the first page.
    _worker_function(b"<html><body><p>warm up</p></body></html>", None, None, **_worker_options)


def _run_in_worker(body: bytes, url: str | None, encoding: str | None) -> PageFingerprint:
    return _worker_function(body, url, encoding, **_worker_options)


@dataclass
class _Task:
    body: bytes
    url: str | None
    encoding: str | None
    deferred: Deferred
    attempts: int = 0
    timer: Any = None


class FingerprintPool:
    """Fingerprints pages in ``workers`` processes (0: inline, in the calling thread)."""

    def __init__(
        self,
        workers: int,
        *,
        extractor: Extractor,
        min_tokens: int,
        timeout: float,
        function: FingerprintFunction = fingerprint_page,
        reactor: Any = None,
    ) -> None:
        self.workers = workers
        self.timeout = timeout
        self.function = function
        self.options = {"extractor": extractor, "min_tokens": min_tokens}
        self.crashes = 0
        self.timeouts = 0
        self._generation = 0
        self._executor: ProcessPoolExecutor | None = None
        if reactor is None:
            from twisted.internet import reactor
        self._reactor = reactor
        if workers > 0:
            self._executor = self._new_executor()

    def _new_executor(self) -> ProcessPoolExecutor:
        # fork would copy the reactor's threads and sockets into the workers.
        method = "forkserver" if sys.platform.startswith("linux") else "spawn"
        return ProcessPoolExecutor(
            max_workers=self.workers,
            mp_context=multiprocessing.get_context(method),
            initializer=_init_worker,
            initargs=(self.function, self.options),
        )

    def submit(self, body: bytes, url: str | None = None, encoding: str | None = None) -> Deferred:
        """A Deferred that fires with the page's :class:`PageFingerprint` (never errbacks)."""
        if self._executor is None:
            return succeed(self.function(body, url, encoding, **self.options))
        task = _Task(body, url, encoding, Deferred())
        self._start(task)
        return task.deferred

    def _start(self, task: _Task) -> None:
        assert self._executor is not None
        task.attempts += 1
        generation = self._generation
        try:
            future = self._executor.submit(_run_in_worker, task.body, task.url, task.encoding)
        except (BrokenProcessPool, RuntimeError):
            self._replace_executor(generation)
            if task.attempts < 2:
                self._start(task)
            else:
                task.deferred.callback(PageFingerprint(None, 0, "worker_crash"))
            return
        task.timer = self._reactor.callLater(self.timeout, self._on_timeout, task, future, generation)
        future.add_done_callback(lambda f: self._reactor.callFromThread(self._on_done, task, f, generation))

    def _on_done(self, task: _Task, future: Future, generation: int) -> None:
        if task.deferred.called:  # already answered by the timeout
            return
        if task.timer is not None and task.timer.active():
            task.timer.cancel()
        try:
            result = future.result()
        except (BrokenProcessPool, CancelledError):  # cancelled: its pool was replaced
            self._replace_executor(generation)
            if task.attempts < 2:
                # Most likely another page crashed the pool; give this one another chance.
                self._start(task)
                return
            self.crashes += 1
            logger.warning("A fingerprint worker died while processing %s", task.url)
            result = PageFingerprint(None, 0, "worker_crash")
        except Exception as exc:  # a bug in a custom function must not stop the crawl
            logger.error("Fingerprinting %s failed: %r", task.url, exc)
            result = PageFingerprint(None, 0, "worker_error")
        task.deferred.callback(result)

    def _on_timeout(self, task: _Task, future: Future, generation: int) -> None:
        if task.deferred.called or future.done():
            return
        self.timeouts += 1
        logger.warning(
            "Fingerprinting %s took more than %.1f s; its worker is replaced", task.url, self.timeout
        )
        task.deferred.callback(PageFingerprint(None, 0, "timeout"))
        # The hung worker cannot be interrupted alone; replace the pool.
        self._replace_executor(generation)

    def _replace_executor(self, generation: int) -> None:
        if generation != self._generation or self._executor is None:
            return  # already replaced by another failure of the same pool
        self._generation += 1
        old, self._executor = self._executor, self._new_executor()
        _kill(old)

    def close(self) -> None:
        """Stop the workers; pages still in flight are abandoned."""
        if self._executor is not None:
            _kill(self._executor)
            self._executor = None


def _kill(executor: ProcessPoolExecutor) -> None:
    # ProcessPoolExecutor has no public way to kill a hung worker.
    processes = list(getattr(executor, "_processes", {}).values())
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        if process.is_alive():
            process.kill()
