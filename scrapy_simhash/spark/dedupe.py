"""``spark dedupe``: the same clusters and report rows as ``scrapy-simhash dedupe``, computed on Spark.

fingerprint_archives -> near_duplicates (by the decision rule: verified by default, LSH bands of the
sketches checked by the rule, simhash for pages without sketch) -> clusters. Records are numbered
``input << 40 | offset``, the order ``dedupe`` reads (input order, then offset), so that clusters are
numbered as ``dedupe`` numbers them; within a cluster the keep policy (:mod:`..keep`) orders the members
by the records' own fields, as ``dedupe`` does, so every cluster keeps the same original.
Only the clustered records reach the driver.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlparse

from ..change import Change
from ..decision import Rule
from ..defaults import DISTANCE, MODE, SIMILARITY
from ..extract import DEFAULT_EXTRACTOR
from ..fingerprint.minhash import MinHash
from ..index.archive.captures import Capture
from ..keep import DEFAULT_KEEP, check_policy, meta_order
from ..warc.dedupe import rule_row
from ..warc.timeline import change_columns, compare, date_key
from .archives import fingerprint_archives
from .components import clusters
from .convert import to_unsigned
from .groups import MAX_GROUP
from .pairs import near_duplicates
from .table_extractor import COLUMN, check_tables

logger = logging.getLogger(__name__)

OFFSET_BITS = 40
"""Offsets up to 1 TiB per file; the input's position takes the bits above."""


def record_ids(pages: Any) -> Any:
    """``pages`` with a LongType ``id`` that orders records as ``dedupe`` does (input, then offset)."""
    from pyspark.sql import functions as F

    return pages.withColumn("id", F.shiftleft(F.col("input").cast("long"), OFFSET_BITS) + F.col("offset"))


STORED_COLUMNS = ["input", "file", "offset", "record_id", "uri", "date", "simhash", "tokens", "minhash"]
"""What ``save`` writes of each fingerprinted record (and the ``extractor`` column: its extractor), and
what ``against`` requires (a table saved before tables recorded their extractor has no such column)."""


def dedupe_rows(
    spark: Any,
    paths: Iterable[str | os.PathLike[str]],
    k: int = DISTANCE,
    *,
    max_group: int = MAX_GROUP,
    mode: str = MODE,
    similarity: float = SIMILARITY,
    save: str | None = None,
    against: Iterable[str] = (),
    keep: str = DEFAULT_KEEP,
    mix_extractors: bool = False,
    warn: Callable[[str], None] | None = None,
    **options: Any,
) -> tuple[list[dict[str, Any]], list[Any]]:
    """(report rows as ``dedupe`` writes them, problem rows of the read). ``options`` as for
    :func:`~scrapy_simhash.spark.fingerprint_archives`; ``mode`` and ``similarity`` as for ``dedupe``.

    ``save``: also write the fingerprinted records to this Parquet directory (any Hadoop URI), to be
    given as ``against`` in a later run. ``against``: Parquet tables of earlier runs, the stored
    collection: their records join the clusters (clusters are numbered as if read first, tables in the
    order given; the ``keep`` policy chooses each original among all members), only
    clusters joined by at least one pair with a new record are reported, and the stored archives are
    not read again. ``keep``: the policy that chooses each cluster's original, as for ``dedupe``.

    A saved table records the extractor of its rows (column ``extractor``); a table of another
    extractor given as ``against`` is refused (:class:`.table_extractor.TableExtractorMismatch`, before
    anything is read or saved) unless ``mix_extractors``; ``warn`` (default: a logged warning) is told
    what a run that goes on should say (:mod:`.table_extractor`). Each report row names the extractor
    of its own page.
    """
    from pyspark.sql import functions as F

    check_policy(keep)
    rule = Rule(mode=mode, distance=k, similarity=similarity)
    extractor = options.get("extractor", DEFAULT_EXTRACTOR).description
    stored = _stored_tables(spark, list(against))
    check_tables(stored, extractor, mix=mix_extractors, warn=warn or logger.warning)
    read = fingerprint_archives(spark, paths, mode=mode, similarity=similarity, **options).cache()
    try:
        problems = read.where(F.col("problem").isNotNull()).collect()
        too_far = read.where(F.col("offset") >= (1 << OFFSET_BITS)).limit(1).count()
        if too_far:
            raise ValueError(f"a record offset is beyond {1 << OFFSET_BITS} bytes: not supported")
        fingerprinted = read.where(F.col("simhash").isNotNull() & F.col("problem").isNull())
        fingerprinted = fingerprinted.withColumn(COLUMN, F.lit(extractor))
        if save:
            fingerprinted.select(*STORED_COLUMNS, COLUMN).write.mode("errorifexists").parquet(save)
        pages, new_col = _with_stored(fingerprinted, stored)
        pages = record_ids(pages)
        pairs = near_duplicates(
            pages, k, max_group=max_group, mode=mode, similarity=similarity, new_col=new_col
        )
        members = (
            clusters(pairs.select("a", "b"))
            .join(pages, "id")
            .join(previous_captures(fingerprinted), ["file", "offset"], "left")
            .collect()
        )
    finally:
        read.unpersist()
    groups: dict[int, list[Any]] = {}
    for row in members:
        groups.setdefault(row.cluster, []).append(row)
    rows: list[dict[str, Any]] = []
    for number, cluster in enumerate(sorted(groups)):
        metas = [(_meta(member), member) for member in groups[cluster]]
        group = sorted(metas, key=lambda pair: meta_order(keep, pair[0]))
        first = _page(group[0][1])
        for i, (meta, member) in enumerate(group):
            role = "original" if i == 0 else "duplicate"
            row = {**rule_row(number, meta, _page(member), first, role, rule), "keep": keep}
            change = change_columns(_change(member, rule))
            rows.append({**row, "extractor": member[COLUMN] or extractor, **change})
    return rows, problems


