"""A merge streams the next generation into its files a slice at a time (index/array_files.py,
PackedBuckets.merged_forms): the files are exactly what the whole arrays would have been, whatever the
slice size, and the merge's heap does not grow with the generation it rewrites."""

from __future__ import annotations

import itertools
import tracemalloc
import zlib
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.index import array_files, open_index
from scrapy_simhash.index.array_files import GenerationFiles, MemoryParts
from scrapy_simhash.index.packed_buckets import BucketParts, PackedBuckets, id_bits, sort_form_of
from scrapy_simhash.index.sorted_runs import merge_sorted


def test_a_part_written_in_slices_reads_back_whole_with_its_size_and_crc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """... and its pages go to the disk as it is written, not all at its fsync (which would make the
    writers' commits wait for gigabytes)."""
    ranges: list[tuple[int, int, int]] = []
    real = array_files.SYNC_FILE_RANGE
    assert real is not None, "Linux's sync_file_range was not found"

    def recorded(fd: int, offset: int, length: int, flags: int) -> int:
        ranges.append((offset, length, flags))
        return real(fd, offset, length, flags)

    monkeypatch.setattr(array_files, "SYNC_FILE_RANGE", recorded)
    monkeypatch.setattr(array_files, "WRITEBACK_BYTES", 1000)
    files = GenerationFiles(tmp_path, "tables-000007")
    values = np.arange(1000, dtype=np.uint32) * 7
    files.put_slices("entries", np.dtype(np.uint32), 1000, (values[i : i + 333] for i in range(0, 1000, 333)))
    started = [(offset, length) for offset, length, flags in ranges if flags == 2]  # SYNC_FILE_RANGE_WRITE
    assert len(started) >= 3 and started[0][0] == 0  # every ~1000 bytes, each range after the last
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(started))
    files.put("empty", np.zeros(0, np.int64))
    path = tmp_path / "tables-000007.entries.npy"
    assert np.array_equal(np.load(path), values)
    entry = files.files["entries"]
    assert entry == {"name": path.name, "bytes": path.stat().st_size, "crc32": zlib.crc32(path.read_bytes())}
    assert np.load(tmp_path / "tables-000007.empty.npy").shape == (0,)


@pytest.mark.parametrize("given_count", [999, 1001])
def test_slices_that_do_not_add_up_to_the_count_announced_raise(tmp_path: Path, given_count: int) -> None:
    values = np.arange(1000, dtype=np.uint64)
    for parts in (GenerationFiles(tmp_path, "g"), MemoryParts()):
        with pytest.raises(ValueError, match="announced"):
            parts.put_slices("seqs", np.dtype(np.uint64), given_count, [values[:500], values[500:]])


