"""The embedded index's table generations, written in the background: no write waits for a rewrite.

When the in-memory delta outgrows its limit (:meth:`~..tables.layers.Layers.delta_full`), the write
that crossed it *starts* a merge and returns. The delta, and the sketch column's recent level, are
frozen as the read-only *merging* layer, which every query probes beside the base and the fresh
delta that writes go on into. A thread merges base + merging, writes the next generation's files
(fsynced), and maps them back, checked. The switch happens under the index's lock at the next write
(or ``compact()``, ``close()``, ``stats()``), in a few small writes: the manifest replaced (fsynced,
renamed), the base swapped, the tombstones cleared up to the merged rows, but for the rows removed,
replaced or given another sketch while the merge ran, which stay dead in the new base (and
tombstoned). The thread reads only what no write changes: segments are immutable, and the removal
marks it reads are copies.

One merge at a time. If the delta fills again while one runs, writes go on into memory; only past
:data:`HARD_CAP` times its limit (or twice ``delta_max``: :meth:`~..tables.layers.Layers.hard_limit`)
does a write wait for the running merge (a disk slower than the writers). A merge that fails (disk
full, files that do not read back) loses nothing: the database is
the truth and the merging layer keeps answering; the failure is logged, counted
(``stats()["merge_failures"]``) and the merge retried after a number of writes that doubles with each
failure in a row (at most :data:`RETRY_MAX`). A crash during a merge leaves its files unnamed by the
manifest: garbage, deleted at the next open.

Why not tiered merges (several on-disk segments merged small into small): the base rewrite is
linear (sorted insertion, no re-sort), and the delta it waits for grows with the base (a quarter of
it), so the rewrite in the background keeps up with the writers at every size; more segments would
cost every query more probes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..array_files import Parts
from ..lsh.lsh_segment import PARTS as LSH_PARTS
from ..lsh.lsh_segment import LSHSegment
from ..packed_buckets import ENTRY_FORMAT
from ..tables import manifest as table_files
from ..tables.delta_runs import DeltaRuns
from ..tables.layers import Layers
from ..tables.manifest import TablesInvalid
from ..tables.packed_tables import PackedTables
from ..tables.tables import Segment

logger = logging.getLogger(__name__)

HARD_CAP = 4
"""While a merge runs the delta may grow to this many times its limit; past it a write waits."""
RETRY_MAX = 1024
"""After failures in a row, the next merge is tried after at most this many writes."""


class MergeFailed(Exception):
    """A generation could not be written or read back (the reason says why)."""


class MergeJob:
    """One merge's work, run once: by its thread, or by whoever waits for it first."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self._work = work
        self._claim = threading.Lock()
        self._claimed = False
        self._done = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None

    def run(self) -> None:
        with self._claim:
            if self._claimed:
                return
            self._claimed = True
        try:
            self.result = self._work()
        except BaseException as exc:  # reported by the switch: a merge never kills a write
            self.error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def wait(self) -> None:
        self.run()  # not started yet (or never will be): run it here
        self._done.wait()


def start_thread(job: MergeJob) -> None:
    """Run ``job`` in a thread of its own (tests replace this to run merges at chosen moments)."""
    threading.Thread(target=job.run, name="scrapy-simhash-merge", daemon=True).start()


@dataclass
class _Plan:
    """What a merge reads (all frozen when it started) and writes."""

    generation: int
    max_seq: int
    base: Segment | PackedTables
    merging: DeltaRuns
    dropped: np.ndarray
    info: dict[str, Any]
    column: Any
    lsh: Callable[[Parts], dict[str, int]] | None
    job: MergeJob = field(init=False)


@dataclass
class _Written:
    manifest: dict[str, Any]
    base: PackedTables
    lsh: LSHSegment | None


