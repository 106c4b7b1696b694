"""The packed 4-byte entries' C lookups: exact for batches of any length, and their reads asked for ahead.

What could break: a lookup loop that reads later keys' cells ahead (so that their cache misses overlap)
and gets the batch's edges wrong (fewer keys than it reads ahead, the last cell, a damaged cell among
the keys read ahead), and a compiler that drops those reads ahead without a word (GCC 12 with Python's
build flags did: the lookups then wait for every miss in turn, twice as slow at 1M pages).
"""

from __future__ import annotations

import platform
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.index import _probe
from scrapy_simhash.index.packed_buckets import PackedBuckets, prefix_bits, sort_form


def found_pairs(
    buckets: PackedBuckets, wanted: np.ndarray, native: bool | None = None
) -> set[tuple[int, int]]:
    at, ids = buckets.lookup(wanted, native=native)
    return set(zip(at.tolist(), ids.tolist(), strict=True))


@settings(max_examples=80, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 600),
    st.sampled_from([1, 4, 16, 32, 64]),
    st.sampled_from([0, 1, 2, 7, 8, 9, 15, 16, 17, 24, 33, 100]),
)
def test_each_key_of_a_batch_of_any_length_finds_exactly_the_entries_of_its_prefix(seed, n, bands, m) -> None:
    """Each band key finds exactly the pages whose key shares its prefix (no entry lost in the split
    between directory and tag), whatever the segment's size and the batch's length (shorter than, equal
    to and longer than the reads ahead), keys of the last cell too; C and numpy agree."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 2**64, size=(n, bands), dtype=np.uint64)
    keys[rng.random(keys.shape) < 0.3] = keys[0, 0]  # many pages under one key: long cells
    keys[-1, -1] = np.uint64(2**64 - 1)  # the last cell of the directory
    prefix = prefix_bits(bands)
    buckets = PackedBuckets.from_sort_form(sort_form(keys.copy(), 0, n, prefix), n, prefix)
    stored = keys.ravel()
    wanted = np.where(
        rng.random(m) < 0.6,
        stored[rng.integers(0, stored.size, m)],
        rng.integers(0, 2**64, m, dtype=np.uint64),
    ).astype(np.uint64)
    if m:
        wanted[-1] = np.uint64(2**64 - 1)
    shift = np.uint64(64 - prefix)
    want = {
        (j, page)
        for j, key in enumerate(wanted)
        for page in np.flatnonzero(((keys >> shift) == (key >> shift)).any(axis=1)).tolist()
    }
    assert found_pairs(buckets, wanted, native=True) == want
    assert found_pairs(buckets, wanted, native=False) == want
    # renumbered for a larger segment (a merge), every entry is kept; C and numpy write the same
    form = buckets.sort_form(4 * n + 3)
    assert np.array_equal(form, buckets.sort_form(4 * n + 3, native=False))
    assert found_pairs(PackedBuckets.from_sort_form(np.sort(form), 4 * n + 3, prefix), wanted) == want


@pytest.mark.parametrize("damaged_key", [0, 5, 8, 9, 16, 17, 30])
def test_a_damaged_cell_among_the_keys_read_ahead_raises_and_reads_nothing_past_it(damaged_key) -> None:
    """The reads ahead take a cell's offsets before its own lookup checks them: a cell pointing past
    the entries, read ahead or not, still ends in ValueError, never in a read past the arrays."""
    rng = np.random.default_rng(damaged_key)
    keys = rng.integers(0, 2**64, size=(300, 32), dtype=np.uint64)
    buckets = PackedBuckets.from_sort_form(sort_form(keys, 0, 300, prefix_bits(32)), 300, prefix_bits(32))
    wanted = keys[rng.integers(0, 300, 40), 0].copy()
    cell = int((wanted[damaged_key] >> np.uint64(64 - buckets.prefix)) >> np.uint64(buckets.tag_bits))
    directory = np.array(buckets.directory)
    assert cell + 2 < directory.size  # not the last cell: the directory's ends still add up
    directory[cell + 1] = np.iinfo(directory.dtype).max  # this cell ends far past the entries
    healthy = [k for k in range(40) if k != damaged_key]
    cells = (wanted >> np.uint64(64 - buckets.prefix)) >> np.uint64(buckets.tag_bits)
    healthy = [k for k in healthy if int(cells[k]) not in (cell, cell + 1)]
    damaged = PackedBuckets(buckets.entries, directory, buckets.pages, buckets.prefix)
    entries, _, dsize, prefix, id_bits = damaged.native_args()
    with pytest.raises(ValueError, match="does not fit"):
        _probe.packed_lookup(entries, directory, dsize, prefix, id_bits, wanted)
    # the keys of healthy cells still find what they found before the damage
    assert found_pairs(damaged, wanted[healthy]) == found_pairs(buckets, wanted[healthy])


def _prefetches_by_function(library: str) -> dict[str, int]:
    """Prefetch instructions in each function of ``library``'s code (0 for a function without)."""
    listing = subprocess.run(["objdump", "-d", "--no-show-raw-insn", library], capture_output=True, text=True)
    counts: dict[str, int] = {}
    function = ""
    for line in listing.stdout.splitlines():
        if line.endswith(">:"):
            function = line.split("<", 1)[1][:-2]
            counts.setdefault(function, 0)
        elif "prefetch" in line.split("#")[0]:
            counts[function] += 1
    return counts


