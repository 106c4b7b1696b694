"""Table layouts after Manku, Jain & Das Sarma (WWW 2007): which bits each table sorts on.

Two 64-bit fingerprints within Hamming distance ``d`` differ in at most ``d`` bits. Split
the 64 bits into ``b`` blocks: at most ``d`` blocks contain a difference, so at least
``b - d`` blocks are identical. A table keyed on ``m`` of the ``b`` blocks, one table per
choice of ``m`` blocks, therefore finds every pair within ``d <= b - m`` by exact lookup
of the key. The two-level ("tiered") form repeats the argument on the bits left over after
the first choice: ``C(b1, m1) * C(b2, m2)`` tables, complete for
``d <= min(b1 - m1, b2 - m2)``. The default for k = 3 is the paper's 16 tables with a
28-bit key: one of 4 blocks of 16 bits, then one of 4 blocks of 12 of the remaining 48.

A layout is refused (:class:`LayoutError`) when it cannot guarantee completeness for the
requested k; nothing here is probabilistic.

Spec strings (stored in the index manifest in their canonical form):

- ``auto`` or ``None``: chosen for k (the Manku 16-table layout for k = 3);
- ``blocks:B:M``: choose M of B blocks (complete for k <= B - M); ``blocks:B`` means M = B - k;
- ``tiered:B1:M1:B2:M2``: the two-level family; ``tiered:B1:B2`` means M = B - k at each level;
- ``manku``: ``tiered:4:1:4:1``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..base import LayoutError

BITS = 64
MAX_K = 8
MAX_TABLES = 256
DEFAULT_K = 3

# A reference index size for choosing a layout automatically: the expected number of
# candidates per probe is about N / 2**key_bits, so short keys cost time at scale.
_REFERENCE_SIZE = 1 << 24
_AUTO_MAX_TABLES = 64


def _split(positions: list[int], blocks: int) -> list[list[int]]:
    """Split bit positions (most significant first) into ``blocks`` runs, larger runs first."""
    size, extra = divmod(len(positions), blocks)
    out, start = [], 0
    for i in range(blocks):
        width = size + (1 if i < extra else 0)
        out.append(positions[start : start + width])
        start += width
    return out


@dataclass(frozen=True)
class Layout:
    """A set of tables, each keyed on a fixed subset of the 64 bits."""

    spec: str
    """Canonical spec string, e.g. ``tiered:4:1:4:1``."""
    max_k: int
    """The largest distance for which every neighbour shares a key in some table."""
    tables: tuple[tuple[int, ...], ...] = field(repr=False)
    """Per table, the key's bit positions (63 = most significant), most significant first."""

    @property
    def num_tables(self) -> int:
        return len(self.tables)

    @cached_property
    def key_bits(self) -> int:
        """Width of the longest table key."""
        return max(len(t) for t in self.tables)

    @cached_property
    def min_key_bits(self) -> int:
        return min(len(t) for t in self.tables)

    @cached_property
    def table_bits(self) -> int:
        """Bits needed to number the tables in a combined key."""
        return max(0, (self.num_tables - 1).bit_length())

    @cached_property
    def combined_dtype(self) -> np.dtype:
        """uint32 when table number plus key fit in 32 bits (half the RAM), else uint64."""
        return np.dtype(np.uint32 if self.table_bits + self.key_bits <= 32 else np.uint64)

    @cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per table, (shift, mask, out_shift) of each contiguous run of key bits, padded."""
        runs_per_table: list[list[tuple[int, int, int]]] = []
        for positions in self.tables:
            runs: list[tuple[int, int, int]] = []
            out = len(positions)
            i = 0
            while i < len(positions):
                j = i
                while j + 1 < len(positions) and positions[j + 1] == positions[j] - 1:
                    j += 1
                width = j - i + 1
                low = positions[j]
                out -= width
                runs.append((low, width, out))
                i = j + 1
            runs_per_table.append(runs)
        depth = max(len(r) for r in runs_per_table)
        shift = np.zeros((self.num_tables, depth), dtype=np.uint64)
        mask = np.zeros((self.num_tables, depth), dtype=np.uint64)
        outs = np.zeros((self.num_tables, depth), dtype=np.uint64)
        for t, runs in enumerate(runs_per_table):
            for s, (low, width, out) in enumerate(runs):
                shift[t, s] = low
                mask[t, s] = (1 << width) - 1 if width < 64 else (1 << 64) - 1
                outs[t, s] = out
        return shift, mask, outs

    @property
    def segment_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per table and run of key bits: (shift, mask, out_shift), uint64, shape (tables, runs)."""
        return self._segments

    def keys(self, hashes: np.ndarray) -> np.ndarray:
        """Table keys of each fingerprint: shape (n, tables), uint64."""
        h = np.asarray(hashes, dtype=np.uint64).reshape(-1, 1, 1)
        shift, mask, outs = self._segments
        parts = ((h >> shift) & mask) << outs
        return np.bitwise_or.reduce(parts, axis=2)

    def table_keys(self, hashes: np.ndarray, table: int) -> np.ndarray:
        """The key of one table for each fingerprint, uint64 (cheaper than :meth:`keys`)."""
        h = np.asarray(hashes, dtype=np.uint64)
        shift, mask, outs = self._segments
        key = np.zeros(h.shape, dtype=np.uint64)
        for s in range(shift.shape[1]):
            if mask[table, s]:
                key |= ((h >> shift[table, s]) & mask[table, s]) << outs[table, s]
        return key

    def combined_keys(self, hashes: np.ndarray) -> np.ndarray:
        """``table << key_bits | key`` per (fingerprint, table): one sorted array holds all tables."""
        keys = self.keys(hashes)
        tables = np.arange(self.num_tables, dtype=np.uint64) << np.uint64(self.key_bits)
        return (keys | tables).astype(self.combined_dtype, copy=False)

    def check(self, k: int) -> None:
        """Refuse a k this layout cannot answer completely."""
        _check_k(k)
        if k > self.max_k:
            raise LayoutError(
                f"layout {self.spec} guarantees complete answers only up to k={self.max_k}, "
                f"not k={k}; choose a layout with more blocks (or layout='auto')"
            )


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool):
        raise TypeError(f"k must be an int, not {type(k).__name__}")
    if not 0 <= k <= MAX_K:
        raise LayoutError(f"k must be between 0 and {MAX_K}, got {k}")


