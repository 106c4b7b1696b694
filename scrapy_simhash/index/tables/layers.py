"""The embedded index's fingerprints in memory: up to four layers, freshest first, each probed by every query.

1. *pending*: the last few thousand inserts in a small unsorted buffer, compared by brute
   force (a popcount over at most ``pending_max`` fingerprints is cheaper than keeping
   16 sorted structures up to date one insert at a time);
2. *delta*: in-memory sorted runs of tables (:mod:`.delta_runs`): each merge of the pending buffer
   adds a run, and runs are merged geometrically, so a write costs its batch, not the delta;
3. *merging*: while a new generation is written in the background (:mod:`..embedded.generations`),
   the delta it was frozen from, read-only; writes go on into a fresh delta;
4. *base*: the bulk, immutable sorted tables memory-mapped from disk, replaced by a new
   generation (base + merging) when the delta outgrows ``len(base) / 4`` (at least ``delta_min``,
   at most ``delta_max``) or on ``compact()``.

The layers only mirror the database (:mod:`.storage`), which is the truth: the index
(:mod:`.embedded`) fills them from its rows at open and tells them of every committed write.
Removed rows stay in the segments until the next generation, listed in ``dead``; probes skip them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .delta_runs import DeltaRuns
from .layouts import Layout
from .manifest import load_generation
from .packed_tables import PackedTables
from .tables import Hits, Pending, Segment, brute_force, brute_force_one

DELTA_RATIO = 4  # a new base generation when the in-memory delta reaches base / DELTA_RATIO
DELTA_MAX = 1 << 21
"""At most this many pages wait in memory for a generation (about 1 kB of heap each in verified mode:
~2 GB), whatever the base's size: past 8M pages a quarter of the base would be more heap than a machine
has (7.5M pages at 30M, twice over while a merge runs). The price is more rewrites of a large base:
each merge past 8M pages rewrites it for 2M new ones."""


class Layers:
    """Pending, delta and base of the index in directory ``path``. Not thread-safe: the index
    serialises calls (it holds its lock)."""

    def __init__(
        self, path: Path, layout: Layout, pending_max: int, delta_min: int, delta_max: int = DELTA_MAX
    ) -> None:
        self.path, self.layout = path, layout
        self._pending_max, self._delta_min = max(1, pending_max), max(1, delta_min)
        self._delta_max = max(1, delta_max)
        self.base: Segment | PackedTables = Segment.empty(layout)
        """The on-disk tables (packed; an empty segment while there are none)."""
        self.base_max_seq, self.generation = 0, 0
        """The largest seq the on-disk tables hold, their generation (0: none yet)."""
        self.manifest: dict[str, Any] | None = None
        """The manifest of the base generation (its other files: the sketches' LSH)."""
        self.delta = DeltaRuns()
        self.merging: DeltaRuns | None = None
        """The delta frozen for the generation being written (None: no merge under way)."""
        self.merging_max_seq = 0
        """The largest seq the merging layer (and the generation being written) holds."""
        self.pending = Pending(min(self._pending_max, 1024))
        self.dead: set[int] = set()
        """Seqs removed or replaced that the segments still hold."""
        self.merges = 0

    def __len__(self) -> int:
        """Live fingerprints the layers hold."""
        merging = len(self.merging) if self.merging is not None else 0
        return len(self.base) + merging + len(self.delta) + len(self.pending) - len(self.dead)

    @property
    def frozen_max_seq(self) -> int:
        """The largest seq the immutable layers (base, merging) hold: a row at or below it that is
        removed or replaced stays in them, listed in ``dead`` (and tombstoned in the database)."""
        return self.merging_max_seq if self.merging is not None else self.base_max_seq

    # -- filling -----------------------------------------------------------------------------------
    def set_base(self, manifest: dict[str, Any] | None, verify: bool) -> None:
        """The base generation a manifest names (TablesInvalid if its files are damaged), or none."""
        self.base, self.base_max_seq, self.generation, self.manifest = Segment.empty(self.layout), 0, 0, None
        if manifest is not None:
            self.base = load_generation(self.path, manifest, self.layout, verify=verify)
            self.generation = int(manifest["generation"])
            self.base_max_seq = int(manifest["max_seq"])
            self.manifest = manifest

    def set_rest(self, dead: set[int], hashes: np.ndarray, seqs: np.ndarray) -> None:
        """Above the base: the rows newer than it (the delta) and the seqs of it removed since."""
        self.dead = dead
        self.delta = DeltaRuns([Segment.build(self.layout, hashes, seqs)])
        self.pending = Pending(min(self._pending_max, 1024))

    def drop_base(self) -> None:
        """Forget the base (its files do not describe the database): the caller refills the rest."""
        self.base, self.base_max_seq, self.dead, self.manifest = Segment.empty(self.layout), 0, set(), None

    # -- writes --------------------------------------------------------------------------------------
    def inserted(self, hashes: list[int], seqs: list[int], replaced: list[int]) -> None:
        """Committed rows (and the seqs they replaced): into the pending buffer, merged when full."""
        self.dead.update(replaced)
        self.pending.append(hashes, seqs)
        if len(self.pending) >= self._pending_max:
            self.merge_pending()

    def merge_pending(self) -> None:
        """The pending buffer into the delta, as a run (removed rows stay listed in ``dead`` until
        the generation that holds them drops them)."""
        if self.pending:
            self.delta.add(self.layout, Segment.build(self.layout, *self.pending.take()))

    def delta_full(self) -> bool:
        """The delta has outgrown its limit, which grows with the base so that each fingerprint is
        rewritten a bounded number of times (about five) over the index's growth."""
        return len(self.delta) >= self.delta_limit()

    def delta_limit(self) -> int:
        """Pages of the delta that start a merge: a quarter of the base, at most ``delta_max``
        (unless ``delta_min`` says more)."""
        return max(self._delta_min, min(len(self.base) // DELTA_RATIO, self._delta_max))

    def hard_limit(self, cap: int) -> int:
        """Pages of the delta past which a write waits for the running merge: ``cap`` times the
        limit, but no more than twice ``delta_max`` (the heap stays bounded when the disk is slow)."""
        limit = self.delta_limit()
        return min(cap * limit, max(limit, 2 * self._delta_max))

    def dirty(self) -> bool:
        """Anything not in the base files (or no base files yet)."""
        return bool(
            self.pending
            or len(self.delta)
            or self.merging is not None
            or self.dead
            or not (self.path / "manifest.json").exists()
        )

    def freeze(self, max_seq: int) -> DeltaRuns:
        """Start a merge: the delta (with the pending buffer) becomes the read-only merging layer,
        holding every row up to ``max_seq``; writes go on into an empty delta."""
        assert self.merging is None, "one merge at a time"
        self.merge_pending()
        self.merging, self.merging_max_seq = self.delta, max_seq
        self.delta = DeltaRuns()
        return self.merging

    def frozen_dead(self) -> np.ndarray:
        """The dead seqs a merge of base and merging drops (those of newer rows stay listed)."""
        return np.fromiter((s for s in self.dead if s <= self.merging_max_seq), dtype=np.int64)

    def switch(self, manifest: dict[str, Any], base: PackedTables, dropped: np.ndarray) -> None:
        """The generation written from base + merging (without ``dropped``) becomes the base."""
        self.base, self.manifest = base, manifest
        self.generation, self.base_max_seq = int(manifest["generation"]), self.merging_max_seq
        self.merging = None
        self.dead.difference_update(dropped.tolist())
        self.merges += 1

    def _dead_array(self) -> np.ndarray:
        return np.fromiter(self.dead, dtype=np.int64, count=len(self.dead))

    # -- probes ----------------------------------------------------------------------------------------
    def probe_one(self, h: int, k: int) -> list[tuple[int, int, int]]:
        """``(seq, simhash, distance)`` of the live fingerprints within ``k`` of ``h`` (the C probe
        per layer when built, without numpy's per-call overhead)."""
        found = self.base.probe_one(self.layout, h, k)
        if self.merging is not None:
            found += self.merging.probe_one(self.layout, h, k)
        found += self.delta.probe_one(self.layout, h, k)
        if self.pending:
            found += brute_force_one(*self.pending.arrays(), h, k)
        if found and self.dead:
            found = [hit for hit in found if hit[0] not in self.dead]
        return found

    def probe(self, queries: np.ndarray, k: int) -> Hits:
        """The live fingerprints within ``k`` of each of a batch of queries."""
        combined = self.layout.combined_keys(queries)
        parts = [
            self.base.probe(self.layout, queries, combined, k),
            self.delta.probe(self.layout, queries, combined, k),
        ]
        if self.merging is not None:
            parts.append(self.merging.probe(self.layout, queries, combined, k))
        if self.pending:
            parts.append(brute_force(*self.pending.arrays(), queries, k))
        hits = Hits.concat(parts)
        if hits.seq.size and self.dead:
            live = ~np.isin(hits.seq, self._dead_array())
            hits = Hits(hits.query[live], hits.seq[live], hits.simhash[live], hits.distance[live])
        return hits

    def stats(self) -> dict[str, int]:
        merging = self.merging if self.merging is not None else DeltaRuns()
        return {
            "base": len(self.base),
            "merging": len(merging),
            "delta": len(self.delta),
            "pending": len(self.pending),
            "removed_not_compacted": len(self.dead),
            "generation": self.generation,
            "merges": self.merges,
            "table_bytes": self.base.nbytes + merging.nbytes + self.delta.nbytes + 16 * len(self.pending),
        }

    def close(self) -> None:
        self.base, self.delta = Segment.empty(self.layout), DeltaRuns()
        self.merging = None