def mapped_lsh(
    path: Path, manifest: dict[str, Any] | None, column: Any, verify: bool, background: bool = False
) -> LSHSegment | None:
    """The sketch LSH of the generation ``manifest`` names, memory-mapped, when it was written for
    ``column``'s parameters; None when it has none (written without a column) or it is damaged.
    ``background``: mapped by a merge's thread (:func:`~..tables.manifest.load_parts`)."""
    if manifest is None or not isinstance(manifest.get("lsh"), dict):
        return None
    info = manifest["lsh"]
    if any(info.get(name) != value for name, value in column.params.items()):
        return None
    if info.get("entries") != ENTRY_FORMAT or "lsh_filter" not in manifest["files"]:
        # 8-byte entries, or a copy of the sketches where the filter is now: a writer writes them again
        logger.info("index %s: the sketch LSH files have an earlier layout; reading the rows", path)
        return None
    try:
        arrays = table_files.load_parts(path, manifest, LSH_PARTS, verify=verify, background=background)
        if arrays is None:
            return None
        segment = LSHSegment.from_arrays(arrays, column.num_values, int(info["prefix_bits"]))
        if segment.seqs.size != info.get("count"):
            raise TablesInvalid(f"the LSH files hold {segment.seqs.size} pages, not {info.get('count')}")
        return segment
    except (TablesInvalid, ValueError, TypeError, KeyError) as exc:
        logger.warning("index %s: sketch LSH files invalid (%s); reading the rows", path, exc)
        return None


