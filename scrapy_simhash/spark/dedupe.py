"""``spark dedupe``: the same clusters and report rows as ``scrapy-simhash dedupe``, computed on Spark.

fingerprint_archives -> near_duplicates -> clusters. Records are numbered ``input << 40 | offset``
so that "smallest id" is "earliest record" in the order ``dedupe`` reads (input order, then
offset): every cluster keeps the same original. Only the clustered records reach the driver.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ..defaults import DISTANCE
from ..warc.dedupe import _row
from .archives import fingerprint_archives
from .components import clusters
from .convert import to_unsigned
from .pairs import MAX_GROUP, near_duplicates

OFFSET_BITS = 40
"""Offsets up to 1 TiB per file; the input's position takes the bits above."""


def record_ids(pages: Any) -> Any:
    """``pages`` with a LongType ``id`` that orders records as ``dedupe`` does (input, then offset)."""
    from pyspark.sql import functions as F

    return pages.withColumn("id", F.shiftleft(F.col("input").cast("long"), OFFSET_BITS) + F.col("offset"))


def dedupe_rows(
    spark: Any,
    paths: Iterable[str | os.PathLike[str]],
    k: int = DISTANCE,
    *,
    max_group: int = MAX_GROUP,
    **options: Any,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """(report rows as ``dedupe`` writes them, problem rows of the read). ``options`` as for
    :func:`~scrapy_simhash.spark.fingerprint_archives`."""
    from pyspark.sql import functions as F

    read = fingerprint_archives(spark, paths, **options).cache()
    try:
        problems = read.where(F.col("problem").isNotNull()).collect()
        too_far = read.where(F.col("offset") >= (1 << OFFSET_BITS)).limit(1).count()
        if too_far:
            raise ValueError(f"a record offset is beyond {1 << OFFSET_BITS} bytes: not supported")
        pages = record_ids(read.where(F.col("simhash").isNotNull() & F.col("problem").isNull()))
        members = clusters(near_duplicates(pages, k, max_group=max_group)).join(pages, "id").collect()
    finally:
        read.unpersist()
    groups: dict[int, list[Any]] = {}
    for row in members:
        groups.setdefault(row.cluster, []).append(row)
    rows: list[dict[str, Any]] = []
    for number, cluster in enumerate(sorted(groups)):
        group = sorted(groups[cluster], key=lambda r: r.id)
        first = to_unsigned(group[0].simhash)
        for i, member in enumerate(group):
            value = to_unsigned(member.simhash)
            meta = {
                "url": member.uri,
                "date": member.date,
                "record_id": member.record_id,
                "file": os.path.abspath(member.file),
                "offset": member.offset,
            }
            role = "original" if i == 0 else "duplicate"
            rows.append(_row(number, meta, value, (value ^ first).bit_count(), role))
    return rows, problems
