"""Every near-duplicate pair of a fingerprint DataFrame: Manku's permuted tables as a distributed join.

Each fingerprint is emitted once per table of the layout (the same tables as the embedded
index, :mod:`scrapy_simhash.index.tables.layouts`), keyed by ``(table, key bits)``. Records sharing a
key are candidates and are checked exactly (popcount of the XOR <= k). A pair is reported only
by the first table whose key it shares, so it comes out once however many tables find it,
without a global ``distinct``.

Skew: a key shared by more than ``max_group`` records (many identical fingerprints, a boiler-
plate page) is split into block pairs of about ``2 * max_group`` records (:mod:`.groups`, the
grouping the sketch bands of :mod:`.bands` use too). Keys are computed and singleton keys dropped
in the JVM (Spark SQL expressions); only records that share a key reach Python.

:func:`near_duplicates` is the rule's whole answer: the band join of :mod:`.bands` for sketched
pages, these tables for pages without sketch (or in simhash mode).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from ..decision import Rule
from ..defaults import MODE, SIMILARITY
from ..index.tables.batch import popcount64
from ..index.tables.layouts import Layout, resolve
from .bands import verified_pairs
from .groups import MAX_GROUP, block_partners, shared_groups

_MASK = (1 << 64) - 1

Member = tuple[Any, int, int, bool]
"""(id, unsigned simhash, block, new)."""


def near_duplicates(
    df: Any,
    k: int = 3,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    layout: str | Layout | None = None,
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
    sketch_col: str | None = "minhash",
    mode: str = MODE,
    similarity: float = SIMILARITY,
) -> Any:
    """DataFrame[a, b, distance, similarity]: every pair of distinct rows the decision rule pairs, ``a < b``.

    ``mode="verified"`` (the default) with a ``sketch_col`` in ``df`` (BinaryType, the byte form
    ``MinHash.to_bytes()``, null for a page without sketch): the rule of
    :class:`~scrapy_simhash.decision.Rule` (``similarity``, bands and rows as shipped, ``k`` for pages
    without sketch). Pairs of sketched pages come from their shared LSH bands, each checked by the
    rule (:mod:`.bands`); pairs with a sketchless page from the permuted tables at ``k``, with
    ``similarity`` null (decided by simhash alone). ``mode="simhash"`` or no sketch column: every
    pair within Hamming distance ``k`` (similarity null), as below.

    ``simhash_col`` holds LongType fingerprints (the signed reading of the 64 bits, see
    :func:`~scrapy_simhash.spark.to_signed`); rows where it is null are left out. ``id_col``
    must be unique per row (any orderable type; ``a``/``b`` keep its type). Identical
    fingerprints (distance 0) and distance exactly ``k`` are included.

    ``new_col`` (boolean): deduplicate new records against a stored collection (e.g. last
    year's fingerprints read from Parquet, unioned with this year's): only pairs with at least
    one new row are reported, and keys without a new row are dropped before the exact check.
    """
    from pyspark.sql import functions as F

    rule = Rule(mode=mode, distance=k, similarity=similarity)
    common: dict[str, Any] = {
        "id_col": id_col,
        "simhash_col": simhash_col,
        "max_group": max_group,
        "new_col": new_col,
    }
    if not (rule.verified and sketch_col is not None and sketch_col in df.columns):
        return simhash_pairs(df, k, layout=layout, **common).withColumn(
            "similarity", F.lit(None).cast("double")
        )
    found = verified_pairs(df, rule, sketch_col=sketch_col, **common)
    bare = df.where(F.col(simhash_col).isNotNull() & F.col(sketch_col).isNull())
    if not bare.limit(1).count():
        return found
    # pages without sketch: judged by simhash alone, against every page
    flags = df.select(F.col(id_col).alias("_id"), F.col(sketch_col).isNull().alias("_bare"))
    close = simhash_pairs(df, k, layout=layout, **common)
    close = close.join(flags.withColumnRenamed("_bare", "_a"), close["a"] == F.col("_id")).drop("_id")
    close = close.join(flags.withColumnRenamed("_bare", "_b"), close["b"] == F.col("_id")).drop("_id")
    close = close.where(F.col("_a") | F.col("_b")).select("a", "b", "distance")
    return found.unionByName(close.withColumn("similarity", F.lit(None).cast("double")))


def simhash_pairs(
    df: Any,
    k: int = 3,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    layout: str | Layout | None = None,
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
) -> Any:
    """DataFrame[a, b, distance]: every pair of distinct rows within Hamming distance ``k``, ``a < b``.

    Manku's permuted tables as a distributed join (the simhash rule, and the fallback of the
    verified rule for pages without sketch); arguments as for :func:`near_duplicates`.
    """
    from pyspark.sql.types import IntegerType, StructField, StructType

    table_layout = resolve(layout, k)
    spark = df.sparkSession
    id_type = df.schema[id_col].dataType
    groups = candidate_groups(
        df, table_layout, id_col=id_col, simhash_col=simhash_col, max_group=max_group, new_col=new_col
    )
    pairs = groups.rdd.map(_group_item).flatMap(partial(_group_pairs, table_layout, k))
    schema = StructType(
        [
            StructField("a", id_type, False),
            StructField("b", id_type, False),
            StructField("distance", IntegerType(), False),
        ]
    )
    return spark.createDataFrame(pairs, schema)


def candidate_groups(
    df: Any,
    layout: Layout,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
) -> Any:
    """DataFrame[table, key, first, second, members]: the groups the exact check runs on.

    Keys shared by one record only are dropped in the JVM; a key shared by more than
    ``max_group`` records is split into block pairs (blocks by a hash of the id, so about
    ``max_group`` each), so a group holds about ``2 * max_group`` members at most.
    """
    from pyspark.sql import functions as F

    if max_group < 1:
        raise ValueError("max_group must be at least 1")
    table_layout = layout
    h = F.col("h")
    rows = df.where(F.col(simhash_col).isNotNull()).select(
        F.col(id_col).alias("id"),
        F.col(simhash_col).alias("h"),
        (F.coalesce(F.col(new_col).cast("boolean"), F.lit(False)) if new_col else F.lit(True)).alias("new"),
    )
    # (id, h, table, key) per table, computed in the JVM: only keys shared by 2+ records reach Python
    keyed = rows.select(
        "id", "h", "new", F.posexplode(F.array(*_key_columns(table_layout, h))).alias("table", "key")
    )
    return shared_groups(keyed, ["id", "h"], max_group)


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 else value


def _key_columns(layout: Layout, h: Any) -> list[Any]:
    """Per table, the Spark expression of its key (the same bits as :meth:`Layout.table_keys`)."""
    from pyspark.sql import functions as F

    shift, mask, outs = layout.segment_arrays
    columns = []
    for table in range(layout.num_tables):
        key = F.lit(0).cast("long")
        for s in range(shift.shape[1]):
            if int(mask[table, s]):
                part = F.shiftrightunsigned(h, int(shift[table, s])).bitwiseAND(
                    F.lit(_signed(int(mask[table, s])))
                )
                key = key.bitwiseOR(F.shiftleft(part, int(outs[table, s])))
        columns.append(key)
    return columns


def _group_item(row: Any) -> tuple[tuple[int, ...], list[Member]]:
    return (row[0], row[1], row[2], row[3]), [(m[0], m[1] & _MASK, m[2], m[3]) for m in row[4]]


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
    new = np.array([m[3] for m in members], dtype=bool)
    earlier = layout.keys(hashes)[:, :table] if table else None
    for i, others in block_partners([m[2] for m in members], first, second):
        if not others.size:
            continue
        distance = popcount64(hashes[others] ^ hashes[i])
        keep = (distance <= k) & (new[others] | new[i])
        if earlier is not None:
            keep &= ~(earlier[others] == earlier[i]).any(axis=1)
        for j, d in zip(others[keep].tolist(), distance[keep].tolist(), strict=True):
            a, b = ids[i], ids[j]
            if a == b:
                continue
            yield (a, b, int(d)) if a < b else (b, a, int(d))
