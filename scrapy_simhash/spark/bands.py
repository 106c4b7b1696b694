"""Verified near-duplicate pairs on Spark: LSH bands of the sketches as a distributed join, then the rule.

The distributed form of the verified rule's two stages (:mod:`scrapy_simhash.decision`). Each
sketched page is emitted once per band, keyed by ``(band, the band's bytes)``: the band's
``rows`` values cut straight out of the sketch's byte form (``MinHash.to_bytes()``: a 4-byte
magic, then little-endian uint32 values) in the JVM, so a key is equal exactly when the band is.
Pages sharing a key are candidates; each candidate pair is judged by
:meth:`Rule.judge <scrapy_simhash.decision.Rule.judge>` on its two sketches, the very check every
index applies. A pair is reported only by the first band it shares, so it comes out once without a
global ``distinct``. Skewed keys (many identical pages) are split into block pairs as for the
simhash tables (:func:`.pairs.shared_groups`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from ..decision import Rule
from .pairs import MAX_GROUP, shared_groups

_MASK = (1 << 64) - 1
_MAGIC_BYTES = 4
_VALUE_BYTES = 4

Member = tuple[Any, int, bytes, int, bool]
"""(id, unsigned simhash, sketch bytes, block, new)."""


def band_groups(
    df: Any,
    rule: Rule,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    sketch_col: str = "minhash",
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
) -> Any:
    """DataFrame[table, key, first, second, members]: the groups of pages sharing a band (``table`` is
    the band's number); rows without simhash or sketch are left out."""
    from pyspark.sql import functions as F

    if max_group < 1:
        raise ValueError("max_group must be at least 1")
    width = rule.rows * _VALUE_BYTES
    rows = df.where(F.col(simhash_col).isNotNull() & F.col(sketch_col).isNotNull()).select(
        F.col(id_col).alias("id"),
        F.col(simhash_col).alias("h"),
        F.col(sketch_col).alias("s"),
        (F.coalesce(F.col(new_col).cast("boolean"), F.lit(False)) if new_col else F.lit(True)).alias("new"),
    )
    bands = [F.substring("s", 1 + _MAGIC_BYTES + band * width, width) for band in range(rule.bands)]
    keyed = rows.select("id", "h", "s", "new", F.posexplode(F.array(*bands)).alias("table", "key"))
    return shared_groups(keyed, ["id", "h", "s"], max_group)


def verified_pairs(
    df: Any,
    rule: Rule,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    sketch_col: str = "minhash",
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
) -> Any:
    """DataFrame[a, b, distance, similarity]: every pair of sketched rows the rule judges near-duplicate."""
    from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType

    spark = df.sparkSession
    id_type = df.schema[id_col].dataType
    groups = band_groups(
        df,
        rule,
        id_col=id_col,
        simhash_col=simhash_col,
        sketch_col=sketch_col,
        max_group=max_group,
        new_col=new_col,
    )
    pairs = groups.rdd.map(_group_item).flatMap(partial(_band_pairs, rule))
    schema = StructType(
        [
            StructField("a", id_type, False),
            StructField("b", id_type, False),
            StructField("distance", IntegerType(), False),
            StructField("similarity", DoubleType(), True),
        ]
    )
    return spark.createDataFrame(pairs, schema)


def _group_item(row: Any) -> tuple[tuple[int, ...], list[Member]]:
    return (row[0], row[1], row[2], row[3]), [(m[0], m[1] & _MASK, bytes(m[2]), m[3], m[4]) for m in row[4]]


def sketch_values(data: bytes) -> np.ndarray:
    """The uint32 values of a sketch's byte form (the magic is checked by ``MinHash.from_bytes``)."""
    return np.frombuffer(data, dtype="<u4", offset=_MAGIC_BYTES).astype(np.uint32)


def _band_pairs(
    rule: Rule, item: tuple[tuple[int, ...], Iterable[Member]]
) -> Iterator[tuple[Any, Any, int, float | None]]:
    """The pairs of one band group (or block pair) the rule accepts and no earlier band also joins."""
    (band, _key, first, second), members = item
    members = list(members)
    if len(members) < 2:
        return
    ids = [m[0] for m in members]
    hashes = [m[1] for m in members]
    sketches = np.stack([sketch_values(m[2]) for m in members])
    new = np.array([m[4] for m in members], dtype=bool)
    if first == second:
        left = right = np.arange(len(members))
        within = True
    else:
        in_block = np.array([m[3] for m in members])
        left, right = np.flatnonzero(in_block == first), np.flatnonzero(in_block == second)
        within = False
    earlier = band * rule.rows
    for n, i in enumerate(left.tolist()):
        others = right[n + 1 :] if within else right
        if not others.size:
            continue
        equal = sketches[others] == sketches[i]
        keep = new[others] | new[i]
        if earlier:  # reported by the first band the two share
            keep &= ~equal[:, :earlier].reshape(-1, band, rule.rows).all(axis=2).any(axis=1)
        for j, eq in zip(others[keep].tolist(), equal[keep], strict=True):
            verdict = rule.judge((hashes[i] ^ hashes[j]).bit_count(), eq)
            if not verdict.near_duplicate or ids[i] == ids[j]:
                continue
            a, b = (ids[i], ids[j]) if ids[i] < ids[j] else (ids[j], ids[i])
            yield a, b, verdict.distance, verdict.similarity
