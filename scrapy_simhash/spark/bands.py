"""Verified near-duplicate pairs on Spark: LSH bands of the sketches as a distributed join, then the rule.

The distributed form of the verified rule's two stages (:mod:`scrapy_simhash.decision`), in three
steps, so that no page's sketch is shuffled once per band:

1. **Grouping** (slim rows): each sketched page is emitted once per band as ``(band, key, id, new)``,
   where ``key`` is ``xxhash64`` of the band's ``rows`` values (their low ``value_bits``, the part the
   rule compares) cut straight out of the sketch's byte form (``MinHash.to_bytes()``: a 4-byte magic,
   then little-endian uint32 values) in the JVM.
   Pages sharing a key are grouped (skewed keys split into block pairs as for the simhash tables,
   :func:`.groups.shared_groups`); each group yields its candidate pairs ``(a, b)``.
2. **Candidates**: a pair found by several bands (or by a hash collision) is kept once (``distinct``).
3. **Verification**: the candidates are joined with the ``(id, simhash, sketch)`` table in one join
   (each candidate asks for ``a`` and ``b`` by id; the two halves meet again by ``(a, b)``), so the
   sketches are shuffled once by id plus twice per candidate pair, and each pair is judged
   by :meth:`Rule.judge <scrapy_simhash.decision.Rule.judge>` on its two sketches, the very check every
   index applies. The rule looks at the real band values, so the 64-bit key is only a filter: a hash
   collision can add a candidate, never a pair, and a pair is reported once however many bands share it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

import numpy as np

from ..decision import Rule
from .groups import MAX_GROUP, block_partners, shared_groups

_MASK = (1 << 64) - 1
_MAGIC_BYTES = 4
_VALUE_BYTES = 4

Member = tuple[Any, int, bool]
"""(id, block, new)."""


def band_groups(
    df: Any,
    rule: Rule,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    sketch_col: str = "minhash",
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
    key_bits: int = 64,
) -> Any:
    """DataFrame[table, key, first, second, members]: the groups of pages sharing a band's key
    (``table`` is the band's number, ``key`` a 64-bit hash of its values, members ``(id, block,
    new)``); rows without simhash or sketch are left out. ``key_bits`` < 64 keeps only the key's low
    bits: more pages share a key (more candidates, never more pairs); the tests force collisions so."""
    from pyspark.sql import functions as F

    if max_group < 1:
        raise ValueError("max_group must be at least 1")
    if not 1 <= key_bits <= 64:
        raise ValueError(f"key_bits must be in 1..64, got {key_bits!r}")
    rows = df.where(F.col(simhash_col).isNotNull() & F.col(sketch_col).isNotNull()).select(
        F.col(id_col).alias("id"),
        F.col(sketch_col).alias("s"),
        (F.coalesce(F.col(new_col).cast("boolean"), F.lit(False)) if new_col else F.lit(True)).alias("new"),
    )
    bands = [F.xxhash64(_band_bytes(F, rule, band)) for band in range(rule.bands)]
    if key_bits < 64:
        bands = [key.bitwiseAND(F.lit((1 << key_bits) - 1)) for key in bands]
    keyed = rows.select("id", "new", F.posexplode(F.array(*bands)).alias("table", "key"))
    return shared_groups(keyed, ["id"], max_group)


def candidate_pairs(
    df: Any,
    rule: Rule,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    sketch_col: str = "minhash",
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
    key_bits: int = 64,
) -> Any:
    """DataFrame[a, b]: every pair of sketched rows sharing a band's key (at least one of them new),
    ``a < b``, each once. A superset of the rule's pairs: nothing is judged yet."""
    from pyspark.sql.types import StructField, StructType

    id_type = df.schema[id_col].dataType
    groups = band_groups(
        df,
        rule,
        id_col=id_col,
        simhash_col=simhash_col,
        sketch_col=sketch_col,
        max_group=max_group,
        new_col=new_col,
        key_bits=key_bits,
    )
    pairs = groups.rdd.map(_group_item).flatMap(_band_candidates)
    schema = StructType([StructField("a", id_type, False), StructField("b", id_type, False)])
    return df.sparkSession.createDataFrame(pairs, schema).distinct()


