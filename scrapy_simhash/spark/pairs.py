"""Every near-duplicate pair of a fingerprint DataFrame: Manku's permuted tables as a distributed join.

Each fingerprint is emitted once per table of the layout (the same tables as the embedded
index, :mod:`scrapy_simhash.index.layouts`), keyed by ``(table, key bits)``. Records sharing a
key are candidates and are checked exactly (popcount of the XOR <= k). A pair is reported only
by the first table whose key it shares, so it comes out once however many tables find it,
without a global ``distinct``.

Skew: a key shared by more than ``max_group`` records (many identical fingerprints, a boiler-
plate page) is split into ``b`` blocks by a hash of the id; each record is sent to the ``b``
block pairs it belongs to, and each block pair is one group of at most ``2 * max_group``
records. Every pair of the big group is compared in exactly one block pair, and no executor
ever holds the whole group.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator
from functools import partial
from operator import add
from typing import Any

import numpy as np

from ..index.batch import popcount64
from ..index.layouts import Layout, resolve

MAX_GROUP = 10_000
"""Records per key above which a key's group is split into blocks."""
_CHUNK = 1 << 16
_MASK = (1 << 64) - 1

Member = tuple[Any, int, int]
"""(id, unsigned simhash, block)."""


def near_duplicates(
    df: Any,
    k: int = 3,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    layout: str | Layout | None = None,
    max_group: int = MAX_GROUP,
) -> Any:
    """DataFrame[a, b, distance]: every pair of distinct rows within Hamming distance ``k``, ``a < b``.

    ``simhash_col`` holds LongType fingerprints (the signed reading of the 64 bits, see
    :func:`~scrapy_simhash.spark.to_signed`); rows where it is null are left out. ``id_col``
    must be unique per row (any orderable type; ``a``/``b`` keep its type). Identical
    fingerprints (distance 0) and distance exactly ``k`` are included.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, StructField, StructType

    if max_group < 1:
        raise ValueError("max_group must be at least 1")
    table_layout = resolve(layout, k)
    spark = df.sparkSession
    id_type = df.schema[id_col].dataType
    rows = df.where(F.col(simhash_col).isNotNull()).select(id_col, simhash_col).rdd.map(tuple)
    keyed = rows.mapPartitions(partial(_emit, table_layout))
    sizes = keyed.map(lambda kv: (kv[0], 1)).reduceByKey(add).filter(lambda kv: kv[1] > max_group)
    blocks = {key: math.ceil(count / max_group) for key, count in sizes.collect()}
    split = spark.sparkContext.broadcast(blocks)
    grouped = keyed.flatMap(partial(_to_blocks, split)).groupByKey()
    pairs = grouped.flatMap(partial(_group_pairs, table_layout, k))
    schema = StructType(
        [
            StructField("a", id_type, False),
            StructField("b", id_type, False),
            StructField("distance", IntegerType(), False),
        ]
    )
    return spark.createDataFrame(pairs, schema)


def _emit(
    layout: Layout, rows: Iterable[tuple[Any, int]]
) -> Iterator[tuple[tuple[int, int], tuple[Any, int]]]:
    """((table, key), (id, unsigned simhash)) per row and table; keys computed with numpy per chunk."""
    chunk: list[tuple[Any, int]] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= _CHUNK:
            yield from _emit_chunk(layout, chunk)
            chunk = []
    if chunk:
        yield from _emit_chunk(layout, chunk)


def _emit_chunk(
    layout: Layout, chunk: list[tuple[Any, int]]
) -> Iterator[tuple[tuple[int, int], tuple[Any, int]]]:
    hashes = np.array([value & _MASK for _, value in chunk], dtype=np.uint64)
    keys = layout.keys(hashes).tolist()
    for (ident, _), value, row_keys in zip(chunk, hashes.tolist(), keys, strict=True):
        for table, key in enumerate(row_keys):
            yield (table, key), (ident, value)


def block_of(ident: Any, blocks: int) -> int:
    """The block of a record in a split group: a stable hash of its id (the same on every executor)."""
    return zlib.crc32(repr(ident).encode("utf-8")) % blocks


def _to_blocks(
    split: Any, item: tuple[tuple[int, int], tuple[Any, int]]
) -> Iterator[tuple[tuple[int, ...], Member]]:
    (table, key), (ident, value) = item
    count = split.value.get((table, key))
    if count is None:
        yield (table, key, 0, 0), (ident, value, 0)
        return
    mine = block_of(ident, count)
    for other in range(count):
        yield (table, key, min(mine, other), max(mine, other)), (ident, value, mine)


def _group_pairs(
    layout: Layout, k: int, item: tuple[tuple[int, ...], Iterable[Member]]
) -> Iterator[tuple[Any, Any, int]]:
    """The pairs of one group (or block pair) within k that no earlier table's key also joins."""
    (table, _key, first, second), members = item
    members = list(members)
    if len(members) < 2:
        return
    ids = [m[0] for m in members]
    hashes = np.array([m[1] for m in members], dtype=np.uint64)
    earlier = layout.keys(hashes)[:, :table] if table else None
    if first == second:
        left = right = np.arange(len(members))
        within = True
    else:
        in_block = np.array([m[2] for m in members])
        left, right = np.flatnonzero(in_block == first), np.flatnonzero(in_block == second)
        within = False
    for n, i in enumerate(left.tolist()):
        others = right[n + 1 :] if within else right
        if not others.size:
            continue
        distance = popcount64(hashes[others] ^ hashes[i])
        keep = distance <= k
        if earlier is not None:
            keep &= ~(earlier[others] == earlier[i]).any(axis=1)
        for j, d in zip(others[keep].tolist(), distance[keep].tolist(), strict=True):
            a, b = ids[i], ids[j]
            if a == b:
                continue
            yield (a, b, int(d)) if a < b else (b, a, int(d))
