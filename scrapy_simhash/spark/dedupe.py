"""``spark dedupe``: the same clusters and report rows as ``scrapy-simhash dedupe``, computed on Spark.

fingerprint_archives -> near_duplicates (by the decision rule: verified by default, LSH bands of the
sketches checked by the rule, simhash for pages without sketch) -> clusters. Records are numbered
``input << 40 | offset`` so that "smallest id" is "earliest record" in the order ``dedupe`` reads
(input order, then offset): every cluster keeps the same original.
Only the clustered records reach the driver.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlparse

from ..decision import Rule
from ..defaults import DISTANCE, MODE, SIMILARITY
from ..fingerprint.minhash import MinHash
from ..warc.dedupe import rule_row
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
    mode: str = MODE,
    similarity: float = SIMILARITY,
    **options: Any,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """(report rows as ``dedupe`` writes them, problem rows of the read). ``options`` as for
    :func:`~scrapy_simhash.spark.fingerprint_archives`; ``mode`` and ``similarity`` as for ``dedupe``."""
    from pyspark.sql import functions as F

    rule = Rule(mode=mode, distance=k, similarity=similarity)
    read = fingerprint_archives(spark, paths, mode=mode, similarity=similarity, **options).cache()
    try:
        problems = read.where(F.col("problem").isNotNull()).collect()
        too_far = read.where(F.col("offset") >= (1 << OFFSET_BITS)).limit(1).count()
        if too_far:
            raise ValueError(f"a record offset is beyond {1 << OFFSET_BITS} bytes: not supported")
        pages = record_ids(read.where(F.col("simhash").isNotNull() & F.col("problem").isNull()))
        pairs = near_duplicates(pages, k, max_group=max_group, mode=mode, similarity=similarity)
        members = clusters(pairs.select("a", "b")).join(pages, "id").collect()
    finally:
        read.unpersist()
    groups: dict[int, list[Any]] = {}
    for row in members:
        groups.setdefault(row.cluster, []).append(row)
    rows: list[dict[str, Any]] = []
    for number, cluster in enumerate(sorted(groups)):
        group = sorted(groups[cluster], key=lambda r: r.id)
        first = _page(group[0])
        for i, member in enumerate(group):
            meta = {
                "url": member.uri,
                "date": member.date,
                "record_id": member.record_id,
                "file": _report_name(member.file),
                "offset": member.offset,
            }
            role = "original" if i == 0 else "duplicate"
            rows.append(rule_row(number, meta, _page(member), first, role, rule))
    return rows, problems


def _report_name(file: str) -> str:
    """Local paths absolute, as ``dedupe`` reports them; URIs (files read through Hadoop) as they are."""
    return file if len(urlparse(file).scheme) > 1 else os.path.abspath(file)


def _page(row: Any) -> tuple[int, MinHash | None]:
    """(unsigned simhash, sketch or None) of a page row, as :func:`.warc.dedupe.rule_row` takes it."""
    sketch = None if row.minhash is None else MinHash.from_bytes(bytes(row.minhash))
    return to_unsigned(row.simhash), sketch