def blocks_layout(blocks: int, chosen: int) -> Layout:
    """Choose ``chosen`` of ``blocks`` blocks: complete for k <= blocks - chosen."""
    if not 1 <= chosen <= blocks <= BITS:
        raise LayoutError(f"blocks:{blocks}:{chosen} needs 1 <= chosen <= blocks <= 64")
    count = math.comb(blocks, chosen)
    if count > MAX_TABLES:
        raise LayoutError(f"blocks:{blocks}:{chosen} needs {count} tables (at most {MAX_TABLES})")
    parts = _split(list(range(BITS - 1, -1, -1)), blocks)
    tables = tuple(
        tuple(p for b in combo for p in parts[b]) for combo in itertools.combinations(range(blocks), chosen)
    )
    layout = Layout(f"blocks:{blocks}:{chosen}", blocks - chosen, tables)
    _check_width(layout)
    return layout


def tiered_layout(b1: int, m1: int, b2: int, m2: int) -> Layout:
    """Two levels of block choice: complete for k <= min(b1 - m1, b2 - m2)."""
    if not (1 <= m1 < b1 <= BITS and 1 <= m2 <= b2):
        raise LayoutError(f"tiered:{b1}:{m1}:{b2}:{m2} needs 1 <= m1 < b1 and 1 <= m2 <= b2")
    count = math.comb(b1, m1) * math.comb(b2, m2)
    if count > MAX_TABLES:
        raise LayoutError(f"tiered:{b1}:{m1}:{b2}:{m2} needs {count} tables (at most {MAX_TABLES})")
    parts = _split(list(range(BITS - 1, -1, -1)), b1)
    tables = []
    for first in itertools.combinations(range(b1), m1):
        head = [p for b in first for p in parts[b]]
        rest = [p for b in range(b1) if b not in first for p in parts[b]]
        if len(rest) < b2:
            raise LayoutError(f"tiered:{b1}:{m1}:{b2}:{m2}: {len(rest)} bits left cannot make {b2} blocks")
        sub = _split(rest, b2)
        for second in itertools.combinations(range(b2), m2):
            tail = sorted((p for b in second for p in sub[b]), reverse=True)
            tables.append(tuple(head + tail))
    layout = Layout(f"tiered:{b1}:{m1}:{b2}:{m2}", min(b1 - m1, b2 - m2), tuple(tables))
    _check_width(layout)
    return layout


