"""``dedupe`` rows for existing revisit records: each one an exact duplicate in its original's cluster.

A resolved revisit joins the cluster of the record it repeats (a new cluster when that record is in
none, e.g. an image or a page with no near-duplicate), after the cluster's pages: ``method`` is
``revisit``, ``distance`` 0, ``similarity`` 1, ``revisit`` says how the original was found and
``revisit_of`` names it. A revisit never becomes a cluster's original (it holds no payload), and
is never stored in an index. A revisit whose original is not in the input is a row of its own at
the end, with no cluster and ``revisit`` = ``original not in input``.
"""

from __future__ import annotations

import os
from typing import Any

from ..fingerprint import to_base32
from ..fingerprint.minhash import SCHEME as MINHASH_SCHEME
from .pipeline import PageResult
from .revisits import REVISIT_METHOD, Resolution

REVISIT_FIELDS = ["revisit", "revisit_of"]
"""Columns every ``dedupe`` row has: empty for pages, set for revisit records."""


def with_revisits(
    rows: list[dict[str, Any]],
    resolutions: list[Resolution],
    results: list[PageResult],
    *,
    rule: str,
    minhash: bool = False,
) -> list[dict[str, Any]]:
    """``rows`` with a row for each revisit added (``rule``: the run's ``rule`` column)."""
    for row in rows:
        row.setdefault("revisit", None)
        row.setdefault("revisit_of", None)
    if not resolutions:
        return rows
    pages = {(os.path.abspath(r.file), r.offset): r for r in results}
    clusters = {(row.get("file"), row.get("offset")): row["cluster"] for row in rows}
    added: dict[Any, list[dict[str, Any]]] = {}
    numbers = [row["cluster"] for row in rows if row["cluster"] is not None]
    next_cluster = max(numbers) + 1 if numbers else 0
    new_originals: dict[Any, dict[str, Any]] = {}
    unresolved: list[dict[str, Any]] = []
    simhash_of = {(row.get("file"), row.get("offset")): row.get("simhash") for row in rows}
    for resolution in resolutions:
        original = resolution.original
        if original is None:
            unresolved.append(_revisit_row(None, resolution, None, rule, minhash, exact=False))
            continue
        where = (os.path.abspath(original.file), original.offset)
        cluster = clusters.get(where)
        if cluster is None:
            cluster = clusters[where] = next_cluster
            next_cluster += 1
            page = pages.get(where)
            simhash = to_base32(page.simhash) if page is not None and page.simhash is not None else None
            simhash_of[where] = simhash
            new_originals[cluster] = {
                "cluster": cluster,
                "role": "original",
                "record_id": original.record_id,
                "uri": original.uri,
                "date": original.date,
                "file": where[0],
                "offset": original.offset,
                "simhash": simhash,
                "distance": None,
                "similarity": None,
                "method": None,
                "scheme": MINHASH_SCHEME if minhash else None,
                "rule": rule,
                "revisit": None,
                "revisit_of": None,
            }
        added.setdefault(cluster, []).append(
            _revisit_row(cluster, resolution, simhash_of.get(where), rule, minhash, exact=True)
        )
    out: list[dict[str, Any]] = []
    for position, row in enumerate(rows):
        out.append(row)
        last_of_cluster = position + 1 == len(rows) or rows[position + 1]["cluster"] != row["cluster"]
        if last_of_cluster:
            out.extend(added.pop(row["cluster"], []))
    for cluster, first in new_originals.items():
        out.append(first)
        out.extend(added.pop(cluster, []))
    return out + unresolved


def _revisit_row(
    cluster: int | None,
    resolution: Resolution,
    simhash: str | None,
    rule: str,
    minhash: bool,
    *,
    exact: bool,
) -> dict[str, Any]:
    revisit = resolution.revisit
    return {
        "cluster": cluster,
        "role": "duplicate",
        "record_id": revisit.record_id,
        "uri": revisit.uri,
        "date": revisit.date,
        "file": os.path.abspath(revisit.file),
        "offset": revisit.offset,
        "simhash": simhash,
        "distance": 0 if exact else None,
        "similarity": 1.0 if exact else None,
        "method": REVISIT_METHOD,
        "scheme": MINHASH_SCHEME if minhash else None,
        "rule": rule,
        "revisit": resolution.by,
        "revisit_of": resolution.refers_to or _capture_named(resolution),
    }


def _capture_named(resolution: Resolution) -> str | None:
    """``<uri> <date>``: how a revisit without ``WARC-Refers-To`` names its original."""
    revisit = resolution.revisit
    named = [part for part in (revisit.refers_to_uri, revisit.refers_to_date) if part]
    return " ".join(named) or None
