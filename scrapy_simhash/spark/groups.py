"""The grouping both Spark joins share: rows with the same ``(table, key)`` brought together, skew split.

The simhash tables (:mod:`.pairs`, a key is a table's bits of the fingerprint) and the sketch bands
(:mod:`.bands`, a key is a hash of a band's values) both emit each page once per table or band and
check the pages that share a key. Keys of one page only, or without a new page, are dropped in the
JVM; a key shared by more than ``max_group`` pages (many identical pages) is split into
``b = ceil(count / max_group)`` blocks by a hash of the id, and each page is sent to the ``b`` block
pairs it belongs to, so every pair of the big group is compared in exactly one block pair and no
executor ever holds the whole group.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

MAX_GROUP = 10_000
"""Records per key above which a key's group is split into blocks."""


def shared_groups(keyed: Any, fields: list[str], max_group: int) -> Any:
    """DataFrame[table, key, first, second, members] from ``keyed`` rows (``table``, ``key``, ``id``,
    ``new`` and ``fields``): members are structs of ``fields``, ``block`` and ``new``.

    Keys of one record only, or without a new record, are dropped in the JVM; a key shared by more
    than ``max_group`` records is split into block pairs.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # one shuffle: the rows are partitioned by key once; the counts are a window over it, and the
    # grouping below reuses that partitioning
    key = Window.partitionBy("table", "key")
    shared = keyed.select(
        "*",
        F.count(F.lit(1)).over(key).alias("count"),
        F.max(F.col("new").cast("int")).over(key).alias("has_new"),
    )
    shared = shared.where((F.col("count") >= 2) & (F.col("has_new") == 1)).drop("has_new")
    blocks = F.when(F.col("count") > max_group, F.ceil(F.col("count") / max_group)).otherwise(F.lit(1))
    shared = shared.withColumn("blocks", blocks.cast("int"))
    shared = shared.withColumn("block", F.pmod(F.xxhash64("id"), F.col("blocks")).cast("int"))
    shared = shared.withColumn("other", F.explode(F.sequence(F.lit(0), F.col("blocks") - 1)))
    shared = shared.select(
        "table",
        "key",
        F.least("block", "other").alias("first"),
        F.greatest("block", "other").alias("second"),
        F.struct(*fields, "block", "new").alias("member"),
    )
    groups = shared.groupBy("table", "key", "first", "second").agg(F.collect_list("member").alias("members"))
    return groups


def block_partners(blocks: list[int], first: int, second: int) -> Iterator[tuple[int, np.ndarray]]:
    """Each member ``i`` of a group with the members it is paired with: the later members of the same
    group (``first == second``: a whole group, or a block with itself), else every member of block
    ``second`` for each member of block ``first`` (``blocks``: each member's block)."""
    if first == second:
        everyone = np.arange(len(blocks))
        for i in range(len(blocks)):
            yield i, everyone[i + 1 :]
        return
    in_block = np.array(blocks)
    right = np.flatnonzero(in_block == second)
    for i in np.flatnonzero(in_block == first).tolist():
        yield i, right
