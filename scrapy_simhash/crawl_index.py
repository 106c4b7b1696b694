"""Opening the near-duplicate index for a crawl: location, reset, errors.

Shared by the downloader middleware (pages) and the item pipeline (item
texts), which keep separate indexes so that an item never matches the page it
came from.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .defaults import MODE
from .index import NearDuplicateIndex, SimhashIndexError, is_server_uri, open_index

logger = logging.getLogger(__name__)

CRAWL_REDIS_OPTIONS = {"timeout": "1", "retry_budget": "1"}
"""How long a crawl's Redis call may fail before it gives up: about a second (socket and connect
timeouts of 1 s, retries only within a 1 s budget), where a batch job retries for about 12 s. A crawl
does not need the client to ride out an outage: its circuit breaker (:mod:`.index_guard`) passes
pages untagged at once and tries again later, so every second the client spends retrying is a
second in which no page reaches the spider. Options the URI names itself win."""


def default_location(spider_name: str, suffix: str = "") -> str:
    """Per-spider directory under Scrapy's data path (``.scrapy/simhash/<spider>``).

    A second run of the same spider reopens it and sees the first run's pages.
    """
    from scrapy.utils.project import data_path

    return data_path(f"simhash/{spider_name}{suffix}", createdir=False)


def derived_location(location: str, suffix: str) -> str:
    """A sibling index: ``<dir><suffix>``, or the Redis prefix with ``suffix`` appended."""
    if not is_server_uri(location):
        return location.rstrip("/") + suffix
    parts = urlsplit(location)
    query = dict(parse_qsl(parts.query))
    query["prefix"] = query.get("prefix", "simhash") + suffix
    return urlunsplit(parts._replace(query=urlencode(query)))


def open_crawl_index(
    location: str,
    k: int,
    *,
    reset: bool = False,
    sync: str = "normal",
    mode: str = MODE,
    similarity: float | None = None,
) -> NearDuplicateIndex:
    """Open (creating) the index at ``location``; with ``reset``, empty it first.

    ``mode`` and ``similarity`` choose the decision rule (``SIMHASH_MODE``, ``SIMHASH_SIMILARITY``):
    ``verified`` opens the simhash store with its sketch store; an index written before sketches
    existed opens too, and its pages are judged by simhash alone (distance <= ``k``).

    ``sync`` applies to the embedded index: ``"normal"`` keeps every acknowledged
    insert through a crash of the crawling process; ``"full"`` also through a power
    cut, at about 3.5 ms per page on an SSD, in the crawl's reactor thread.

    The reset of an embedded index happens under its write lock: an index another
    process is writing raises :class:`IndexLockedError` and loses nothing. Every failure
    is a :class:`SimhashIndexError` carrying the real reason, so that the crawl reports
    and counts it (an unexpected exception would escape the spider_opened handler).
    """
    try:
        return _open(location, k, reset, sync, {"mode": mode, "similarity": similarity})
    except SimhashIndexError:
        raise
    except Exception as exc:
        raise SimhashIndexError(f"cannot open the index at {location}: {type(exc).__name__}: {exc}") from exc


def with_crawl_options(uri: str) -> str:
    """``uri`` with :data:`CRAWL_REDIS_OPTIONS` added for the options it does not name."""
    parts = urlsplit(uri)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = {name for name, _ in query}
    query += [(name, value) for name, value in CRAWL_REDIS_OPTIONS.items() if name not in named]
    return urlunsplit(parts._replace(query=urlencode(query)))


def _open(location: str, k: int, reset: bool, sync: str, rule: dict[str, Any]) -> NearDuplicateIndex:
    if is_server_uri(location):
        index = open_index(with_crawl_options(location), k=k, **rule)
        if reset:
            _clear(index, location)
        return index
    if reset:
        logger.info("SIMHASH_RESET: emptying the index at %s", location)
    Path(location).parent.mkdir(parents=True, exist_ok=True)
    return open_index(location, k=k, synchronous=sync, reset=reset, **rule)


def _clear(index: NearDuplicateIndex, location: str) -> None:
    """SIMHASH_RESET on a server index: every store it has (a verified index clears its sketches too)."""
    clear = getattr(index, "clear", None)
    if clear is None:
        index.close()
        raise ValueError(f"SIMHASH_RESET is not supported by the index at {location}")
    logger.info("SIMHASH_RESET: clearing the index at %s", location)
    clear()
