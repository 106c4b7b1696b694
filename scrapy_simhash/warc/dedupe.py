"""``dedupe``: near-duplicate clusters across archives, as JSON Lines or CSV rows.

Two methods: ``simhash`` (within Hamming distance k of a 64-bit fingerprint) and ``minhash``
(estimated Jaccard similarity of word-shingle sets at or above a threshold, minhash-doc/1
sketches computed by the workers). Either way a cluster's original is its earliest record.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from ..fingerprint import hamming, to_base32
from ..fingerprint.minhash import SCHEME as MINHASH_SCHEME
from ..fingerprint.minhash import MinHash
from .pipeline import (
    FileEnd,
    Input,
    Options,
    PageResult,
    Pipeline,
    RunSummary,
    count_result,
    index_meta,
    record_key,
)
from .progress import Progress
from .reader import ReadProblem

# -- dedupe ------------------------------------------------------------------------------------------


REPORT_FIELDS = ["cluster", "record_id", "uri", "date", "file", "offset", "simhash", "distance"]
MINHASH_REPORT_FIELDS = ["cluster", "record_id", "uri", "date", "file", "offset", "scheme", "similarity"]
"""``--method minhash`` rows: ``similarity`` is the estimated Jaccard to the cluster's original."""

METHODS = ("simhash", "minhash")
DEFAULT_THRESHOLD = 0.8
"""Estimated Jaccard similarity at or above which ``--method minhash`` pairs two pages."""


def dedupe(
    inputs: list[Input],
    options: Options,
    index: Any = None,
    stream: TextIO | None = None,
    *,
    method: str = "simhash",
    threshold: float = DEFAULT_THRESHOLD,
) -> tuple[RunSummary, list[dict[str, Any]]]:
    """Near-duplicate clusters across all inputs; rows ordered by cluster, the first row its original.

    ``method="minhash"`` has the workers sketch each page too and pairs pages whose estimated
    Jaccard similarity is at least ``threshold``; with an ``index`` (a
    :class:`~scrapy_simhash.index.minhash_store.MinHashIndex`) the index's own threshold decides,
    and pages it stored in earlier runs join the clusters.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "minhash":
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"--threshold must be in (0, 1], not {threshold}")
        options = dataclasses.replace(options, minhash=True)
    progress = Progress(len(inputs), enabled=options.progress, stream=stream)
    summary = RunSummary()
    results: list[PageResult] = []
    try:
        for event in Pipeline(options, progress).run(inputs):
            if isinstance(event, ReadProblem):
                summary.add_problem(event, progress)
            elif isinstance(event, FileEnd):
                summary.add_file(event.stats)
                progress.update(files=1)
            elif isinstance(event, list):
                for result in event:
                    count_result(summary, result)
                    if result.simhash is not None:
                        progress.update(pages=1)
                        results.append(result)
    finally:
        progress.clear()
    if method == "minhash":
        sketched = [r for r in results if r.minhash is not None]
        rows = (
            _clusters_minhash_with_index(sketched, index)
            if index is not None
            else _clusters_minhash(sketched, threshold)
        )
        summary.near_duplicates = sum(1 for row in rows if row["role"] == "duplicate")
    else:
        rows = (
            _clusters_with_index(results, index)
            if index is not None
            else _clusters_batch(results, options.distance)
        )
        summary.near_duplicates = sum(
            1 for row in rows if row["distance"] is not None and row["role"] == "duplicate"
        )
    summary.seconds = progress.elapsed
    return summary, rows


def _row(cluster: int, meta: dict[str, Any], simhash: int, distance: int | None, role: str) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "role": role,
        "record_id": meta.get("record_id"),
        "uri": meta.get("url"),
        "date": meta.get("date"),
        "file": meta.get("file"),
        "offset": meta.get("offset"),
        "simhash": to_base32(simhash),
        "distance": distance,
    }


def _clusters_batch(results: list[PageResult], k: int) -> list[dict[str, Any]]:
    from ..index.batch import cluster_groups, clusters

    if len(results) < 2:
        return []
    labels = clusters([r.simhash for r in results], k)
    rows: list[dict[str, Any]] = []
    for number, group in enumerate(cluster_groups(labels)):
        first = results[int(group[0])]
        for position in group:
            member = results[int(position)]
            assert member.simhash is not None and first.simhash is not None
            distance = hamming(member.simhash, first.simhash)
            role = "original" if position == group[0] else "duplicate"
            rows.append(_row(number, index_meta(member), member.simhash, distance, role))
    return rows


def _clusters_minhash(results: list[PageResult], threshold: float) -> list[dict[str, Any]]:
    """Connected components of the "estimated Jaccard >= threshold" graph, earliest record first.

    ``similarity`` is each member's estimate against the original, so in a chain (a~b, b~c) it
    can be below the threshold for c.
    """
    import numpy as np

    from ..index.batch import cluster_groups
    from ..index.minhash_batch import minhash_clusters

    if len(results) < 2:
        return []
    sketches = np.stack([r.minhash.values for r in results if r.minhash is not None])
    labels = minhash_clusters(sketches, threshold)
    rows: list[dict[str, Any]] = []
    for number, group in enumerate(cluster_groups(labels)):
        first = results[int(group[0])].minhash
        assert first is not None
        for position in group:
            member = results[int(position)]
            assert member.minhash is not None
            role = "original" if position == group[0] else "duplicate"
            rows.append(_minhash_row(number, index_meta(member), member.minhash, first, role))
    return rows


def _clusters_with_index(results: list[PageResult], index: Any) -> list[dict[str, Any]]:
    """Clusters of the "within k" graph built from the index's answers (earlier runs' records included)."""

    def matches(result: PageResult, key: str) -> list[tuple[str, dict[str, Any], Any]]:
        assert result.simhash is not None
        found = index.check_and_add(result.simhash, key, index_meta(result))
        return [(m.key, dict(m.meta or {}), m.simhash) for m in found]

    return [
        _row(number, meta, value, hamming(value, first), role)
        for number, meta, value, first, role in _index_components(results, lambda r: r.simhash, matches)
    ]


def _clusters_minhash_with_index(results: list[PageResult], index: Any) -> list[dict[str, Any]]:
    """Clusters of the "estimated Jaccard >= the index's threshold" graph from a MinHash index's answers."""

    def matches(result: PageResult, key: str) -> list[tuple[str, dict[str, Any], Any]]:
        assert result.minhash is not None
        found = index.check_and_add(key, result.minhash.values, index_meta(result))
        # a stored page's sketch, for its similarity to its cluster's original
        return [(m.key, dict(m.meta or {}), _stored_sketch(index, m.key)) for m in found]

    return [
        _minhash_row(number, meta, value, first, role)
        for number, meta, value, first, role in _index_components(results, lambda r: r.minhash, matches)
    ]