def _check_width(layout: Layout) -> None:
    if layout.table_bits + layout.key_bits > 64:
        raise LayoutError(
            f"layout {layout.spec}: {layout.num_tables} tables with {layout.key_bits}-bit keys "
            f"do not fit a 64-bit combined key"
        )


def _auto(k: int) -> Layout:
    """The Manku default for k=3; otherwise the cheapest complete layout by a simple cost model."""
    if k == DEFAULT_K:
        return tiered_layout(4, 1, 4, 1)
    if k == 0:
        return blocks_layout(1, 1)
    best: tuple[float, Layout] | None = None
    candidates: list[Layout] = []
    for b in range(k + 1, 17):
        if math.comb(b, k) <= _AUTO_MAX_TABLES:
            candidates.append(blocks_layout(b, b - k))
    for b1 in range(k + 1, 12):
        for b2 in range(k + 1, 12):
            if math.comb(b1, k) * math.comb(b2, k) <= _AUTO_MAX_TABLES:
                try:
                    candidates.append(tiered_layout(b1, b1 - k, b2, b2 - k))
                except LayoutError:
                    continue
    for layout in candidates:
        # probes cost per table: a fixed lookup plus the expected false candidates
        cost = layout.num_tables * (1.0 + _REFERENCE_SIZE / 2.0**layout.min_key_bits)
        if best is None or cost < best[0]:
            best = (cost, layout)
    assert best is not None
    return best[1]


def resolve(spec: str | Layout | None, k: int) -> Layout:
    """The layout for ``spec`` and ``k``; LayoutError when it cannot be complete for k."""
    _check_k(k)
    if isinstance(spec, Layout):
        spec.check(k)
        return spec
    text = (spec or "auto").strip().lower()
    try:
        name, *raw = text.split(":")
        args = [int(a) for a in raw]
    except ValueError:
        raise LayoutError(f"not a layout spec: {spec!r}") from None
    if name == "auto" and not args:
        layout = _auto(k)
    elif name == "manku" and not args:
        layout = tiered_layout(4, 1, 4, 1)
    elif name == "blocks" and len(args) == 1:
        if args[0] <= k:
            raise LayoutError(f"blocks:{args[0]} cannot be complete for k={k}: needs more than {k} blocks")
        layout = blocks_layout(args[0], args[0] - k)
    elif name == "blocks" and len(args) == 2:
        layout = blocks_layout(*args)
    elif name == "tiered" and len(args) == 2:
        if min(args) <= k:
            raise LayoutError(f"tiered:{args[0]}:{args[1]} cannot be complete for k={k}")
        layout = tiered_layout(args[0], args[0] - k, args[1], args[1] - k)
    elif name == "tiered" and len(args) == 4:
        layout = tiered_layout(*args)
    else:
        raise LayoutError(f"unknown layout {spec!r}: use auto, manku, blocks:B[:M] or tiered:B1[:M1]:B2[:M2]")
    layout.check(k)
    return layout


def settle(
    stored_spec: str, stored_k: int, k: int | None, spec: str | Layout | None, where: object
) -> tuple[Layout, int]:
    """An existing index's layout and the k to answer with (None: the stored k); LayoutError when the
    given ``spec`` is another layout or ``k`` is more than the stored layout answers exactly."""
    layout = resolve(stored_spec, 0)
    if k is None:
        k = stored_k
    if spec is not None and resolve(spec, k).spec != layout.spec:
        raise LayoutError(
            f"the index at {where} uses layout {layout.spec}, not {resolve(spec, k).spec}; "
            f"open it without a layout, or export and rebuild it"
        )
    if k > layout.max_k:
        raise LayoutError(
            f"the index at {where} was created for k={stored_k} (layout {layout.spec} is "
            f"complete up to k={layout.max_k}); it cannot answer k={k} exactly. Export it and "
            f"build a new index with k={k}"
        )
    layout.check(k)
    return layout, k
