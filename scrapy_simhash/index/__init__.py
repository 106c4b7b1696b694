"""Near-duplicate indexes: one interface (:class:`NearDuplicateIndex`), several backends.

- :class:`SimhashIndex`: embedded, persistent, no server (Manku permuted tables,
  in-memory trees plus memory-mapped sorted arrays).
- Redis: ``open_index("redis://host:port/db?prefix=crawl1")`` for crawls spread
  over several processes or machines.
- :func:`find_all` / :func:`clusters`: batch mode over a numpy array, without an index.
- :class:`MinHashLSH`: MinHash sketches by Jaccard threshold, in memory;
  :func:`minhash_pairs` / :func:`minhash_clusters`: its batch mode over a sketch array.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

SERVER_SCHEMES = ("redis://", "rediss://", "unix://")


def is_server_uri(location: str | Path) -> bool:
    """True for the URI of an index server (Redis), False for a directory path."""
    return str(location).startswith(SERVER_SCHEMES)


def open_index(location: str | Path, k: int = 3, **options: Any) -> NearDuplicateIndex:
    """Open the index at ``location``: a directory path, or a ``redis://`` URI."""
    text = str(location)
    if is_server_uri(text):
        from .redis_store import RedisIndex

        return RedisIndex.from_uri(text, k=k, **options)
    if text.startswith("file://"):
        text = text[len("file://") :]
    from .embedded import SimhashIndex

    return SimhashIndex(text, k=k, **options)


def __getattr__(name: str) -> Any:
    # Imported on demand so that a backend's dependencies load only when used.
    if name == "SimhashIndex":
        from .embedded import SimhashIndex

        return SimhashIndex
    if name in ("find_all", "clusters"):
        from . import batch

        return getattr(batch, name)
    if name == "MinHashLSH":
        from .lsh import MinHashLSH

        return MinHashLSH
    if name in ("minhash_pairs", "minhash_clusters"):
        from . import minhash_batch

        return getattr(minhash_batch, name)
    raise AttributeError(f"module 'scrapy_simhash.index' has no attribute {name!r}")


__all__ = [
    "IndexCorruptError",
    "IndexLockedError",
    "IndexLostError",
    "IndexUnavailableError",
    "LayoutError",
    "Match",
    "Meta",
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
]