def verified_pairs(
    df: Any,
    rule: Rule,
    *,
    id_col: str = "id",
    simhash_col: str = "simhash",
    sketch_col: str = "minhash",
    max_group: int = MAX_GROUP,
    new_col: str | None = None,
    key_bits: int = 64,
) -> Any:
    """DataFrame[a, b, distance, similarity]: every pair of sketched rows the rule judges near-duplicate."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, IntegerType, StructField, StructType

    id_type = df.schema[id_col].dataType
    candidates = candidate_pairs(
        df,
        rule,
        id_col=id_col,
        simhash_col=simhash_col,
        sketch_col=sketch_col,
        max_group=max_group,
        new_col=new_col,
        key_bits=key_bits,
    )
    pages = df.where(F.col(simhash_col).isNotNull() & F.col(sketch_col).isNotNull()).select(
        F.col(id_col).alias("id"), F.col(simhash_col).alias("h"), F.col(sketch_col).alias("s")
    )
    # one join, so the pages are shuffled by id once: each candidate asks for both its pages by id,
    # and the two halves meet again by (a, b), the only rows that carry a sketch twice
    ends = candidates.select("a", "b", F.explode(F.array("a", "b")).alias("id"))
    both = (
        ends.join(pages, "id")
        .groupBy("a", "b")
        .agg(F.collect_list(F.struct("id", "h", "s")).alias("pages"))
        .where(F.size("pages") == 2)
    )
    judged = both.rdd.mapPartitions(partial(_judge_pairs, rule))
    schema = StructType(
        [
            StructField("a", id_type, False),
            StructField("b", id_type, False),
            StructField("distance", IntegerType(), False),
            StructField("similarity", DoubleType(), True),
        ]
    )
    return df.sparkSession.createDataFrame(judged, schema)


def _band_bytes(F: Any, rule: Rule, band: int) -> Any:
    """The bytes of a band's values as the rule compares them: the low ``value_bits`` of each value
    are its first bytes (little-endian), so a band is cut out whole at 32 bits, value by value below."""
    start = 1 + _MAGIC_BYTES + band * rule.rows * _VALUE_BYTES
    if rule.value_bits == 32:
        return F.substring("s", start, rule.rows * _VALUE_BYTES)
    kept = rule.value_bits // 8
    return F.concat(*(F.substring("s", start + row * _VALUE_BYTES, kept) for row in range(rule.rows)))


def _group_item(row: Any) -> tuple[tuple[int, ...], list[Member]]:
    return (row[0], row[1], row[2], row[3]), [(m[0], m[1], m[2]) for m in row[4]]


def sketch_values(data: bytes) -> np.ndarray:
    """The uint32 values of a sketch's byte form (the magic is checked by ``MinHash.from_bytes``)."""
    return np.frombuffer(data, dtype="<u4", offset=_MAGIC_BYTES).astype(np.uint32)


def _band_candidates(item: tuple[tuple[int, ...], Iterable[Member]]) -> Iterator[tuple[Any, Any]]:
    """The pairs of one band group (or block pair) with at least one new page, ``a < b``."""
    (_band, _key, first, second), members = item
    members = list(members)
    if len(members) < 2:
        return
    ids = [m[0] for m in members]
    new = np.array([m[2] for m in members], dtype=bool)
    for i, others in block_partners([m[1] for m in members], first, second):
        if not new[i]:
            others = others[new[others]]
        for j in others.tolist():
            a, b = ids[i], ids[j]
            if a != b:
                yield (a, b) if a < b else (b, a)


def _judge_pairs(rule: Rule, rows: Iterable[Any]) -> Iterator[tuple[Any, Any, int, float | None]]:
    """The candidate pairs (with both pages' simhash and sketch) the rule accepts (``compare_values``
    is :meth:`Rule.judge` after checking that the sketches have the same size)."""
    for a, b, ((_, ha, sa), (_, hb, sb)) in rows:
        verdict = rule.compare_values(ha & _MASK, hb & _MASK, sketch_values(sa), sketch_values(sb))
        if verdict.near_duplicate:
            yield a, b, verdict.distance, verdict.similarity
