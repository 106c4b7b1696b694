"""The embedded index writes its table generations in the background (index/embedded/generations.py):
a write that fills the delta starts a merge and returns, writes and queries go on while it runs, and
the switch to the new generation keeps every answer exact. Merges are made deterministic here by
blocking the file writer on an Event the test controls, or by running the recorded merges at chosen
moments; no clock is read."""

from __future__ import annotations

import errno
import random
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scrapy_simhash.index import SimhashIndex, open_index
from scrapy_simhash.index.embedded import generations
from scrapy_simhash.index.tables import manifest as table_files
from scrapy_simhash.index.tables.manifest import TablesInvalid, read_manifest

WAIT = 20.0  # seconds: only so that a broken test fails instead of hanging; never asserted


class BlockedWriter:
    """Replaces the generation's file writer: it waits for ``release`` before writing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.entered, self.release, self.finished = threading.Event(), threading.Event(), threading.Event()
        self.threads: list[str] = []
        real = table_files.write_files

        def write_files(*args: Any, **kwargs: Any) -> dict[str, Any]:
            self.threads.append(threading.current_thread().name)
            self.entered.set()
            self.release.wait(WAIT)
            try:
                return real(*args, **kwargs)
            finally:
                self.finished.set()

        monkeypatch.setattr(table_files, "write_files", write_files)


def rows(n: int, start: int = 0, seed: int = 0) -> list[tuple[int, str, dict[str, int]]]:
    rng = random.Random(seed)
    return [(rng.getrandbits(64) or 1, f"k{start + i}", {"i": start + i}) for i in range(n)]


def test_an_add_many_issued_while_a_generation_is_written_does_not_wait_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    writer = BlockedWriter(monkeypatch)
    path = tmp_path / "ix"
    first, second = rows(40, 0, seed=1), rows(40, 40, seed=2)
    with SimhashIndex(path, pending_max=4, delta_min=16) as index:
        index.add_many(first)  # fills the delta: a merge starts, and this call returns
        assert writer.entered.wait(WAIT), "no generation write was started"
        index.add_many(second)  # while the writer is still blocked
        assert not writer.finished.is_set(), "add_many waited for the generation write"
        assert writer.threads == ["scrapy-simhash-merge"]
        stats = index.stats()
        assert stats["merge_running"] == 1 and stats["merging"] > 0 and stats["merges"] == 0
        for h, key, meta in first + second:  # answers while the merge is under way: exact
            assert [(m.key, m.distance, dict(m.meta)) for m in index.query(h)] == [(key, 0, meta)]
        index.remove("k3")
        index.add(first[5][0] ^ 1, "k5", {"i": "again"})  # replaced: its old seq is in the merge
        writer.release.set()
        index.compact()  # waits for the running merge, then merges the rest
        stats = index.stats()
        assert stats["merge_running"] == 0 and stats["merges"] >= 2 and stats["merging"] == 0
        assert stats["base"] == len(index) == 79
    with SimhashIndex(path, read_only=True) as index:
        assert index.get("k3") is None and index.get("k5").simhash == first[5][0] ^ 1
        for h, key, _ in first + second:
            want = [] if key in ("k3", "k5") else [key]
            assert [m.key for m in index.query(h, k=0)] == want


class Recorded:
    """Merges recorded instead of started: the test runs them when it chooses."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.jobs: list[generations.MergeJob] = []
        monkeypatch.setattr(generations, "start_thread", self.jobs.append)

    def run(self) -> None:
        for job in self.jobs:
            job.run()
        self.jobs.clear()


def sketch_of(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, size=128, dtype=np.uint32)


