"""A store beside the index that a crawl can do without: opened late, paused after a failure.

The payload digests (revisit records) and the last captures (change kinds) live beside the
near-duplicate index. Neither may stop a crawl: when one fails (a damaged file, a Redis that is
down) the crawl goes on without the feature, the error is logged once, and the store is tried again
``retry_after`` seconds later. This is that policy, once, for both.

A store reopened after a failure stays in the namespace its predecessor worked in (a Redis store's
epoch, :class:`Bound`): a Redis namespace that was lost and created again by another crawler is not this
crawl's, so the crawl goes on without the feature rather than adopting it at the next try.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar, runtime_checkable


class Closable(Protocol):
    def clear(self) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class Bound(Protocol):
    """A store that works in one epoch of a shared namespace (None: not learned yet)."""

    epoch: str | None


S = TypeVar("S", bound=Closable)


class SideStore(Generic[S]):
    """Lazily opens a store with ``open_store`` (on first use, and again ``retry_after`` seconds after a
    failure; ``clock`` is injectable), empties it on first open when ``reset`` (``SIMHASH_RESET``), and
    says once what the crawl goes without while it is down.

    ``what`` names the store in messages ("payload digests"), ``without`` what the crawl does while it
    is down ("responses are written in full"), ``resumes`` what comes back ("revisits resume"),
    ``counted_in`` the stat that counts the failures; ``log`` is the feature's logger, so that its
    messages keep the feature's name."""

    def __init__(
        self,
        open_store: Callable[[], S],
        *,
        location: Callable[[], str],
        what: str,
        without: str,
        resumes: str,
        counted_in: str,
        log: logging.Logger,
        reset: bool = False,
        retry_after: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._open_store = open_store
        self._location = location
        self._what, self._without, self._resumes, self._counted_in = what, without, resumes, counted_in
        self._log = log
        self._reset = reset
        self.retry_after = retry_after
        self._clock = clock
        self.store: S | None = None
        """The store while it is open (None: not opened yet, or paused after a failure)."""
        self._down_until: float | None = None
        self._logged = False
        self._epoch: str | None = None
        """The epoch of the stores opened so far (:class:`Bound`), given to every store opened later."""

    def get(self) -> S | None:
        """The open store, opening it if due; None while paused after a failure. Raises what
        ``open_store`` raises (the caller counts it and calls :meth:`failed`)."""
        if self.store is not None:
            return self.store
        if self._down_until is not None and self._clock() < self._down_until:
            return None
        store = self._open_store()
        if self._epoch is not None and isinstance(store, Bound):
            store.epoch = self._epoch
        if self._reset:
            store.clear()
            self._reset = False
            self._log.info("SIMHASH_RESET: forgot the %s of %s", self._what, self._location())
        if self._down_until is not None:
            self._log.info(
                "simhash: the %s of %s work again; %s", self._what, self._location(), self._resumes
            )
        self.store, self._down_until = store, None
        return store

    def failed(self, exc: Exception) -> None:
        """Log ``exc`` (the first time only), close the store and pause before the next try."""
        if not self._logged:
            self._logged = True
            self._log.error(
                "simhash: cannot use the %s of %s, so %s until it works again; counted in %s: %s",
                self._what,
                self._location(),
                self._without,
                self._counted_in,
                exc,
            )
        if self.store is not None:
            if isinstance(self.store, Bound) and self.store.epoch is not None:
                self._epoch = self.store.epoch
            try:
                self.store.close()
            except Exception:  # closing a broken store: nothing more to learn from it
                self._log.debug("simhash: closing the %s failed", self._what, exc_info=True)
            self.store = None
        self._down_until = self._clock() + self.retry_after

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
