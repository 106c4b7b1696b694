"""Opening the near-duplicate index for a crawl: location, reset, errors.

Shared by the downloader middleware (pages) and the item pipeline (item
texts), which keep separate indexes so that an item never matches the page it
came from.

An index that cannot honour the crawl's settings (another ``SIMHASH_DISTANCE`` or
``SIMHASH_SIMILARITY`` than it was built with, a MinHash index) is a
:class:`~.settings.SimhashConfigError` saying which setting to change: retrying would not help,
so the crawl must not start. Every other failure (locked, damaged, unreachable) is a
:class:`SimhashIndexError`, which the crawl counts and survives.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from .defaults import MODE
from .index import LayoutError, NearDuplicateIndex, SimhashIndexError, is_server_uri, open_index, stored_kind
from .index.embedded.store_format import IndexFormatError
from .index.extractor_record import ExtractorMismatch, check_extractor, describe, notice
from .settings import SimhashConfigError
from .shown import shown_location

logger = logging.getLogger(__name__)

CRAWL_REDIS_OPTIONS = {"timeout": "1", "retry_budget": "1"}
"""How long a crawl's Redis call may fail before it gives up: about a second (socket and connect
timeouts of 1 s, retries only within a 1 s budget), where a batch job retries for about 12 s. A crawl
does not need the client to ride out an outage: its circuit breaker (:mod:`.index_guard`) passes
pages untagged at once and tries again later, so every second the client spends retrying is a
second in which no page reaches the spider. Options the URI names itself win."""


def default_location(spider_name: str, suffix: str = "") -> str:
    """Per-spider directory under Scrapy's data path (``.scrapy/simhash/<spider>``).

    A second run of the same spider reopens it and sees the first run's pages. Outside a Scrapy
    project (a script run where no ``scrapy.cfg`` can be found, which makes Scrapy's data path
    fail), it is ``.scrapy/simhash/<spider>`` under the working directory.
    """
    from scrapy.exceptions import NotConfigured
    from scrapy.utils.project import data_path

    name = f"simhash/{spider_name}{suffix}"
    try:
        return data_path(name, createdir=False)
    except NotConfigured:  # SCRAPY_SETTINGS_MODULE is set, but there is no scrapy.cfg to find
        return str(Path.cwd() / ".scrapy" / name)


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
    extractor: str | None = None,
    mix_extractors: bool = False,
) -> NearDuplicateIndex:
    """Open (creating) the index at ``location``; with ``reset``, empty it first.

    ``extractor``: the description of the crawl's extractor, checked against the one the index
    records (:mod:`.index.extractor_record`); another one refuses the crawl unless
    ``mix_extractors`` (``SIMHASH_EXTRACTOR_MIX``). None (the item index: item texts are not
    extracted) checks nothing.

    ``mode`` and ``similarity`` choose the decision rule (``SIMHASH_MODE``, ``SIMHASH_SIMILARITY``):
    ``verified`` opens the simhash store with its sketch store; pages stored without sketch (by a
    simhash-mode crawl) are judged by simhash alone (distance <= ``k``). An embedded index of an earlier
    on-disk format is a :class:`~.settings.SimhashConfigError` naming ``scrapy-simhash index upgrade``.

    ``sync`` applies to the embedded index: ``"normal"`` keeps every acknowledged
    insert through a crash of the crawling process; ``"full"`` also through a power
    cut, at about 3.5 ms per page on an SSD, in the crawl's reactor thread.

    The reset of an embedded index happens under its write lock: an index another
    process is writing raises :class:`IndexLockedError` and loses nothing. An index that cannot
    honour ``k``, ``similarity`` or ``reset`` raises :class:`~.settings.SimhashConfigError`, in the
    settings' terms; every other failure is a :class:`SimhashIndexError` carrying the real reason,
    so that the crawl reports and counts it.
    """
    shown = shown_location(location)
    if stored_kind(location) == "minhash":
        raise SimhashConfigError(
            f"SIMHASH_INDEX = {shown!r} holds a MinHash index (written by `scrapy-simhash dedupe "
            "--method minhash --index`), which a crawl cannot use: point SIMHASH_INDEX at another "
            "directory (or leave it unset for the spider's own)"
        )
    if not is_server_uri(location) and Path(location.removeprefix("file://")).is_file():
        raise SimhashConfigError(
            f"SIMHASH_INDEX = {shown!r} is a file, not an index directory: point SIMHASH_INDEX at a "
            "directory (it is created if missing), or leave it unset for the spider's own"
        )
    try:
        index = _open(location, k, reset, sync, {"mode": mode, "similarity": similarity})
    except ValueError as exc:  # LayoutError, IndexSettingsError: the index cannot do what is asked
        raise SimhashConfigError(_explain(exc, location, k, similarity)) from exc
    except SimhashIndexError:
        raise
    except Exception as exc:
        raise SimhashIndexError(f"cannot open the index at {shown}: {type(exc).__name__}: {exc}") from exc
    if extractor is not None:
        try:
            _check_extractor(index, location, extractor, mix_extractors)
        except BaseException:
            index.close()
            raise
    return index


def _check_extractor(index: NearDuplicateIndex, location: str, extractor: str, mix: bool) -> None:
    """The index records the crawl's extractor, or one it may be mixed with; else SimhashConfigError."""
    try:
        check = check_extractor(index, extractor, mix=mix)
    except ExtractorMismatch as exc:
        back = (
            f"SIMHASH_EXTRACTOR = {exc.other_name!r} (the index's extractor)"
            if exc.other_name
            else "the SIMHASH_EXTRACTOR settings back to the index's"
        )
        raise SimhashConfigError(
            f"the index at {shown_location(location)} stores pages fingerprinted by the extractor "
            f"{describe(exc.recorded, exc.before_records)}, and this crawl's is {exc.current} "
            f"({exc.differences}): their fingerprints are not comparable. Set {back}, re-fingerprint into a "
            "new index (point SIMHASH_INDEX at a new location, or crawl once with SIMHASH_RESET = True, "
            "which forgets the pages stored so far), "
            "or set SIMHASH_EXTRACTOR_MIX = True to store this crawl's pages beside them"
        ) from exc
    warning = notice(check, shown_location(location), "this crawl")
    if warning is not None:
        logger.warning("simhash: %s", warning)