def test_writes_during_a_merge_are_honoured_after_the_switch_and_after_reopening(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Removed, replaced and re-sketched pages of the merged range stay so in the new generation
    (dead seqs re-applied, their tombstones kept), in memory and at the next open."""
    merges = Recorded(monkeypatch)
    path = tmp_path / "ix"
    with open_index(path, pending_max=2, delta_min=8) as index:
        index.add_many([(i + 1, f"k{i}", None, sketch_of(i)) for i in range(8)])
        assert len(merges.jobs) == 1 and index.simhashes.stats()["merging"] == 8
        index.remove("k1")  # in the merging layer
        index.add(0xFFFF, "k2", None, sketch=sketch_of(102))  # replaced, new sketch
        index.add(3, "k4", None)  # replaced by a page without sketch
        index.add_many([(i + 100, f"n{i}", None, sketch_of(200 + i)) for i in range(3)])
        merges.run()
        index.add(7777, "late", None, sketch=sketch_of(300))  # this write switches
        stats = index.simhashes.stats()
        assert stats["merges"] == 1 and stats["merging"] == 0 and stats["merge_running"] == 0

        def check(ix: Any) -> None:
            far = 0xF0F0F0F0F0F0F0F0  # far from every stored simhash: matches by sketch alone
            assert ix.query(far, sketch=sketch_of(1)) == []  # removed
            assert [m.key for m in ix.query(far, sketch=sketch_of(102))] == ["k2"]
            assert ix.query(far, sketch=sketch_of(2)) == []  # k2's old sketch
            assert ix.query(far, sketch=sketch_of(4)) == []  # k4 lost its sketch
            assert [m.key for m in ix.query(far, sketch=sketch_of(0))] == ["k0"]
            assert [m.key for m in ix.query(far, sketch=sketch_of(201))] == ["n1"]
            assert [m.key for m in ix.query(far, sketch=sketch_of(300))] == ["late"]
            assert ix.get("k4").simhash == 3 and ix.sketch("k4") is None and ix.sketch("k1") is None
            assert len(ix) == 11

        check(index)
    with open_index(path) as index:
        check(index)


def test_a_failed_merge_loses_nothing_is_counted_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(generations, "start_thread", generations.MergeJob.run)  # at once, in this thread
    real = table_files.write_files
    failures = iter([OSError(errno.ENOSPC, "No space left on device"), TablesInvalid("read back")])

    def failing(*args: Any, **kwargs: Any) -> dict[str, Any]:
        problem = next(failures, None)
        if isinstance(problem, OSError):
            raise problem
        written = real(*args, **kwargs)
        if problem is not None:  # the files are written but do not read back
            monkeypatch.setattr(table_files, "load_generation", unreadable)
        return written

    real_load = table_files.load_generation

    def unreadable(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(table_files, "load_generation", real_load)
        raise TablesInvalid("tables-000001.keys.npy fails its CRC-32 check")

    monkeypatch.setattr(table_files, "write_files", failing)
    path = tmp_path / "ix"
    data = rows(300, seed=3)
    with SimhashIndex(path, pending_max=4, delta_min=16) as index:
        for h, key, meta in data:
            index.add(h, key, meta)
            assert [m.key for m in index.query(h)] == [key]
        stats = index.stats()
        assert stats["merge_failures"] == 2 and stats["merges"] >= 1 and len(index) == 300
        assert "No space left on device" in caplog.text and "cannot be read back" in caplog.text
    with SimhashIndex(path) as index:
        assert index.stats()["rebuilds"] == 0 and len(index) == 300
        for h, key, _ in data:
            assert [m.key for m in index.query(h)] == [key]
    names = {p.name.split(".")[0] for p in path.glob("tables-*.npy")}
    assert names == {f"tables-{read_manifest(path)['generation']:06d}"}  # no failed attempt left


def test_compact_after_a_failed_merge_merges_its_layer_and_the_delta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(generations, "start_thread", generations.MergeJob.run)
    real = table_files.write_files
    calls: list[int] = []

    def first_fails(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(table_files, "write_files", first_fails)
    with SimhashIndex(tmp_path / "ix", pending_max=4, delta_min=16) as index:
        index.add_many(rows(20))  # a merge starts, and fails
        index.add_many(rows(5, 20, seed=9))  # the failure is seen; the retry is not due yet
        stats = index.stats()
        assert stats["merge_failures"] == 1 and stats["merging"] == 20
        assert stats["delta"] + stats["pending"] == 5
        index.compact()
        stats = index.stats()
        assert (stats["base"], stats["merging"], stats["delta"], stats["pending"]) == (25, 0, 0, 0)


def test_close_and_compact_finish_a_running_merge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    merges = Recorded(monkeypatch)
    path = tmp_path / "ix"
    with SimhashIndex(path, pending_max=4, delta_min=16) as index:
        index.add_many(rows(20))
        assert len(merges.jobs) == 1 and read_manifest(path) is None
        index.compact()  # waits for (here: runs) the merge, then merges what came after
        assert read_manifest(path)["count"] == 20 and all(job.done() for job in merges.jobs)
        merges.jobs.clear()
        index.add_many(rows(30, 20, seed=5))
        assert len(merges.jobs) == 1
    manifest = read_manifest(path)  # close() finished the merge: the manifest names it, whole
    assert manifest["count"] == 50 and manifest["max_seq"] == 50
    with SimhashIndex(path) as index:
        assert index.stats()["base"] == 50 and index.stats()["delta"] == 0


def test_a_full_delta_while_a_merge_runs_waits_only_past_the_hard_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    merges = Recorded(monkeypatch)
    with SimhashIndex(tmp_path / "ix", pending_max=1, delta_min=10) as index:
        for i, (h, key, meta) in enumerate(rows(60, seed=7)):
            index.add(h, key, meta)
            if i == 9:
                assert len(merges.jobs) == 1
        # the delta filled again (10 rows) and again: writes went on into memory up to 4x its limit,
        # and the write that reached it ran the merge (here, in its thread) and started the next
        stats = index.stats()
        assert stats["merges"] == 1 and [job.done() for job in merges.jobs] == [True, False]
        assert stats["merging"] == generations.HARD_CAP * 10 and stats["base"] == 10
        assert stats["merge_waits"] == 1  # the one write that waited


def test_the_merge_thread_never_maps_with_map_populate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python's mmap() holds the interpreter's lock while the kernel populates the mapping (seconds
    for a large generation): the merge's thread maps without it and faults the pages in itself."""
    import mmap

    populate = getattr(mmap, "MAP_POPULATE", 0)
    if not populate:
        pytest.skip("no MAP_POPULATE on this platform")
    real, calls = mmap.mmap, []

    def recording(*args: Any, **kwargs: Any) -> mmap.mmap:
        calls.append((threading.current_thread().name, bool(kwargs.get("flags", 0) & populate)))
        return real(*args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", recording)
    with open_index(tmp_path / "ix", pending_max=4, delta_min=16) as index:
        index.add_many([(i + 1, f"k{i}", None, sketch_of(i)) for i in range(40)])
    merged = [populated for thread, populated in calls if thread == "scrapy-simhash-merge"]
    assert merged and not any(merged)
    with open_index(tmp_path / "ix") as index:  # nor does an open (linear): a thread faults them in
        assert len(index) == 40
    assert calls and not any(populated for _, populated in calls)


def test_the_delta_never_outgrows_delta_max_whatever_the_base(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quarter of a large base would be more heap than the machine has: past ``delta_max`` pages a
    merge starts whatever the base's size, and while one runs, writes wait at twice ``delta_max``
    (not at 4 times the limit)."""
    monkeypatch.setattr(generations, "start_thread", generations.MergeJob.run)  # merges at once
    data = rows(230, seed=9)
    with SimhashIndex(tmp_path / "ix", pending_max=1, delta_min=4, delta_max=8) as index:
        deltas = []
        for h, key, meta in data[:200]:
            index.add(h, key, meta)
            deltas.append(index.stats()["delta"])
        stats = index.stats()
        assert stats["base"] > 4 * 8  # a quarter of it would be more than delta_max
        assert max(deltas) == 7 and stats["merges"] >= 200 // 8  # a merge at every 8th page
        merges = Recorded(monkeypatch)  # from here on, merges wait until the test runs them
        for h, key, meta in data[200:]:
            index.add(h, key, meta)
        # the delta froze at 8 pages, filled again to twice delta_max (16), and the write that
        # reached it ran the merge in its thread (one wait) and froze the next 16
        stats = index.stats()
        assert stats["merge_waits"] == 1 and stats["merging"] == 16 and stats["delta"] < 16
        assert [job.done() for job in merges.jobs] == [True, False]
        merges.run()
        index.compact()
        assert len(index) == 230
        for h, key, _ in data:
            assert key in [m.key for m in index.query(h)]


def test_a_disk_that_fills_in_the_middle_of_a_streamed_merge_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The merge streams its parts into files one after the other: the disk fills after some were
    written. The index answers from memory, the retry writes the generation whole, and no file of
    the failed attempt is left."""
    from scrapy_simhash.index import array_files

    monkeypatch.setattr(generations, "start_thread", generations.MergeJob.run)
    real = array_files.GenerationFiles.put_slices
    written: list[str] = []

    def fills_up(self: Any, part: str, *args: Any) -> None:
        written.append(part)
        if len(written) == 5:  # the tables' four parts are written: the sketches' LSH fails
            real(self, part, *args)
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, part, *args)

    monkeypatch.setattr(array_files.GenerationFiles, "put_slices", fills_up)
    path = tmp_path / "ix"
    data = [(i + 1, f"k{i}", None, sketch_of(i)) for i in range(40)]
    with open_index(path, pending_max=4, delta_min=16) as index:
        index.add_many(data[:20])  # fills the delta: the merge runs, and fails
        assert index.simhashes.stats()["merge_failures"] == 1
        assert {p.name for p in path.glob("tables-*.npy")} == set()  # the failed attempt's files
        far = 0xF0F0F0F0F0F0F0F0
        assert [m.key for m in index.query(far, sketch=sketch_of(3))] == ["k3"]
        index.add_many(data[20:])
        index.compact()
        assert index.simhashes.stats()["base"] == 40
    with open_index(path) as index:
        for h, key, _, sketch in data:
            assert [m.key for m in index.query(h, sketch=sketch)] == [key]
    generation = read_manifest(path)["generation"]
    assert {p.name.split(".")[0] for p in path.glob("tables-*.npy")} == {f"tables-{generation:06d}"}


def test_the_write_that_switches_generations_does_not_wait_for_the_old_files_to_be_unlinked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unlinking a large generation takes the kernel seconds (~0.2 s a GB): a thread does it, the
    switching write returns at once, and close() waits for it."""
    unlinking, release = threading.Event(), threading.Event()
    real = table_files.remove_older

    def slow(directory: Path, below: int) -> None:
        unlinking.set()
        release.wait(WAIT)
        real(directory, below)

    monkeypatch.setattr(table_files, "remove_older", slow)
    merges = Recorded(monkeypatch)
    path = tmp_path / "ix"
    index = SimhashIndex(path, pending_max=4, delta_min=16)
    index.compact()  # generation 1 (empty)
    index.add_many(rows(20))  # a merge into generation 2 is recorded
    merges.run()
    index.add(12345, "late", None)  # this write switches to generation 2 and returns
    assert read_manifest(path)["generation"] == 2
    assert unlinking.wait(WAIT), "the old generation was never deleted"
    assert any(p.name.startswith("tables-000001.") for p in path.glob("tables-*.npy"))  # not yet
    assert [m.key for m in index.query(12345)] == ["late"]
    release.set()
    index.close()
    assert {p.name.split(".")[0] for p in path.glob("tables-*.npy")} == {"tables-000002"}
