"""Simhash mode over an index that also holds sketches: simhash decisions, sketches kept true.

``open_index(path, mode="simhash")`` on a directory whose pages were stored with sketches (a
verified index) decides by simhash distance alone, as asked, but must not leave a sketch
describing a page's *previous* content: a verified opening later would judge the page by it. So
writes go through :class:`~.verified.VerifiedIndex`, whose inserts without sketch drop the key's
old sketch, and lookups never pass one. A page rewritten here is judged by simhash in verified
mode until a verified crawl revisits it (``add_sketch``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..base import Match, Meta
from .verified import VerifiedIndex


class SimhashModeIndex(VerifiedIndex):
    """Answers of the simhash index alone (distance <= k); replaced or removed pages lose their sketch."""

    def add(self, simhash: int, key: str, meta: Meta | None = None, *, sketch: Any = None) -> None:
        self.add_many([(simhash, key, meta)])

    def add_many(self, items: Iterable[Any]) -> int:
        return super().add_many([tuple(item)[:3] for item in items])

    def check_and_add(
        self, simhash: int, key: str, meta: Meta | None = None, *, sketch: Any = None
    ) -> list[Match]:
        return super().check_and_add(simhash, key, meta)

    def query(self, simhash: int, k: int | None = None, *, sketch: Any = None) -> list[Match]:
        return self.simhashes.query(simhash, self.k if k is None else k)

    def query_many(
        self, simhashes: Iterable[int], k: int | None = None, *, sketches: Iterable[Any] | None = None
    ) -> list[list[Match]]:
        return self.simhashes.query_many(simhashes, self.k if k is None else k)

    def add_sketch(self, key: str, sketch: Any) -> bool:
        raise ValueError("simhash mode stores no sketch: open the index in verified mode")

    def stats(self) -> dict[str, Any]:
        return dict(self.simhashes.stats())

    def __repr__(self) -> str:
        return f"SimhashModeIndex({self.simhashes!r})"
