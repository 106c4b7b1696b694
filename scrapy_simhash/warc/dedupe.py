"""``dedupe``: near-duplicate clusters across archives, as JSON Lines or CSV rows.

The default method applies the run's decision rule (:attr:`Options.rule`): in ``verified`` mode
(the default) two pages are near-duplicates when their minhash-doc/1 sketches share an LSH band
and their estimated Jaccard similarity is at least the threshold, in ``simhash`` mode when their
fingerprints are within Hamming distance k; a page without sketch is judged by simhash alone.
Each row gives ``distance`` and ``similarity`` to its cluster's original and the ``method`` of that
comparison. ``minhash`` is the earlier MinHash-only method (``--method minhash --threshold J``, its
own index kind). Either way clusters are connected components, and the original is the member the keep
policy puts first (:mod:`..keep`: by default the earliest capture), whatever order the records were read in.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import numpy as np

from ..decision import Rule
from ..fingerprint import to_base32
from ..fingerprint.minhash import SCHEME as MINHASH_SCHEME
from ..fingerprint.minhash import MinHash
from ..keep import DEFAULT_KEEP, check_policy, keep_order, meta_order
from .outcome import RunSummary, check_and_add, count_result, index_meta, record_key, same_record
from .pipeline import FileEnd, Options, PageResult, Pipeline
from .progress import Progress
from .read.inputs import Input
from .read.reader import ReadProblem
from .revisit_rows import REVISIT_FIELDS, with_revisits
from .timeline import CHANGE_FIELDS, archive_captures, change_columns, changes

# -- dedupe ------------------------------------------------------------------------------------------


REPORT_FIELDS = [
    "cluster",
    "record_id",
    "uri",
    "date",
    "file",
    "offset",
    "simhash",
    "distance",
    "similarity",
    "method",
    "rule",
    "keep",
    "extractor",
]
"""Rows of the rule (both modes): ``distance`` (bits) and ``similarity`` (estimated Jaccard, None when a
side has no sketch) to the cluster's original, ``method`` how that pair is judged (verified or simhash),
``rule`` the run's rule (:func:`rule_label`), so that a reader of the rows knows the thresholds, ``keep``
the policy that chose each cluster's original (:data:`~scrapy_simhash.keep.KEEP_POLICIES`), and
``extractor`` the description of the extractor the run read the pages with (fingerprints of different
extractors are not comparable)."""
MINHASH_REPORT_FIELDS = [
    "cluster",
    "record_id",
    "uri",
    "date",
    "file",
    "offset",
    "scheme",
    "similarity",
    "rule",
    "keep",
    "extractor",
]
"""``--method minhash`` rows: ``similarity`` is the estimated Jaccard to the cluster's original; ``rule``
is ``minhash threshold=T`` (:func:`minhash_label`); ``extractor`` as in :data:`REPORT_FIELDS`."""

METHODS = ("rule", "simhash", "minhash")
"""``rule``: the run's mode (:attr:`Options.mode`); ``simhash``: simhash mode whatever the options say;
``minhash``: the MinHash-only method."""
DEFAULT_THRESHOLD = 0.8
"""Estimated Jaccard similarity at or above which ``--method minhash`` pairs two pages."""


def dedupe(
    inputs: list[Input],
    options: Options,
    index: Any = None,
    stream: TextIO | None = None,
    *,
    method: str = "rule",
    threshold: float = DEFAULT_THRESHOLD,
    keep: str = DEFAULT_KEEP,
) -> tuple[RunSummary, list[dict[str, Any]]]:
    """Near-duplicate clusters across all inputs; rows ordered by cluster, the first row its original.

    By default pages are paired by :attr:`Options.rule`; with an ``index`` (from
    :func:`~scrapy_simhash.index.open_index`, verified or simhash) by its answers, and pages it stored
    in earlier runs join the clusters.
    ``method="minhash"`` has the workers sketch each page too and pairs pages whose estimated
    Jaccard similarity is at least ``threshold``; with an ``index`` (a
    :class:`~scrapy_simhash.index.embedded.minhash_store.MinHashIndex`) the index's own threshold decides,
    and pages it stored in earlier runs join the clusters.
    ``keep`` (:data:`~scrapy_simhash.keep.KEEP_POLICIES`) chooses each cluster's original.
    """
    check_policy(keep)
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if method == "minhash":
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"--threshold must be in (0, 1], not {threshold}")
        options = dataclasses.replace(options, minhash=True)
    elif method == "simhash":
        options = dataclasses.replace(options, mode="simhash")
    progress = Progress(len(inputs), enabled=options.progress, stream=stream)
    summary = RunSummary(mode=options.mode if method != "minhash" else "minhash")
    results: list[PageResult] = []
    pipeline = Pipeline(options, progress)
    try:
        for event in pipeline.run(inputs):
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
            _clusters_minhash_with_index(sketched, index, keep)
            if index is not None
            else _clusters_minhash(sketched, threshold, keep)
        )
        summary.near_duplicates = sum(1 for row in rows if row["role"] == "duplicate")
    else:
        rule = options.rule
        rows = (
            _clusters_with_index(results, index, rule, keep)
            if index is not None
            else _clusters_batch(results, rule, keep)
        )
        duplicates = [row for row in rows if row["role"] == "duplicate"]
        summary.near_duplicates = len(duplicates)
        summary.by_simhash = sum(1 for row in duplicates if row["method"] == "simhash")
    resolutions = [r for found in pipeline.revisits.resolve_all().values() for r in found]
    summary.revisits.add(pipeline.revisits, resolutions)
    if method == "minhash":
        label = minhash_label(_threshold_of(index, threshold))
    else:
        label = rule_label(options.rule)
    rows = with_revisits(rows, resolutions, results, rule=label, minhash=method == "minhash")
    found = changes(
        archive_captures(results, resolutions, [str(i.path) for i in inputs]),
        _change_rule(options, method, _threshold_of(index, threshold)),
    )
    extractor = options.extractor.description
    for row in rows:
        row["keep"] = keep
        row["extractor"] = extractor
        for name in REVISIT_FIELDS:  # last, as in the written rows
            row[name] = row.pop(name, None)
        row.update(change_columns(found.get((row.get("file"), row.get("offset")))))
    summary.seconds = progress.elapsed
    return summary, rows


def _row(
    cluster: int,
    meta: dict[str, Any],
    simhash: int,
    distance: int | None,
    role: str,
    similarity: float | None = None,
    method: str = "simhash",
) -> dict[str, Any]:
    return {
        **_located(cluster, meta, role),
        "simhash": to_base32(simhash),
        "distance": distance,
        "similarity": similarity,
        "method": method,
    }


def _located(cluster: int, meta: dict[str, Any], role: str) -> dict[str, Any]:
    """The columns every report row starts with: its cluster and role, and where the record is."""
    return {
        "cluster": cluster,
        "role": role,
        "record_id": meta.get("record_id"),
        "uri": meta.get("url"),
        "date": meta.get("date"),
        "file": meta.get("file"),
        "offset": meta.get("offset"),
    }


Page = tuple[int, Any]
"""A page as the rule sees it: (simhash, sketch or None)."""


def rule_label(rule: Rule) -> str:
    """The ``rule`` column: ``verified similarity=0.5 distance=3`` (the distance for pages without a
    sketch) or ``simhash distance=3``."""
    if rule.verified:
        return f"verified similarity={rule.similarity:g} distance={rule.distance}"
    return f"simhash distance={rule.distance}"


def minhash_label(threshold: float) -> str:
    """The ``rule`` column of ``--method minhash`` rows: ``minhash threshold=0.8``."""
    return f"minhash threshold={threshold:g}"


def rule_row(
    cluster: int, meta: dict[str, Any], page: Page, first: Page, role: str, rule: Rule
) -> dict[str, Any]:
    """A report row: the page and its verdict against its cluster's original ``first``.

    ``similarity`` is rounded to 4 decimals, as in sidecars (``near-duplicate-similarity``)."""
    verdict = rule.compare_values(page[0], first[0], page[1], first[1])
    similarity = None if verdict.similarity is None else round(verdict.similarity, 4)
    return {
        **_row(cluster, meta, page[0], verdict.distance, role, similarity, verdict.method),
        "rule": rule_label(rule),
    }


def rule_pairs(hashes: Sequence[int], sketches: Sequence[Any], rule: Rule) -> np.ndarray:
    """Every pair ``(i, j)``, ``i < j``, the rule judges near-duplicate: int64 array ``(pairs, 2)``.

    Verified mode: candidates are pairs sharing an LSH band of their sketches
    (:func:`~scrapy_simhash.index.minhash_pairs` with the rule's bands and rows), each checked by
    :meth:`Rule.compare_values`; a page without sketch is paired by simhash alone (pairs within the
    rule's distance, from :func:`~scrapy_simhash.index.find_all`). Simhash mode: pairs within distance.
    """
    from ..index.lsh.minhash_batch import minhash_pairs
    from ..index.tables.batch import find_all

    n = len(hashes)
    found: list[np.ndarray] = []
    sketched = [i for i in range(n) if sketches[i] is not None] if rule.verified else []
    if len(sketched) >= 2:
        values = np.stack([np.asarray(getattr(sketches[i], "values", sketches[i])) for i in sketched])
        candidates = minhash_pairs(values, rule.similarity, rule.bands, rule.rows, value_bits=rule.value_bits)
        where = np.asarray(sketched, dtype=np.int64)
        kept = [
            (int(where[a]), int(where[b]))
            for a, b in zip(candidates["i"].tolist(), candidates["j"].tolist(), strict=True)
            if rule.compare_values(
                hashes[where[a]], hashes[where[b]], sketches[where[a]], sketches[where[b]]
            ).near_duplicate
        ]
        found.append(np.asarray(kept, dtype=np.int64).reshape(-1, 2))
    if len(sketched) < n:  # simhash mode, or pages without sketch: within the distance
        close = find_all(hashes, rule.distance)
        if len(sketched):
            has_sketch = np.zeros(n, dtype=bool)
            has_sketch[sketched] = True
            close = close[~(has_sketch[close[:, 0]] & has_sketch[close[:, 1]])]
        found.append(close)
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    return np.concatenate(found)


def result_order(keep: str, result: PageResult) -> tuple[Any, ...]:
    """The ``keep`` policy's sort key of a page read in this run (the smallest is the original)."""
    return keep_order(
        keep,
        date=result.date,
        uri=result.uri,
        file=os.path.abspath(result.file),
        offset=result.offset,
        tokens=result.tokens,
    )


def _clusters_batch(results: list[PageResult], rule: Rule, keep: str) -> list[dict[str, Any]]:
    """Connected components of the rule's pairs over all pages, in the ``keep`` policy's order."""
    from ..index.tables.batch import cluster_groups, clusters

    if len(results) < 2:
        return []
    pages: list[Page] = [(int(r.simhash or 0), r.minhash) for r in results]
    pairs = rule_pairs([h for h, _ in pages], [s for _, s in pages], rule)
    labels = clusters(pairs=pairs, n=len(pages))
    rows: list[dict[str, Any]] = []
    for number, positions in enumerate(cluster_groups(labels)):
        group = sorted(positions.tolist(), key=lambda i: result_order(keep, results[i]))
        first = pages[group[0]]
        for position in group:
            role = "original" if position == group[0] else "duplicate"
            rows.append(
                rule_row(number, index_meta(results[int(position)]), pages[int(position)], first, role, rule)
            )
    return rows


def _clusters_minhash(results: list[PageResult], threshold: float, keep: str) -> list[dict[str, Any]]:
    """Connected components of the "estimated Jaccard >= threshold" graph, in the ``keep`` policy's order.

    ``similarity`` is each member's estimate against the original, so in a chain (a~b, b~c) it
    can be below the threshold for c.
    """
    import numpy as np

    from ..index.lsh.minhash_batch import minhash_clusters
    from ..index.tables.batch import cluster_groups

    if len(results) < 2:
        return []
    sketches = np.stack([r.minhash.values for r in results if r.minhash is not None])
    labels = minhash_clusters(sketches, threshold)
    rows: list[dict[str, Any]] = []
    for number, positions in enumerate(cluster_groups(labels)):
        group = sorted(positions.tolist(), key=lambda i: result_order(keep, results[i]))
        first = results[group[0]].minhash
        assert first is not None
        for position in group:
            member = results[position]
            assert member.minhash is not None
            role = "original" if position == group[0] else "duplicate"
            rows.append(_minhash_row(number, index_meta(member), member.minhash, first, role, threshold))
    return rows


def _clusters_with_index(
    results: list[PageResult], index: Any, rule: Rule, keep: str
) -> list[dict[str, Any]]:
    """Clusters of the graph built from the index's answers (earlier runs' records included).

    Rows compare each member with its original by ``rule``; a stored page's sketch comes from the
    index (``index.sketch_many(keys)``; None for pages stored without one, judged by simhash alone)."""
    sketch_many = getattr(index, "sketch_many", None)  # a VerifiedIndex's: one read per answer

    def matches(result: PageResult, key: str) -> list[tuple[str, dict[str, Any], Any]]:
        found = check_and_add(index, result)
        stored = sketch_many([m.key for m in found]) if sketch_many is not None and found else {}
        return [(m.key, dict(m.meta or {}), (m.simhash, stored.get(m.key))) for m in found]

    return [
        rule_row(number, meta, value, first, role, rule)
        for number, meta, value, first, role in _index_components(
            results, lambda r: (r.simhash, r.minhash if rule.verified else None), matches, keep
        )
    ]


def _clusters_minhash_with_index(results: list[PageResult], index: Any, keep: str) -> list[dict[str, Any]]:
    """Clusters of the "estimated Jaccard >= the index's threshold" graph from a MinHash index's answers."""

    def matches(result: PageResult, key: str) -> list[tuple[str, dict[str, Any], Any]]:
        assert result.minhash is not None
        found = index.check_and_add(key, result.minhash.values, index_meta(result))
        # a stored page's sketch, for its similarity to its cluster's original
        return [(m.key, dict(m.meta or {}), _stored_sketch(index, m.key)) for m in found]

    return [
        _minhash_row(number, meta, value, first, role, index.threshold)
        for number, meta, value, first, role in _index_components(results, lambda r: r.minhash, matches, keep)
    ]


def _stored_sketch(index: Any, key: str) -> MinHash:
    values = index.get(key)
    if values is None:  # the index is ours alone (exclusive writer): a key it just answered is there
        raise ValueError(f"the MinHash index answered {key!r} but holds no sketch for it")
    return MinHash(values)


def _minhash_row(
    cluster: int, meta: dict[str, Any], sketch: MinHash, first: MinHash, role: str, threshold: float
) -> dict[str, Any]:
    return {
        **_located(cluster, meta, role),
        "scheme": MINHASH_SCHEME,
        "similarity": sketch.jaccard(first),
        "rule": minhash_label(threshold),
    }


def _index_components(
    results: list[PageResult],
    value_of: Callable[[PageResult], Any],
    matches: Callable[[PageResult, str], list[tuple[str, dict[str, Any], Any]]],
    keep: str,
) -> list[tuple[int, dict[str, Any], Any, Any, str]]:
    """Connected components of the graph of the index's answers, as (cluster, meta, value, original's
    value, role); ``matches(result, key)`` stores the page and returns what the index held before as
    (key, meta, value). Clusters are numbered in the order they were found (stored pages rank before
    this run's page that found them); members are in the ``keep`` policy's order (by their meta)."""
    parent: dict[str, str] = {}
    nodes: dict[str, tuple[dict[str, Any], Any]] = {}
    # (position of the record that found it, 0 if already stored, then the order found): distinct for every
    # node, so that two stored pages found by one record are joined like any other two
    rank: dict[str, tuple[int, int, int]] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    for position, result in enumerate(results):
        key = record_key(result)
        nodes[key] = (index_meta(result), value_of(result))
        rank[key] = (position, 1, 0)
        for match_key, match_meta, match_value in matches(result, key):
            if match_key == key or same_record(match_meta, result.record_id):
                continue  # the record itself (stored by an earlier run, or by the crawl under its URL)
            if match_key not in nodes:
                nodes[match_key] = (match_meta, match_value)
                rank[match_key] = (position, 0, len(rank))
            a, b = find(match_key), find(key)
            if a != b:
                parent[max(a, b, key=rank.__getitem__)] = min(a, b, key=rank.__getitem__)
    groups: dict[str, list[str]] = {}
    for key in sorted(nodes, key=rank.__getitem__):
        groups.setdefault(find(key), []).append(key)
    out: list[tuple[int, dict[str, Any], Any, Any, str]] = []
    members_list = [members for members in groups.values() if len(members) > 1]
    for number, found in enumerate(members_list):
        members = sorted(found, key=lambda key: meta_order(keep, nodes[key][0]))
        first_value = nodes[members[0]][1]
        for i, key in enumerate(members):
            meta, value = nodes[key]
            out.append((number, meta, value, first_value, "original" if i == 0 else "duplicate"))
    return out


def report_fields(method: str = "rule") -> list[str]:
    """The report's columns for ``method`` (``minhash``, or the rule's), ``role`` second, then the
    revisit columns (:data:`~.revisit_rows.REVISIT_FIELDS`), then how the page's main text changed
    since its URL's previous capture in the inputs (:data:`~.timeline.CHANGE_FIELDS`)."""
    chosen = MINHASH_REPORT_FIELDS if method == "minhash" else REPORT_FIELDS
    return ["cluster", "role", *chosen[1:], *REVISIT_FIELDS, *CHANGE_FIELDS]


def _change_rule(options: Options, method: str, threshold: float) -> Rule:
    """The rule that tells ``minor`` from ``changed`` text: the run's; for ``--method minhash``, an
    estimated Jaccard of at least its threshold (checked as the verified mode checks it)."""
    if method != "minhash":
        return options.rule
    return Rule(mode="verified", distance=options.distance, similarity=threshold)


def _threshold_of(index: Any, threshold: float) -> float:
    """The threshold ``--method minhash`` pairs by: the index's own when there is one."""
    return float(getattr(index, "threshold", threshold)) if index is not None else threshold


def write_report(
    rows: list[dict[str, Any]], path: str | None, fmt: str | None = None, method: str = "rule"
) -> None:
    """JSON Lines (default) or CSV (``fmt="csv"`` or a ``.csv`` file name); ``-`` or None is stdout.

    The columns are the method's (:data:`REPORT_FIELDS` or :data:`MINHASH_REPORT_FIELDS`).
    """
    fmt = fmt or ("csv" if path and path.lower().endswith(".csv") else "jsonl")
    fields = report_fields(method)
    out: TextIO
    if path in (None, "-"):
        out = sys.stdout
        _write_rows(out, rows, fields, fmt)
        return
    with open(path, "w", encoding="utf-8", newline="") as out:
        _write_rows(out, rows, fields, fmt)


def _write_rows(out: TextIO, rows: list[dict[str, Any]], fields: list[str], fmt: str) -> None:
    if fmt == "csv":
        writer = csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    else:
        for row in rows:
            out.write(json.dumps({k: row.get(k) for k in fields}, ensure_ascii=False) + "\n")
