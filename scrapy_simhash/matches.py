"""Which stored page a fingerprinted page duplicates, and how such a match is told: in log lines and in
``response.meta["simhash"]`` (``duplicate_of``, ``replaces``). Shared by the downloader middleware and the
item pipeline, which decide alike.
"""

from __future__ import annotations

from typing import Any

from .index import Match


def verdict_text(match: Match) -> str:
    """Why ``match`` is a near-duplicate, for log lines: ``similarity 0.93, 7 bits``."""
    if match.similarity is None:
        return f"{match.distance} bits, by simhash alone"
    return f"similarity {match.similarity:.2f}, {match.distance} bits"


def duplicate_of(matches: list[Match], key: str, known: Match | None) -> Match | None:
    """The page this one duplicates: the best match other than itself (the index orders them: most
    similar, then closest, then oldest).

    A match that another match replaced as its cluster's original (that one's meta says
    ``replaces``) is passed over: the copies of a cluster name its newest original. When the URL was
    stored before with the same content (``known``), only pages older than that first visit count (a
    re-crawled original stays the original), and the page that replaced it, if any.
    """
    replacers = {meta["replaces"]: m for m in matches if (meta := m.meta or {}).get("replaces")}
    successors = set()
    current = key
    while current in replacers and replacers[current].key not in successors:
        current = replacers[current].key
        successors.add(current)
    for match in matches:
        if match.key == key or match.key in replacers:
            continue
        if known is not None and match.seq > known.seq and match.key not in successors:
            continue
        return match
    return None


def described_match(match: Match) -> dict[str, Any]:
    """A stored page as ``duplicate_of`` and ``replaces`` describe it, with its verdict against this page."""
    meta = match.meta or {}
    return {
        "key": match.key,
        "url": meta.get("url", match.key),
        "date": meta.get("date"),
        "record_id": meta.get("record_id"),
        "distance": match.distance,
        "similarity": None if match.similarity is None else round(match.similarity, 4),
        "method": "simhash" if match.similarity is None else "verified",
    }
