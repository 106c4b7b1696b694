"""The behaviour every NearDuplicateIndex backend must show, as reusable checks.

Each backend's test module passes its own factories:

- ``factory(k=3, **options) -> NearDuplicateIndex``: a fresh, empty index;
- ``reopen(index) -> NearDuplicateIndex``: close ``index`` and open the same storage again.

The checks compare against a brute-force model (a dict of key -> (simhash, seq, meta)),
so they cannot pass by accident: identical fingerprints under several keys, distance
exactly k, ordering by distance then age, replaced and removed keys, atomic
check_and_add, reopen and compaction are all asserted. ``programs(k)`` is a hypothesis
strategy of operation sequences for :func:`run_program`.

Agreed semantics beyond base.py's docstring (all backends):
- every add (including one that replaces a key) gives the key a new, larger ``seq``;
- ``check_and_add`` reports the key's own previous entry too, if it is within k;
- a query with k above what the layout guarantees raises LayoutError;
- a batch with one invalid item raises and stores nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import strategies as st

from scrapy_simhash.index import LayoutError, Match, NearDuplicateIndex

Factory = Callable[..., NearDuplicateIndex]
Reopen = Callable[[NearDuplicateIndex], NearDuplicateIndex]
MASK = (1 << 64) - 1


def popcount(x: int) -> int:
    return bin(x).count("1")


def flip(value: int, bits: list[int] | tuple[int, ...]) -> int:
    for b in bits:
        value ^= 1 << b
    return value


class Model:
    """The reference: a dict, queried by comparing against every stored fingerprint."""

    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, dict[str, Any]]] = {}
        self.order: dict[str, int] = {}
        self.clock = 0

    def add(self, h: int, key: str, meta: dict[str, Any] | None = None) -> None:
        self.clock += 1
        self.rows[key] = (h, dict(meta or {}))
        self.order[key] = self.clock

    def remove(self, key: str) -> bool:
        self.order.pop(key, None)
        return self.rows.pop(key, None) is not None

    def query(self, h: int, k: int) -> list[tuple[str, int, int, dict[str, Any]]]:
        found = [
            (key, stored, popcount(h ^ stored), meta)
            for key, (stored, meta) in self.rows.items()
            if popcount(h ^ stored) <= k
        ]
        found.sort(key=lambda row: (row[2], self.order[row[0]]))
        return found


def as_rows(matches: list[Match]) -> list[tuple[str, int, int, dict[str, Any]]]:
    return [(m.key, m.simhash, m.distance, dict(m.meta)) for m in matches]


def assert_ordered(matches: list[Match]) -> None:
    """Ordered by distance, then age (seq); each seq distinct."""
    keys = [(m.distance, m.seq) for m in matches]
    assert keys == sorted(keys)
    assert len({m.seq for m in matches}) == len(matches)


def assert_agrees(index: NearDuplicateIndex, model: Model, queries: list[int], k: int) -> None:
    singles = [index.query(h, k) for h in queries]
    for h, got in zip(queries, singles, strict=True):
        assert as_rows(got) == model.query(h, k), f"query {h:#018x} k={k}"
        assert_ordered(got)
    assert [as_rows(m) for m in index.query_many(queries, k)] == [as_rows(m) for m in singles]
    assert len(index) == len(model.rows)


# --- fixed scenarios ----------------------------------------------------------------------


def check_identical_fingerprints_under_several_keys(factory: Factory) -> None:
    with factory(k=3) as index:
        for i in range(5):
            index.add(0xFEEDFACECAFEBEEF, f"copy-{i}", {"i": i})
        matches = index.query(0xFEEDFACECAFEBEEF)
        assert [m.key for m in matches] == [f"copy-{i}" for i in range(5)]
        assert [m.meta["i"] for m in matches] == list(range(5))
        assert all(m.distance == 0 for m in matches)


def check_distance_exactly_k_included(factory: Factory, k: int) -> None:
    base = 0x0F1E2D3C4B5A6978
    with factory(k=k) as index:
        for d in range(k + 3):
            index.add(flip(base, list(range(0, 7 * d, 7))), f"d{d}")
        got = index.query(base)
        assert [(m.key, m.distance) for m in got] == [(f"d{d}", d) for d in range(k + 1)]
        if k > 0:
            assert [m.key for m in index.query(base, k - 1)] == [f"d{d}" for d in range(k)]


def check_order_by_distance_then_age(factory: Factory) -> None:
    base = 0x123456789ABCDEF1
    with factory(k=3) as index:
        index.add(flip(base, [1, 2]), "far-old")
        index.add(flip(base, [5]), "near-old")
        index.add(flip(base, [3, 4]), "far-new")
        index.add(base, "same")
        index.add(flip(base, [9]), "near-new")
        got = index.query(base)
        assert [m.key for m in got] == ["same", "near-old", "near-new", "far-old", "far-new"]
        assert_ordered(got)


def check_replace_and_remove(factory: Factory) -> None:
    a, b = 0x1111222233334444, 0x9999AAAABBBBCCCC
    with factory(k=3) as index:
        index.add(a, "page", {"v": 1})
        old_seq = index.get("page").seq  # type: ignore[union-attr]
        index.add(b, "page", {"v": 2})
        assert len(index) == 1
        assert index.query(a) == []
        got = index.get("page")
        assert got is not None and got.simhash == b and got.meta == {"v": 2} and got.distance == 0
        assert got.seq > old_seq
        assert [m.key for m in index.query(b)] == ["page"]
        assert "page" in index and "other" not in index and 42 not in index
        assert index.remove("page") is True
        assert index.remove("page") is False
        assert index.get("page") is None and "page" not in index and len(index) == 0
        assert index.query(b) == []


def check_check_and_add(factory: Factory) -> None:
    base = 0xA5A5A5A5A5A5A5A5
    with factory(k=3) as index:
        assert index.check_and_add(base, "first", {"n": 1}) == []
        got = index.check_and_add(flip(base, [0, 1, 2]), "second")
        assert [(m.key, m.distance, m.meta) for m in got] == [("first", 0 + 3, {"n": 1})]
        got = index.check_and_add(flip(base, [0]), "third")
        assert [m.key for m in got] == ["first", "second"]
        assert index.check_and_add(flip(base, list(range(20))), "far") == []
        # a key re-added reports its own previous entry, then replaces it
        got = index.check_and_add(base, "first")
        assert [m.key for m in got] == ["first", "third", "second"]
        assert len(index) == 4


def check_bad_input_loses_nothing(factory: Factory) -> None:
    with factory(k=3) as index:
        index.add(0xABC, "kept")
        with pytest.raises(ValueError):
            index.add(0, "zero")
        with pytest.raises(ValueError):
            index.add(1 << 64, "too-big")
        with pytest.raises((TypeError, ValueError)):
            index.add(-5, "negative")
        with pytest.raises(ValueError):
            index.add(0x1, "bad-meta", {"x": object()})
        with pytest.raises(ValueError):
            index.add_many([(0x10, "ok-1", None), (0, "bad", None), (0x20, "ok-2", None)])
        with pytest.raises(ValueError):
            index.query(0)
        assert len(index) == 1
        assert [k for k in ("kept", "ok-1", "ok-2", "zero", "bad-meta") if k in index] == ["kept"]


def check_add_many_and_query_many(factory: Factory) -> None:
    base = 0x0102030405060708
    items = [(flip(base, [i, i + 20]), f"k{i}", {"i": i}) for i in range(30)]
    items.append((flip(base, [0, 20]), "k0", {"i": "again"}))  # the last item for a key wins
    with factory(k=3) as index:
        assert index.add_many(items) == 31
        assert len(index) == 30
        assert index.get("k0").meta == {"i": "again"}  # type: ignore[union-attr]
        queries = [base, flip(base, [5]), 0x7777777777777777]
        batched = index.query_many(queries)
        assert [as_rows(m) for m in batched] == [as_rows(index.query(h)) for h in queries]
        assert len(batched[0]) == 30 and batched[2] == []


def check_layout_limits(factory: Factory) -> None:
    with factory(k=3) as index:
        index.add(0xFFFF, "x")
        with pytest.raises(LayoutError):
            index.query(0xFFFF, 9)
        assert [m.key for m in index.query(0xFFFF, 0)] == ["x"]


def check_reopen_keeps_everything(factory: Factory, reopen: Reopen) -> None:
    index = factory(k=3)
    base = 0x5555AAAA5555AAAA
    index.add_many([(flip(base, [i]), f"n{i}", {"i": i}) for i in range(10)])
    index.add(base, "same")
    index.remove("n3")
    before = as_rows(index.query(base))
    index = reopen(index)
    try:
        assert as_rows(index.query(base)) == before
        assert len(index) == 10 and "n3" not in index
        index.add(base, "after-reopen")
        assert [m.key for m in index.query(base)[:2]] == ["same", "after-reopen"]
    finally:
        index.close()


def check_stats_and_close(factory: Factory) -> None:
    index = factory(k=3)
    index.add(0xBEEF, "a")
    assert index.stats()["size"] == 1
    index.close()
    index.close()  # idempotent


ALL_FIXED = [
    check_identical_fingerprints_under_several_keys,
    check_order_by_distance_then_age,
    check_replace_and_remove,
    check_check_and_add,
    check_bad_input_loses_nothing,
    check_add_many_and_query_many,
    check_layout_limits,
    check_stats_and_close,
]


# --- random programs against the model --------------------------------------------------


@st.composite
def programs(draw: st.DrawFn, k: int, max_ops: int = 40, reopen: bool = True) -> list[tuple[Any, ...]]:
    """Operations: add random or planted neighbours (distance 0..k+2 of a stored one),
    add a copy under another key, replace, remove, query, and reopen/compact."""
    ops: list[tuple[Any, ...]] = []
    hashes: list[int] = []
    keys: list[str] = []
    kinds = ["add", "add", "near", "near", "copy", "remove", "query", "batch"]
    if reopen:
        kinds += ["reopen", "compact"]
    for _ in range(draw(st.integers(1, max_ops))):
        kind = draw(st.sampled_from(kinds))
        if kind in ("near", "copy", "remove", "query") and not hashes:
            kind = "add"
        if kind == "add":
            h = draw(st.integers(1, MASK))
            key = draw(st.sampled_from([*keys, None])) if keys and draw(st.booleans()) else None
            key = key or f"key{len(keys)}"
            ops.append(("add", h, key))
        elif kind in ("near", "copy"):
            seed = draw(st.sampled_from(hashes))
            distance = 0 if kind == "copy" else draw(st.integers(0, k + 2))
            bits = draw(st.lists(st.integers(0, 63), min_size=distance, max_size=distance, unique=True))
            h = flip(seed, bits) or 1
            key = f"key{len(keys)}"
            ops.append(("add", h, key))
        elif kind == "batch":
            size = draw(st.integers(1, 6))
            batch = []
            for i in range(size):
                if hashes and draw(st.booleans()):
                    bits = draw(st.lists(st.integers(0, 63), max_size=k + 2, unique=True))
                    h = flip(draw(st.sampled_from(hashes)), bits) or 1
                else:
                    h = draw(st.integers(1, MASK))
                batch.append((h, f"key{len(keys)}-{i}"))
            ops.append(("batch", batch))
            for h, key in batch:
                hashes.append(h)
                keys.append(key)
            continue
        elif kind == "remove":
            ops.append(("remove", draw(st.sampled_from(keys))))
            continue
        elif kind == "query":
            seed = draw(st.sampled_from(hashes))
            bits = draw(st.lists(st.integers(0, 63), max_size=k + 2, unique=True))
            ops.append(("query", flip(seed, bits) or 1))
            continue
        else:
            ops.append((kind,))
            continue
        hashes.append(ops[-1][1])
        keys.append(ops[-1][2])
    return ops


def run_program(
    factory: Factory,
    reopen: Reopen | None,
    k: int,
    ops: list[tuple[Any, ...]],
    **options: Any,
) -> None:
    """Apply ``ops`` to a fresh index and the model; after each step the answers agree."""
    index = factory(k=k, **options)
    model = Model()
    probes: list[int] = []
    try:
        for op in ops:
            kind = op[0]
            if kind == "add":
                _, h, key = op
                meta = {"h": h % 1000}
                if len(probes) % 2:
                    expected = model.query(h, k)
                    assert as_rows(index.check_and_add(h, key, meta)) == expected
                else:
                    index.add(h, key, meta)
                model.add(h, key, meta)
                probes.append(h)
            elif kind == "batch":
                index.add_many([(h, key, None) for h, key in op[1]])
                for h, key in op[1]:
                    model.add(h, key)
                    probes.append(h)
            elif kind == "remove":
                assert index.remove(op[1]) == model.remove(op[1])
            elif kind == "query":
                probes.append(op[1])
                assert as_rows(index.query(op[1])) == model.query(op[1], k)
            elif kind == "reopen" and reopen is not None:
                index = reopen(index)
            elif kind == "compact":
                index.compact()
        assert_agrees(index, model, probes[-12:], k)
        for key, (h, meta) in model.rows.items():
            got = index.get(key)
            assert got is not None and got.simhash == h and dict(got.meta) == meta
    finally:
        index.close()
