"""Where a verified index's sketch store lives beside its simhash store, and how it is opened.

Embedded: the directory ``sketches/`` inside the index directory. Redis: the namespace
``<prefix>-sketches`` on the same server (its own hash tag, so on Redis Cluster the two stores
may sit in two slots: see :mod:`.redis_verified`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..decision import Rule

SKETCHES = "sketches"
"""The sketch store's directory inside an embedded index."""
SKETCH_PREFIX_SUFFIX = "-sketches"
"""Appended to a Redis index's prefix for its sketch store."""


def open_sketch_store(location: str, rule: Rule, *, read_only: bool = False, **options: Any) -> Any | None:
    """The sketch store of the index at ``location`` (a directory or a ``redis://`` URI).

    Created with the rule's ``value_bits``; a store that exists keeps the width it was written with
    (an index from before 8-bit values keeps 32): the caller applies the rule at the store's width."""
    from . import is_server_uri

    settings = {
        "threshold": rule.similarity,
        "bands": rule.bands,
        "rows": rule.rows,
        "new_value_bits": rule.value_bits,
    }
    if is_server_uri(location):
        options.pop("read_only", None)
        from .redis_minhash import RedisMinHashIndex

        return RedisMinHashIndex.from_uri(_sketch_uri(location), **settings, **options)
    from .minhash_store import DATABASE, MinHashIndex

    path = Path(location) / SKETCHES
    if read_only and not (path / DATABASE).exists():
        return None  # an index written before sketches: every stored page is judged by simhash
    return MinHashIndex(path, read_only=read_only, **settings, **options)


def open_existing_sketch_store(location: str, simhashes: Any, **options: Any) -> Any | None:
    """The sketch store beside the simhash store ``simhashes`` opened at ``location``, with its stored
    settings, or None when there is none (nothing is created)."""
    from . import is_server_uri

    reset = bool(options.pop("reset", False))
    if is_server_uri(location):
        from .redis_minhash import RedisMinHashIndex

        script = simhashes._redis  # the simhash store's connection: one EXISTS, no namespace created
        config = f"simhash:{{{simhashes.prefix}{SKETCH_PREFIX_SUFFIX}}}:config"
        if not script.call(lambda: script.client.exists(config), "looking for the sketch store"):
            return None

        def opening(**extra: Any) -> Any:
            return RedisMinHashIndex.from_uri(_sketch_uri(location), **options, **extra)
    else:
        from .minhash_store import DATABASE, MinHashIndex

        path = Path(location) / SKETCHES
        if not (path / DATABASE).exists():
            return None

        def opening(**extra: Any) -> Any:
            return MinHashIndex(path, **options, **extra)

    store = opening()
    if not reset:
        return store
    settings = {
        "threshold": store.threshold,
        "bands": store.bands,
        "rows": store.rows,
        "value_bits": store.value_bits,
    }
    store.close()  # emptied with the settings it had, as the simhash store keeps its k
    return opening(reset=True, num_values=store.num_values, **settings)


def _sketch_uri(location: str) -> str:
    """The Redis URI of the sketch store of the index at ``location``: its prefix + ``-sketches``."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    parts = urlsplit(location)
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    query["prefix"] = query.get("prefix", "simhash") + SKETCH_PREFIX_SUFFIX
    for name in ("layout", "tables", "retention"):
        query.pop(name, None)
    return urlunsplit(parts._replace(query=urlencode(query)))
