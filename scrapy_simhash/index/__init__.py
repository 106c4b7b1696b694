"""Near-duplicate indexes: one interface (:class:`NearDuplicateIndex`), several backends.

- :class:`SimhashIndex`: embedded, persistent, no server (Manku permuted tables,
  in-memory trees plus memory-mapped sorted arrays).
- Redis: ``open_index("redis://host:port/db?prefix=crawl1")`` for crawls spread
  over several processes or machines.
- :func:`find_all` / :func:`clusters`: batch mode over a numpy array, without an index.
- :class:`MinHashIndex`: MinHash-LSH, embedded, persistent and crash-safe like SimhashIndex
  (``open_index(path, kind="minhash")``); in Redis: ``open_index("redis://...", kind="minhash")``;
- :class:`MinHashLSH`: MinHash sketches by Jaccard threshold, in memory;
  :func:`minhash_pairs` / :func:`minhash_clusters`: its batch mode over a sketch array.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, overload

from .base import (
    IndexCorruptError,
    IndexLockedError,
    IndexLostError,
    IndexUnavailableError,
    LayoutError,
    Match,
    Meta,
    NearDuplicateIndex,
    SimhashIndexError,
)

if TYPE_CHECKING:
    from .embedded.minhash_store import MinHashIndex

SERVER_SCHEMES = ("redis://", "rediss://", "unix://")
SERVER_CONNECTION_OPTIONS = ("retries", "retry_cap", "retry_budget", "timeout")
"""Keyword options of a Redis index that its sketch store shares (its connection's)."""


def is_server_uri(location: str | Path) -> bool:
    """True for the URI of an index server (Redis), False for a directory path."""
    return str(location).startswith(SERVER_SCHEMES)


def stored_kind(location: str | Path) -> str | None:
    """``"simhash"`` or ``"minhash"``: the kind of index the directory ``location`` holds, so that a
    caller can say which option opens it. None: nothing there yet, or a server URI (its kind is known
    only once connected)."""
    if is_server_uri(location):
        return None
    from .embedded.embedded import DATABASE as SIMHASH_DATABASE
    from .embedded.minhash_store import DATABASE as MINHASH_DATABASE

    directory = Path(str(location).removeprefix("file://"))
    if (directory / MINHASH_DATABASE).exists():
        return "minhash"
    if (directory / SIMHASH_DATABASE).exists():
        return "simhash"
    return None


@overload
def open_index(
    location: str | Path, k: int = 3, *, kind: Literal["simhash"] | None = None, **options: Any
) -> NearDuplicateIndex: ...
@overload
def open_index(
    location: str | Path, k: int = 3, *, kind: Literal["minhash"], **options: Any
) -> MinHashIndex: ...
def open_index(
    location: str | Path,
    k: int = 3,
    *,
    kind: str | None = None,
    mode: str = "verified",
    similarity: float | None = None,
    **options: Any,
) -> NearDuplicateIndex | MinHashIndex:
    """Open the index at ``location``: a directory path, or a ``redis://`` URI.

    ``kind="minhash"`` opens a :class:`~.minhash_store.MinHashIndex` (a directory) or, for a
    ``redis://`` URI, a :class:`~.redis_minhash.RedisMinHashIndex` with the same API and answers
    (``k`` is ignored, ``options`` go to it). The kind is never guessed: a MinHash index's directory
    opened as a simhash index is an error naming the right call.

    ``mode`` (simhash kind only): ``"verified"`` (the default) returns a
    :class:`~.verified.VerifiedIndex`: the simhash index plus its sketch store, answering by
    :data:`scrapy_simhash.decision.DEFAULT_RULE` (``similarity`` overrides its threshold); pages
    added without a sketch are judged by simhash alone, as before. ``"simhash"`` returns the
    simhash index alone (distance <= k; sketches are not stored); on a directory that holds
    sketches, a :class:`~.simhash_mode.SimhashModeIndex`, with the same answers, under which a
    page replaced or removed loses its sketch (a later verified opening never judges a page by a
    sketch of its old content).
    """
    if mode not in ("verified", "simhash"):
        raise ValueError(f"mode must be 'verified' or 'simhash', not {mode!r}")
    if mode == "verified" and kind in (None, "simhash"):
        return _open_verified(location, k, similarity, options)
    index = _open_store(location, k, kind, options)
    if kind in (None, "simhash") and not options.get("read_only"):
        return _keeping_sketches_true(index, location, options)
    return index


def _open_store(location: str | Path, k: int, kind: str | None, options: dict[str, Any]) -> Any:
    """The simhash index (or, ``kind="minhash"``, the MinHash index) at ``location``, alone."""
    if kind not in (None, "simhash", "minhash"):
        raise ValueError(f"kind must be 'simhash' or 'minhash', not {kind!r}")
    text = str(location)
    if kind == "minhash":
        if is_server_uri(text):
            from .redis.redis_minhash import RedisMinHashIndex

            return RedisMinHashIndex.from_uri(text, **options)
        from .embedded.minhash_store import MinHashIndex

        return MinHashIndex(text.removeprefix("file://"), **options)
    if is_server_uri(text):
        from .redis.redis_store import RedisIndex

        return RedisIndex.from_uri(text, k=k, **options)
    if text.startswith("file://"):
        text = text[len("file://") :]
    from .embedded.minhash_store import IndexSettingsError

    if stored_kind(text) == "minhash":
        raise IndexSettingsError(
            f"{text} holds a MinHash index: open it with open_index(..., kind='minhash')"
        )
    from .embedded.embedded import SimhashIndex

    return SimhashIndex(text, k=k, **options)


def _open_verified(location: str | Path, k: int, similarity: float | None, options: dict[str, Any]) -> Any:
    import dataclasses

    from ..decision import DEFAULT_RULE
    from .embedded.sketch_column import SketchColumn
    from .verified.sketch_stores import open_sketch_store
    from .verified.verified import VerifiedIndex
    from .verified.verified_embedded import EmbeddedVerifiedIndex

    rule = DEFAULT_RULE if similarity is None else dataclasses.replace(DEFAULT_RULE, similarity=similarity)
    simhashes = _open_store(location, k, None, options)
    rule = dataclasses.replace(rule, distance=simhashes.k)  # k=None: the stored index's own k
    text = str(location).removeprefix("file://")
    names: tuple[str, ...] = ("read_only", "reset", "synchronous", "verify")
    if is_server_uri(text):
        names = SERVER_CONNECTION_OPTIONS
    shared = {name: options[name] for name in names if name in options}
    try:
        sketches = open_sketch_store(text, rule, simhashes, **shared)
        if sketches is not None and sketches.value_bits != rule.value_bits:  # a Redis store of 32-bit values
            rule = dataclasses.replace(rule, value_bits=sketches.value_bits)
        if isinstance(sketches, SketchColumn):
            return EmbeddedVerifiedIndex(simhashes, sketches, rule)
        return VerifiedIndex(simhashes, sketches, rule)
    except BaseException:  # the write lock is not kept by an index that failed to open
        simhashes.close()
        raise


def _keeping_sketches_true(simhashes: Any, location: str | Path, options: dict[str, Any]) -> Any:
    """Simhash mode on an index that holds sketches: a :class:`~.simhash_mode.SimhashModeIndex`,
    so that pages rewritten here do not keep a sketch of their old content."""
    import dataclasses

    from ..decision import DEFAULT_RULE
    from .verified.simhash_mode import SimhashModeIndex
    from .verified.sketch_stores import open_existing_sketch_store

    text = str(location).removeprefix("file://")
    names = SERVER_CONNECTION_OPTIONS if is_server_uri(text) else ("reset", "synchronous", "verify")
    shared = {name: options[name] for name in names if name in options}
    try:  # the stored threshold, bands and rows, whatever they are: only removals happen here
        sketches = open_existing_sketch_store(text, simhashes, **shared)
    except BaseException:
        simhashes.close()
        raise
    if sketches is None and not is_server_uri(text):  # embedded: are there sketches in the rows?
        from .embedded.sketch_column import column_params

        have = column_params(simhashes)
        if have is not None:  # writes through SimhashModeIndex: a rewritten row loses its sketch
            rule = dataclasses.replace(DEFAULT_RULE, distance=simhashes.k, value_bits=have["value_bits"])
            return SimhashModeIndex(simhashes, None, rule)
    if sketches is None:
        return simhashes
    rule = dataclasses.replace(DEFAULT_RULE, distance=simhashes.k, value_bits=sketches.value_bits)
    return SimhashModeIndex(simhashes, sketches, rule)


def __getattr__(name: str) -> Any:
    # Imported on demand so that a backend's dependencies load only when used.
    if name == "SimhashIndex":
        from .embedded.embedded import SimhashIndex

        return SimhashIndex
    if name in ("find_all", "clusters"):
        from .tables import batch

        return getattr(batch, name)
    if name in ("MinHashIndex", "LSHMatch", "IndexSettingsError"):
        from .embedded import minhash_store

        return getattr(minhash_store, name)
    if name == "MinHashLSH":
        from .lsh.lsh import MinHashLSH

        return MinHashLSH
    if name in ("minhash_pairs", "minhash_clusters"):
        from .lsh import minhash_batch

        return getattr(minhash_batch, name)
    raise AttributeError(f"module 'scrapy_simhash.index' has no attribute {name!r}")


__all__ = [
    "IndexCorruptError",
    "IndexLockedError",
    "IndexLostError",
    "IndexSettingsError",
    "IndexUnavailableError",
    "LSHMatch",
    "LayoutError",
    "Match",
    "Meta",
    "MinHashIndex",
    "MinHashLSH",
    "NearDuplicateIndex",
    "SimhashIndex",
    "SimhashIndexError",
    "clusters",
    "find_all",
    "is_server_uri",
    "minhash_clusters",
    "minhash_pairs",
    "open_index",
    "stored_kind",
]