PREVIOUS = ["record_id", "date", "payload_digest", "text_digest", "simhash", "minhash"]
"""What :func:`previous_captures` gives of each page's previous capture (as ``previous_<name>``)."""


def previous_captures(pages: Any) -> Any:
    """Each page's own digests and its URL's previous capture among ``pages`` (by ``file``, ``offset``),
    ordered as ``dedupe`` orders captures (:mod:`scrapy_simhash.warc.timeline`): by the instant of
    their date, then input and offset; pages without URL, payload digest or a valid date are not
    captures."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    instant = F.udf(lambda date: _instant(date), "array<long>")
    dated = pages.where(F.col("uri").isNotNull() & F.col("payload_digest").isNotNull())
    dated = dated.withColumn("when", instant(F.col("date"))).where(F.col("when").isNotNull())
    order = Window.partitionBy("uri").orderBy("when", "input", "offset")
    earlier = [F.lag(name).over(order).alias(f"previous_{name}") for name in PREVIOUS]
    found = dated.select(
        "file",
        "offset",
        F.col("payload_digest").alias("this_payload_digest"),
        F.col("text_digest").alias("this_text_digest"),
        *earlier,
    )
    return found.where(F.col("previous_date").isNotNull())


def _instant(date: str | None) -> list[int] | None:
    """:func:`~scrapy_simhash.warc.timeline.date_key` as a Spark value (seconds, nanoseconds)."""
    found = date_key(date)
    return None if found is None else list(found)


def _change(member: Any, rule: Rule) -> Change | None:
    """A clustered page's change since its URL's previous capture (None: its first, not a capture, or
    the very record before it read again from a copy of its file)."""
    if member["previous_date"] is None:
        return None
    if member.record_id is not None and member.previous_record_id == member.record_id:
        return None

    def capture(prefix: str, record_id: str | None, date: str, simhash: int, sketch: Any) -> Capture:
        return Capture(
            url=member.uri,
            record_id=record_id,
            date=date,
            payload_digest=member[f"{prefix}_payload_digest"],
            text_digest=member[f"{prefix}_text_digest"],
            simhash=to_unsigned(simhash),
            sketch=None if sketch is None else MinHash.from_bytes(bytes(sketch)).to_text(),
        )

    previous = capture(
        "previous",
        member.previous_record_id,
        member.previous_date,
        member.previous_simhash,
        member.previous_minhash,
    )
    current = capture("this", member.record_id, member.date, member.simhash, member.minhash)
    return compare(previous, current, rule)


def _stored_tables(spark: Any, tables: list[str]) -> list[tuple[str, Any]]:
    """Each ``--against`` table read (lazily); ValueError for one that ``save`` did not write."""
    out = []
    for table in tables:
        stored = spark.read.parquet(table)
        missing = [name for name in STORED_COLUMNS if name not in stored.columns]
        if missing:
            raise ValueError(f"{table}: not a table written by --save (no column {', '.join(missing)})")
        out.append((table, stored))
    return out


def _with_stored(fresh: Any, tables: list[tuple[str, Any]]) -> tuple[Any, str | None]:
    """The new records after the stored ones: input positions shifted past every stored table's, so
    that ``record_ids`` orders stored tables (in the order given) before this run's inputs. A table
    saved before tables recorded their extractor gives its rows none (they are reported as the run's)."""
    if not tables:
        return fresh, None
    from pyspark.sql import functions as F

    parts, shift = [], 0
    for _name, stored in tables:
        top = stored.agg(F.max("input")).first()[0]
        named = stored[COLUMN] if COLUMN in stored.columns else F.lit(None).cast("string")
        part = stored.select(*STORED_COLUMNS, named.alias(COLUMN))
        parts.append(part.withColumn("input", F.col("input") + shift))
        shift += 0 if top is None else int(top) + 1
    fresh = fresh.select(*STORED_COLUMNS, COLUMN).withColumn("input", F.col("input") + shift)
    stored_rows = parts[0]
    for part in parts[1:]:
        stored_rows = stored_rows.unionByName(part)
    both = stored_rows.withColumn("new", F.lit(False)).unionByName(fresh.withColumn("new", F.lit(True)))
    return both, "new"


def _meta(row: Any) -> dict[str, Any]:
    """A member row as ``dedupe`` describes a record (its report columns and token count)."""
    return {
        "url": row.uri,
        "date": row.date,
        "record_id": row.record_id,
        "file": _report_name(row.file),
        "offset": row.offset,
        "tokens": row.tokens,
    }


def _report_name(file: str) -> str:
    """Local paths absolute, as ``dedupe`` reports them; URIs (files read through Hadoop) as they are."""
    return file if len(urlparse(file).scheme) > 1 else os.path.abspath(file)


def _page(row: Any) -> tuple[int, MinHash | None]:
    """(unsigned simhash, sketch or None) of a page row, as :func:`.warc.dedupe.rule_row` takes it."""
    sketch = None if row.minhash is None else MinHash.from_bytes(bytes(row.minhash))
    return to_unsigned(row.simhash), sketch
