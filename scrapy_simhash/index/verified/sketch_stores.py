"""Where a verified index's sketch store lives beside its simhash store, and how it is opened.

Embedded: a column of the simhash store's rows (:mod:`.sketch_column`). Redis: the namespace
``<prefix>-sketches`` on the same server (its own hash tag, so on Redis Cluster the two stores
may sit in two slots: see :mod:`.redis_verified`).
"""

from __future__ import annotations

from typing import Any

from ...decision import Rule

SKETCH_PREFIX_SUFFIX = "-sketches"
"""Appended to a Redis index's prefix for its sketch store."""


def open_sketch_store(location: str, rule: Rule, simhashes: Any, **options: Any) -> Any | None:
    """The sketches of the index at ``location`` (a directory or a ``redis://`` URI) whose simhash
    store ``simhashes`` is open: on Redis the sketch store, embedded the sketch column of the simhash
    store's rows (:mod:`.sketch_column`, always 8-bit values).

    A Redis store is created with the rule's ``value_bits``; one that exists keeps the width it was
    written with: the caller applies the rule at its width. None for a reader of an embedded index
    that has never held a sketch."""
    from .. import is_server_uri

    given = {"threshold": rule.similarity, "bands": rule.bands, "rows": rule.rows}
    if is_server_uri(location):
        options.pop("read_only", None)
        from ..redis.redis_minhash import RedisMinHashIndex

        return RedisMinHashIndex.from_uri(
            _sketch_uri(location), **given, new_value_bits=rule.value_bits, **options
        )
    from ..embedded.sketch_column import open_column

    return open_column(simhashes, given)


def open_existing_sketch_store(location: str, simhashes: Any, **options: Any) -> Any | None:
    """The sketch store beside the simhash store ``simhashes`` opened at ``location``, with its stored
    settings, or None when there is none (nothing is created). Embedded: always None (the sketches
    are in the pages' rows, which the simhash store rewrites without sketch)."""
    from .. import is_server_uri

    reset = bool(options.pop("reset", False))
    if not is_server_uri(location):
        return None
    from ..redis.redis_minhash import RedisMinHashIndex

    script = simhashes._redis  # the simhash store's connection: one EXISTS, no namespace created
    config = f"simhash:{{{simhashes.prefix}{SKETCH_PREFIX_SUFFIX}}}:config"
    if not script.call(lambda: script.client.exists(config), "looking for the sketch store"):
        return None

    def opening(**extra: Any) -> Any:
        return RedisMinHashIndex.from_uri(_sketch_uri(location), **options, **extra)

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