@pytest.mark.skipif(platform.machine() != "x86_64" or not shutil.which("objdump"), reason="reads x86-64 code")
def test_the_built_packed_lookups_ask_for_their_reads_ahead() -> None:
    """The machine code of the packed lookups holds prefetch instructions for both reads of a key (the
    directory's offsets and the cell's entries), however the compiler treats a prefetch hint."""
    counts = _prefetches_by_function(_probe.__file__)
    packed = {name: count for name, count in counts.items() if name.startswith("packed_")}
    if not packed:
        pytest.skip("the extension's code names none of its own functions (stripped)")
    # the directory read ahead, and the cell's first and last entries
    assert sum(packed.values()) >= 3, f"prefetches by function: {counts}"
    # the 8-byte buckets' lookups (the in-memory LSH runs): the directory and the entries read ahead
    assert sum(c for name, c in counts.items() if name.startswith("bucket_")) >= 2, counts


def test_a_table_entry_naming_a_row_past_the_fingerprints_raises_in_every_probe() -> None:
    """The single-query probes (C, over the packed base and over a segment) and the batch probe share
    the end of a probe (distance, each row once): a row past the fingerprints is damage, not a hit."""
    from scrapy_simhash.index.tables.layouts import resolve
    from scrapy_simhash.index.tables.packed_tables import PackedTables
    from scrapy_simhash.index.tables.tables import Segment

    layout = resolve(None, 3)
    hashes = np.random.default_rng(9).integers(1, 2**64, size=300, dtype=np.uint64)
    segment = Segment.build(layout, hashes, np.arange(300, dtype=np.int64))
    base = PackedTables.from_segment(layout, segment)
    query = int(hashes[-1])  # row 299, past the 200 fingerprints kept below
    assert [(s, d) for s, _, d in base.probe_one(layout, query, 3)] == [(299, 0)]
    short = PackedTables(base.buckets, hashes[:200], np.arange(200, dtype=np.int64))
    with pytest.raises(ValueError, match=r"does not fit|past the fingerprints"):
        short.probe_one(layout, query, 3)
    q = np.array([query], dtype=np.uint64)
    with pytest.raises(ValueError, match="past the fingerprints"):
        short.probe(layout, q, layout.combined_keys(q), 3)
    cut = Segment(segment.keys, segment.rows, hashes[:200], np.arange(200, dtype=np.int64))
    with pytest.raises(ValueError, match="out of range"):
        cut.probe_one(layout, query, 3)