_REBUILD = (
    "or build a new index: point SIMHASH_INDEX at a new location, or crawl once with "
    "SIMHASH_RESET = True (which forgets the pages stored so far)"
)


def _explain(exc: ValueError, location: str, k: int, similarity: float | None) -> str:
    """Why the index at ``location`` refused the crawl's settings, and what to set instead."""
    if isinstance(exc, IndexFormatError):  # it names the one command that converts the index
        return str(exc)
    built = _built_with(location)
    shown = shown_location(location)
    if isinstance(exc, LayoutError) and built is not None and built[0] < k:
        return (
            f"the index at {shown} was built with SIMHASH_DISTANCE = {built[0]} and cannot answer "
            f"SIMHASH_DISTANCE = {k} exactly: set SIMHASH_DISTANCE back to {built[0]} (or lower), {_REBUILD}"
        )
    stored_similarity = None if built is None else built[1]
    if stored_similarity is not None and similarity is not None and stored_similarity != similarity:
        return (
            f"the index at {shown} was built with SIMHASH_SIMILARITY = {stored_similarity:g}, not "
            f"{similarity:g}: set SIMHASH_SIMILARITY back to {stored_similarity:g}, {_REBUILD}"
        )
    return (
        f"the index at {shown} cannot be used with this crawl's settings (SIMHASH_DISTANCE = {k}, "
        f"SIMHASH_SIMILARITY = {similarity if similarity is None else format(similarity, 'g')}): {exc}"
    )


def _built_with(location: str) -> tuple[int, float | None] | None:
    """The distance and similarity the embedded index at ``location`` was built with (similarity None:
    it keeps no sketches); None when that cannot be read (a server index, or no index there)."""
    if is_server_uri(location):
        return None
    from .index.embedded.embedded import SimhashIndex
    from .index.embedded.sketch_column import column_params

    try:
        with SimhashIndex(location, read_only=True, verify=False) as index:
            params = column_params(index)
            return index.k, None if params is None else float(params["threshold"])
    except Exception:  # only the message is at stake: it falls back to the index's own words
        return None


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
        logger.info("SIMHASH_RESET: emptying the index at %s", shown_location(location))
    Path(location).parent.mkdir(parents=True, exist_ok=True)
    return open_index(location, k=k, synchronous=sync, reset=reset, **rule)


def _clear(index: NearDuplicateIndex, location: str) -> None:
    """SIMHASH_RESET on a server index: every store it has (a verified index clears its sketches too)."""
    clear = getattr(index, "clear", None)
    if clear is None:
        index.close()
        raise ValueError(f"SIMHASH_RESET is not supported by the index at {shown_location(location)}")
    logger.info("SIMHASH_RESET: clearing the index at %s", shown_location(location))
    clear()