def packed(
    rng: np.random.Generator, pages: int, per_page: int, prefix: int
) -> tuple[PackedBuckets, np.ndarray]:
    keys = rng.integers(0, 2**64, size=pages * per_page, dtype=np.uint64)
    if keys.size:
        keys[: keys.size // 4] = keys[0]  # a crowded cell
    ids = np.repeat(np.arange(pages, dtype=np.uint64), per_page)
    form = np.sort(sort_form_of(keys, ids, pages, prefix))
    return PackedBuckets.from_sort_form(form, pages, prefix), keys


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 300),
    st.integers(0, 200),
    st.sampled_from([32, 33, 34]),
    st.integers(1, 64),
    st.booleans(),
)
def test_merged_forms_in_any_slices_are_the_whole_merge(
    seed: int, pages: int, more: int, prefix: int, step: int, drop: bool
) -> None:
    """Slices of any size (one cell, a few, all), with ids renumbered or not: their concatenation is
    the sorted merge of the whole sort forms, and the entries and directory built from the slices
    are those built from the whole."""
    rng = np.random.default_rng(seed)
    per_page = 3
    old, old_keys = packed(rng, pages, per_page, prefix)
    renumber = None
    kept = pages
    if drop and pages:
        alive = rng.random(pages) < 0.7
        renumber = np.where(alive, np.cumsum(alive) - 1, -1)
        kept = int(alive.sum())
    total = kept + more
    bits = id_bits(total)
    # the old entries as they should be for the new segment: renumbered, then the fresh ones
    old_ids = np.repeat(np.arange(pages), per_page)
    if renumber is not None:
        keep = renumber[old_ids] >= 0
        whole_old = sort_form_of(old_keys[keep], renumber[old_ids[keep]].astype(np.uint64), total, prefix)
    else:
        whole_old = sort_form_of(old_keys, old_ids.astype(np.uint64), total, prefix)
    new_keys = rng.integers(0, 2**64, size=more * per_page, dtype=np.uint64)
    new_ids = np.repeat(np.arange(kept, total, dtype=np.uint64), per_page)
    fresh = np.sort(sort_form_of(new_keys, new_ids, total, prefix))
    want = merge_sorted(np.sort(whole_old), fresh)
    slices = list(old.merged_forms(fresh, total, renumber, step=step))
    got = np.concatenate(slices) if slices else np.zeros(0, np.uint64)
    assert got.tolist() == want.tolist()
    if old.size > step + int(np.diff(old.directory.astype(np.int64)).max()):
        assert len(slices) > 1  # it did stream: a slice holds about ``step`` entries, whole cells
    parts = MemoryParts()
    BucketParts(want.size, total, prefix).put(parts, "e", "d", iter(slices))
    whole = PackedBuckets.from_sort_form(want, total, prefix)
    assert np.array_equal(parts.arrays["e"], whole.entries)
    assert (
        np.array_equal(parts.arrays["d"], whole.directory)
        and parts.arrays["d"].dtype == whole.directory.dtype
    )
    assert bits == whole.id_bits


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 400), st.data())
def test_the_c_and_numpy_sort_forms_of_any_cells_agree(seed: int, pages: int, data: st.DataObject) -> None:
    buckets, _ = packed(np.random.default_rng(seed), pages, 2, 33)
    cells = buckets.directory.shape[0] - 1
    first = data.draw(st.integers(0, cells))
    last = data.draw(st.integers(first, cells))
    wider = data.draw(st.integers(pages, pages * 8))
    native = buckets.sort_form_cells(first, last, wider, native=True)
    python = buckets.sort_form_cells(first, last, wider, native=False)
    assert native.tolist() == python.tolist()
    assert (
        buckets.sort_form(wider).tolist()[buckets.directory[first] : buckets.directory[last]]
        == native.tolist()
    )


def test_a_merge_heap_does_not_grow_with_the_generation_it_rewrites(tmp_path: Path) -> None:
    """A compaction of a few new pages into 120k stored ones: the merge's heap (numpy's and Python's
    allocations, traced) stays a small fraction of the generation's sort values, which the merge
    built whole before it streamed (16 tables and 32 bands x 8 bytes a page: ~46 MB here)."""
    rng = np.random.default_rng(11)
    n = 120_000
    path = tmp_path / "ix"
    with open_index(path) as index:
        for start in range(0, n, 20_000):
            sketches = rng.integers(0, 2**32, size=(20_000, 128), dtype=np.uint32)
            hashes = rng.integers(1, 2**64, size=20_000, dtype=np.uint64).tolist()
            index.add_many([(h, f"k{start + i}", None, sketches[i]) for i, h in enumerate(hashes)])
        index.compact()
        extra = rng.integers(0, 2**32, size=(200, 128), dtype=np.uint32)
        index.add_many([(i + 1, f"new{i}", None, extra[i]) for i in range(200)])
        whole = n * (16 + 32) * 8
        with mock.patch.object(array_files, "SLICE_ENTRIES", 1 << 15):
            tracemalloc.start()
            try:
                index.compact()
                _, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
        assert peak < whole / 4, f"the merge's heap peaked at {peak:,} bytes for {whole:,} of sort values"
        assert [m.key for m in index.query(1, sketch=extra[0])] == ["new0"]
        assert len(index) == n + 200