def _stored_sketch(index: Any, key: str) -> MinHash:
    values = index.get(key)
    if values is None:  # the index is ours alone (exclusive writer): a key it just answered is there
        raise ValueError(f"the MinHash index answered {key!r} but holds no sketch for it")
    return MinHash(values)


def _minhash_row(
    cluster: int, meta: dict[str, Any], sketch: MinHash, first: MinHash, role: str
) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "role": role,
        "record_id": meta.get("record_id"),
        "uri": meta.get("url"),
        "date": meta.get("date"),
        "file": meta.get("file"),
        "offset": meta.get("offset"),
        "scheme": MINHASH_SCHEME,
        "similarity": sketch.jaccard(first),
    }


def _index_components(
    results: list[PageResult],
    value_of: Callable[[PageResult], Any],
    matches: Callable[[PageResult, str], list[tuple[str, dict[str, Any], Any]]],
) -> list[tuple[int, dict[str, Any], Any, Any, str]]:
    """Connected components of the graph of the index's answers, as (cluster, meta, value, original's
    value, role); ``matches(result, key)`` stores the page and returns what the index held before as
    (key, meta, value). Stored pages rank before this run's page that found them."""
    parent: dict[str, str] = {}
    nodes: dict[str, tuple[dict[str, Any], Any]] = {}
    rank: dict[str, tuple[int, int]] = {}  # (position of the record that found it, 0 if already stored)

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for position, result in enumerate(results):
        key = record_key(result)
        nodes[key] = (index_meta(result), value_of(result))
        rank[key] = (position, 1)
        for match_key, match_meta, match_value in matches(result, key):
            if match_key == key:
                continue
            if match_key not in nodes:
                nodes[match_key] = (match_meta, match_value)
                rank[match_key] = (position, 0)
            a, b = find(match_key), find(key)
            if a != b:
                parent[max(a, b, key=rank.__getitem__)] = min(a, b, key=rank.__getitem__)
    groups: dict[str, list[str]] = {}
    for key in sorted(nodes, key=rank.__getitem__):
        groups.setdefault(find(key), []).append(key)
    out: list[tuple[int, dict[str, Any], Any, Any, str]] = []
    members_list = [members for members in groups.values() if len(members) > 1]
    for number, members in enumerate(members_list):
        first_value = nodes[members[0]][1]
        for i, key in enumerate(members):
            meta, value = nodes[key]
            out.append((number, meta, value, first_value, "original" if i == 0 else "duplicate"))
    return out


def write_report(
    rows: list[dict[str, Any]], path: str | None, fmt: str | None = None, method: str = "simhash"
) -> None:
    """JSON Lines (default) or CSV (``fmt="csv"`` or a ``.csv`` file name); ``-`` or None is stdout.

    The columns are the method's (:data:`REPORT_FIELDS` or :data:`MINHASH_REPORT_FIELDS`).
    """
    fmt = fmt or ("csv" if path and path.lower().endswith(".csv") else "jsonl")
    chosen = MINHASH_REPORT_FIELDS if method == "minhash" else REPORT_FIELDS
    fields = ["cluster", "role", *chosen[1:]]
    out: TextIO
    if path in (None, "-"):
        out = sys.stdout
        _write_rows(out, rows, fields, fmt)
        return
    with open(path, "w", encoding="utf-8", newline="") as out:
        _write_rows(out, rows, fields, fmt)


def _write_rows(out: TextIO, rows: list[dict[str, Any]], fields: list[str], fmt: str) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps({k: row[k] for k in fields}, ensure_ascii=False) + "\n")