class Generations:
    """Starts, finishes and retries the merges of one writer's :class:`Layers` (its caller holds the
    index's lock for every call; the merge's thread touches none of this object's state)."""

    def __init__(self, path: Path, layers: Layers, store: Any, info: dict[str, Any], verify: bool) -> None:
        self.path, self.layers, self.store = path, layers, store
        self._info, self._verify = info, verify
        self.column: Any = None
        """The sketch column, whose LSH each generation carries (set when attached)."""
        self._plan: _Plan | None = None
        self._removed: set[int] = set()
        self._resketched: set[int] = set()
        """Rows of the merged range removed (or replaced) / given another sketch since it froze."""
        self.failures = 0
        self.waits = 0
        """Writes that waited for a running merge (the delta at :data:`HARD_CAP` times its limit)."""
        self._in_a_row = 0
        self._retry_in = 0
        self._unlinking: threading.Thread | None = None
        """Deletes the generations a switch left behind (:meth:`_remove_older`)."""

    # -- what the index tells --------------------------------------------------------------------
    def changed(self, removed: Iterable[int] = (), resketched: Iterable[int] = ()) -> None:
        """Rows removed or replaced, or given another sketch (after their commit)."""
        if self.layers.merging is None:
            return
        upto = self.layers.merging_max_seq
        self._removed.update(s for s in removed if s <= upto)
        self._resketched.update(s for s in resketched if s <= upto)

    def after_write(self) -> None:
        """Finish a merge that is done; start one when the delta is full (or a retry is due)."""
        self.poll()
        layers = self.layers
        if self._plan is not None:
            if len(layers.delta) >= layers.hard_limit(HARD_CAP):
                self.waits += 1
                self.wait()  # the disk is slower than the writers: bounded memory
                self.after_write()
            return
        if layers.merging is not None:  # a failed merge
            self._retry_in -= 1
            if self._retry_in <= 0 or len(layers.delta) >= layers.hard_limit(HARD_CAP):
                self.start()
        elif layers.delta_full():
            self.start()

    @property
    def running(self) -> bool:
        return self._plan is not None

    # -- merges ------------------------------------------------------------------------------------
    def start(self, run: Callable[[MergeJob], None] | None = None) -> None:
        """Freeze the delta (unless a failed merge's is still frozen) and start writing base + merging
        as the next generation (``run``: how; default a thread)."""
        assert self._plan is None, "one merge at a time"
        layers, column = self.layers, self.column
        if layers.merging is None:
            layers.freeze(self.store.next_seq - 1)
        plan = _Plan(
            generation=layers.generation + 1,
            max_seq=layers.merging_max_seq,
            base=layers.base,
            merging=layers.merging,  # type: ignore[arg-type]
            dropped=layers.frozen_dead(),
            info=dict(self._info),
            column=column,
            lsh=column.freeze() if column is not None else None,
        )
        plan.job = MergeJob(lambda: self._write(plan))
        self._plan = plan
        (run or start_thread)(plan.job)

    def _write(self, plan: _Plan) -> _Written:
        """The merge's work (in its thread): the files of base + merging, streamed from the mapped
        base and the frozen layer (:mod:`..array_files`), then mapped back."""
        layout = self.layers.layout
        dropped = plan.dropped if plan.dropped.size else None
        base = plan.base
        # no generation yet: an empty in-memory segment
        packed = base if isinstance(base, PackedTables) else PackedTables.from_segment(layout, base)

        def put(parts: Parts) -> dict[str, Any]:
            fields: dict[str, Any] = packed.write_merged(parts, layout, plan.merging.whole(layout), dropped)
            if plan.lsh is not None:
                lsh = plan.lsh(parts)
                fields["lsh"] = {**plan.column.params, **lsh, "entries": ENTRY_FORMAT}
            return fields

        info: dict[str, Any] = {"max_seq": plan.max_seq, **plan.info}
        manifest = table_files.write_files(self.path, plan.generation, layout, info, put)
        try:
            written = table_files.load_generation(self.path, manifest, layout, verify=False, background=True)
        except TablesInvalid as exc:
            raise MergeFailed(f"the table files just written cannot be read back ({exc})") from None
        lsh = None
        if plan.column is not None:
            lsh = mapped_lsh(self.path, manifest, plan.column, self._verify, background=True)
            if lsh is None:
                raise MergeFailed("the sketches' LSH files just written cannot be read back")
        return _Written(manifest, written, lsh)

    def poll(self) -> None:
        """Switch to the merge's generation if it is written (a failure is counted)."""
        if self._plan is not None and self._plan.job.done():
            self._finish()

    def wait(self) -> BaseException | None:
        """Wait for the running merge, and switch to its generation; its failure, if it failed."""
        if self._plan is None:
            return None
        self._plan.job.wait()
        return self._finish()

    def merge_now(self, force: bool = False) -> None:
        """Everything merged into a new generation before returning (open, attach, compact; ``force``:
        even when the tables have nothing new, to write the sketches' LSH); the failure raised."""
        self.wait()
        while force or self.layers.dirty():  # twice after a failed merge: its layer, then the delta
            force = False
            self.start(run=MergeJob.run)
            error = self.wait()
            if error is not None:
                raise error

    def _finish(self) -> BaseException | None:
        plan = self._plan
        assert plan is not None and plan.job.done()
        self._plan = None
        if plan.job.error is not None:
            self.failures += 1
            self._in_a_row += 1
            self._retry_in = min(2**self._in_a_row, RETRY_MAX)
            logger.error(
                "index %s: writing table generation %d failed (%s: %s); the index answers from memory "
                "and the database, and retries in %d writes",
                self.path,
                plan.generation,
                type(plan.job.error).__name__,
                plan.job.error,
                self._retry_in,
            )
            table_files.remove_stale(self.path, keep=self.layers.generation or None)
            return plan.job.error
        written: _Written = plan.job.result
        self._switch(plan, written)
        self._in_a_row = 0
        return None

    def _switch(self, plan: _Plan, written: _Written) -> None:
        """Under the index's lock, a few small writes: the manifest, the tombstones, the old files."""
        table_files.switch_manifest(self.path, written.manifest)
        self.layers.switch(written.manifest, written.base, plan.dropped)
        self.store.clear_tombstones(plan.max_seq, self._removed, self._resketched)
        if plan.column is not None and written.lsh is not None:
            plan.column.switch(written.lsh, self._removed | self._resketched)
        self._removed, self._resketched = set(), set()
        self._remove_older(plan.generation)

    def _remove_older(self, generation: int) -> None:
        """Delete the generations before ``generation`` in a thread: unlinking a large generation's
        files takes the kernel about 0.2 s a GB (3 s at 30M pages), which the write that switched
        would otherwise wait for, holding the index's lock."""
        before = self._unlinking

        def unlink() -> None:
            if before is not None:
                before.join()
            table_files.remove_older(self.path, generation)

        self._unlinking = threading.Thread(target=unlink, name="scrapy-simhash-unlink", daemon=True)
        self._unlinking.start()

    def close(self) -> None:
        """Wait for the deletion of old generations (a crash before it ends leaves files that the
        next open deletes)."""
        if self._unlinking is not None:
            self._unlinking.join()
            self._unlinking = None

    def stats(self) -> dict[str, int]:
        return {
            "merge_running": int(self._plan is not None),
            "merge_failures": self.failures,
            "merge_waits": self.waits,
        }
