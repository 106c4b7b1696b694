"""A write into the embedded index costs its batch, not the layer it lands in.

The simhash tables' delta and the MinHash-LSH's recent buckets keep each batch as a sorted run and
merge runs geometrically (index/sorted_runs.py). What is measured here is work, never time: the
entries every merge writes, recorded by wrapping the merge functions, must stay bounded by the run
cap while the layer grows far past it; and answers over many runs stay exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.index import sorted_runs
from scrapy_simhash.index.lsh import bucket_runs
from scrapy_simhash.index.lsh.lsh import MinHashLSH
from scrapy_simhash.index.tables.layers import Layers
from scrapy_simhash.index.tables.layouts import resolve
from scrapy_simhash.index.tables.tables import Segment, brute_force

BANDS, ROWS, NV = 32, 4, 128


def test_merge_sorted_equals_a_sort() -> None:
    rng = np.random.default_rng(3)
    for dtype, n, m in ((np.uint64, 1000, 300), (np.uint32, 50, 2000), (np.uint64, 0, 5), (np.uint32, 7, 0)):
        big = np.sort(rng.integers(0, 64, size=n).astype(dtype))  # many equal keys
        new = np.sort(rng.integers(0, 64, size=m).astype(dtype))
        merged = sorted_runs.merge_sorted(big, new)
        assert merged.dtype == dtype and np.array_equal(merged, np.sort(np.concatenate([big, new])))


@given(
    st.lists(st.integers(0, 40), max_size=60),
    st.lists(st.integers(0, 40), max_size=60),
    st.sampled_from([np.uint32, np.uint64]),
    st.integers(0, 1000),
)
@settings(max_examples=200, deadline=None)
def test_the_c_merge_equals_numpys(a: list[int], b: list[int], dtype: Any, offset: int) -> None:
    """Keys and their values (``b``'s rows renumbered), ties ``a``'s first: alike in C and numpy."""
    keys_a, keys_b = np.sort(np.array(a, dtype=dtype)), np.sort(np.array(b, dtype=dtype))
    vals_a = np.arange(len(a), dtype=np.uint32)
    vals_b = np.arange(len(b), dtype=np.uint32)
    native = sorted_runs.merge_with_values(keys_a, keys_b, vals_a, vals_b, offset)
    saved = sorted_runs._native_merge
    sorted_runs._native_merge = None
    try:
        numpy = sorted_runs.merge_with_values(keys_a, keys_b, vals_a, vals_b, offset)
    finally:
        sorted_runs._native_merge = saved
    assert saved is not None  # built by make install
    want_keys = np.concatenate([keys_a, keys_b])
    want_vals = np.concatenate([vals_a, vals_b + np.uint32(offset)])
    order = np.argsort(want_keys, kind="stable")  # stable: ties keep a's first
    for keys, vals in (native, numpy):
        assert keys.dtype == dtype and np.array_equal(keys, want_keys[order])
        assert vals is not None and np.array_equal(vals, want_vals[order])


@given(st.lists(st.integers(1, 50), min_size=1, max_size=40), st.integers(1, 200))
@settings(max_examples=200, deadline=None)
def test_runs_stay_within_the_cap_and_few(batches: list[int], cap: int) -> None:
    sizes: list[int] = []
    for size in batches:
        sizes.append(size)
        k = sorted_runs.runs_to_merge(sizes, cap)
        if k > 1:
            assert sum(sizes[-k:]) <= cap
            sizes[-k:] = [sum(sizes[-k:])]
    assert sum(sizes) == sum(batches)
    small = [s for s in sizes if s * 2 <= cap]  # runs that could still merge grow towards the oldest
    assert len(small) <= 2 * max(1, max(batches)).bit_length() + 2 * (cap.bit_length() + 1)


def recording(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, size: Any) -> list[int]:
    """The size of every result of ``module.name`` (a merge), in order."""
    sizes: list[int] = []
    real = getattr(module, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        sizes.append(size(out))
        return out

    monkeypatch.setattr(module, name, wrapped)
    return sizes


def test_a_batch_into_the_recent_buckets_merges_at_most_the_run_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: each batch was merged into one sorted array of every recent entry (copied whole)."""
    merged = recording(monkeypatch, bucket_runs, "merge_sorted", lambda out: out.shape[0])
    lsh = MinHashLSH(0.5, NV, BANDS, ROWS, value_bits=8)
    batch, cap = 100, 8 * 100 * BANDS
    lsh.RUN_CAP = cap
    rng = np.random.default_rng(1)
    sketches = rng.integers(0, 256, size=(60 * batch, NV), dtype=np.uint32)
    for b in range(60):
        part = sketches[b * batch : (b + 1) * batch]
        lsh.add_many([(f"k{b * batch + i}", s) for i, s in enumerate(part)])
    assert lsh.stats()["bytes_buckets"] >= 60 * batch * BANDS * 8  # the layer grew far past the cap
    assert merged and max(merged) <= cap
    assert lsh.stats()["runs"] <= 60 * batch * BANDS // cap + 5
    for i in range(0, 60 * batch, 997):  # every page found by its own sketch, over all the runs
        assert lsh.query(sketches[i])[0] == (f"k{i}", 1.0)
    lsh.compact()
    assert lsh.stats()["runs"] == 0 and lsh.query(sketches[5])[0] == ("k5", 1.0)


def test_a_batch_into_the_tables_delta_merges_at_most_the_run_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: each pending buffer was merged into the whole delta (copied whole)."""
    merged = recording(monkeypatch, Segment, "merged", len)
    layout = resolve(None, 3)
    layers = Layers(tmp_path, layout, pending_max=50, delta_min=1 << 30)
    layers.delta.cap = 400  # fingerprints
    rng = np.random.default_rng(2)
    hashes = rng.integers(1, 2**64, size=6000, dtype=np.uint64)
    for start in range(0, hashes.size, 50):
        part = hashes[start : start + 50]
        layers.inserted(part.tolist(), list(range(start + 1, start + 1 + part.size)), [])
    assert len(layers.delta) == 6000 and layers.stats()["delta"] == 6000
    assert merged and max(merged) <= 400
    seqs = np.arange(1, 6001, dtype=np.int64)
    queries = hashes[::37] ^ np.uint64(0b101)
    got = layers.probe(queries, 3)
    want = brute_force(hashes, seqs, queries, 3)
    assert sorted(zip(got.query.tolist(), got.seq.tolist(), strict=True)) == sorted(
        zip(want.query.tolist(), want.seq.tolist(), strict=True)
    )
    for q in range(0, queries.size, 5):
        one = layers.probe_one(int(queries[q]), 3)
        assert sorted(s for s, _, _ in one) == sorted(want.seq[want.query == q].tolist())


def test_a_batch_of_plain_sketches_is_stored_as_one_given_one_by_one(tmp_path: Path) -> None:
    """add_many encodes a batch of uint32 arrays in one operation and fills the LSH from one matrix:
    the same rows, sketches and answers as sketches given as lists (one at a time); one bad sketch
    stores nothing."""
    from scrapy_simhash.index import open_index

    rng = np.random.default_rng(4)
    sketches = rng.integers(0, 2**32, size=(150, NV), dtype=np.uint32)
    items = [(i + 1, f"k{i}", {"i": i}) for i in range(150)]
    with open_index(tmp_path / "fast") as fast, open_index(tmp_path / "slow") as slow:
        fast.add_many([(*item, s) for item, s in zip(items, sketches, strict=True)])
        slow.add_many([(*item, s.tolist()) for item, s in zip(items, sketches, strict=True)])
        for i in range(0, 150, 7):
            assert np.array_equal(fast.sketch(f"k{i}"), slow.sketch(f"k{i}"))
            assert [m.key for m in fast.query(2**63, sketch=sketches[i])] == [f"k{i}"]
            assert fast.query(2**63, sketch=sketches[i]) == slow.query(2**63, sketch=sketches[i])
        bad = [(i + 500, f"b{i}", None, s) for i, s in enumerate(sketches[:99])] + [
            (9, "short", None, sketches[0][:5])
        ]
        with pytest.raises(ValueError):
            fast.add_many(bad)
        assert len(fast) == 150 and fast.get("b0") is None


def test_wal_checkpoints_run_in_their_own_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer's commits do not copy the log back (its own automatic checkpoint only far past the
    default 1000 pages); a thread checkpoints every so many rows, and the log then restarts."""
    import sqlite3
    import threading

    from scrapy_simhash.index import open_index
    from scrapy_simhash.index.embedded import checkpoints

    monkeypatch.setattr(checkpoints, "ROWS_PER_CHECKPOINT", 500)
    ran_in: list[str] = []
    done = threading.Event()
    real = sqlite3.Connection.execute

    class Recording(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:  # type: ignore[override]
            if "wal_checkpoint" in sql:
                ran_in.append(threading.current_thread().name)
                try:
                    return real(self, sql, *args)
                finally:
                    done.set()
            return real(self, sql, *args)

    real_connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda *a, **k: real_connect(*a, factory=Recording, **k))
    path = tmp_path / "ix"
    with open_index(path) as index:
        conn = index.simhashes._store.conn  # type: ignore[attr-defined]
        assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] >= 1 << 14
        rng = np.random.default_rng(5)
        sketches = rng.integers(0, 2**32, size=(1200, NV), dtype=np.uint32)
        for start in range(0, 1200, 100):
            index.add_many([(start + i + 1, f"k{start + i}", None, sketches[start + i]) for i in range(100)])
        assert done.wait(20.0), "no checkpoint ran"
    assert ran_in and set(ran_in) == {"scrapy-simhash-checkpoint"}
    with open_index(path, read_only=True) as index:
        assert len(index) == 1200 and [m.key for m in index.query(2**63, sketch=sketches[7])] == ["k7"]


@given(st.lists(st.integers(0, 2**64 - 1), max_size=300), st.booleans())
@settings(max_examples=150, deadline=None)
def test_the_c_bucket_directory_equals_numpys(values: list[int], skewed: bool) -> None:
    from scrapy_simhash.index.lsh import lsh_buckets

    entries = np.sort(np.array(values, dtype=np.uint64))
    if skewed:  # long cells: many entries with the same top bits
        entries = np.sort(entries >> np.uint64(20))
    native = lsh_buckets.SortedBuckets(entries)
    saved = lsh_buckets._native_directory
    lsh_buckets._native_directory = None
    try:
        numpy = lsh_buckets.SortedBuckets(entries)
    finally:
        lsh_buckets._native_directory = saved
    assert saved is not None  # built by make install
    assert native.directory.dtype == numpy.directory.dtype and np.array_equal(
        native.directory, numpy.directory
    )
    assert native.width == numpy.width


def merges_by_thread(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, size: Any
) -> dict[str, list[int]]:
    """The size of every result of ``module.name`` (a merge), by the name of the thread that made it."""
    import threading

    sizes: dict[str, list[int]] = {}
    real = getattr(module, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        sizes.setdefault(threading.current_thread().name, []).append(size(out))
        return out

    monkeypatch.setattr(module, name, wrapped)
    return sizes


def test_a_large_merge_of_the_tables_delta_runs_in_its_own_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a write merged up to the run cap itself (the longest writes). Now the writer merges at
    most ``inline_max`` fingerprints; larger merges run in a thread, and answers are exact while they
    run and after their result replaced their runs."""
    import threading

    merged = merges_by_thread(monkeypatch, Segment, "merged", len)
    layout = resolve(None, 3)
    layers = Layers(tmp_path, layout, pending_max=50, delta_min=1 << 30)
    layers.delta.cap, layers.delta.inline_max = 1600, 100
    rng = np.random.default_rng(6)
    hashes = rng.integers(1, 2**64, size=6000, dtype=np.uint64)
    seqs = np.arange(1, 6001, dtype=np.int64)
    queries = hashes[::41] ^ np.uint64(0b1001)
    want = brute_force(hashes, seqs, queries, 3)
    want_pairs = sorted(zip(want.query.tolist(), want.seq.tolist(), strict=True))

    def answers() -> list[tuple[int, int]]:
        got = layers.probe(queries, 3)
        return sorted(zip(got.query.tolist(), got.seq.tolist(), strict=True))

    for start in range(0, hashes.size, 50):
        part = hashes[start : start + 50]
        layers.inserted(part.tolist(), list(range(start + 1, start + 1 + part.size)), [])
    writer = threading.current_thread().name
    assert merged[writer] and max(merged[writer]) <= 100
    assert answers() == want_pairs  # a merge may still be running: its runs answer meanwhile
    layers.delta.publish(wait=True)
    assert answers() == want_pairs and len(layers.delta) == 6000
    assert max(merged["scrapy-simhash-run-merge"]) > 100
    assert layers.delta.copied_in_background > 0
    assert max(len(run) for run in layers.delta.runs) > 100  # a background result was published


def test_a_large_merge_of_the_recent_buckets_runs_in_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: a write merged up to the run cap of bucket entries itself. Now at most ``inline_max``;
    every page is found by its own sketch while a merge runs and after it was published."""
    import pickle
    import threading

    merged = merges_by_thread(monkeypatch, bucket_runs, "merge_sorted", lambda out: out.shape[0])
    lsh = MinHashLSH(0.5, NV, BANDS, ROWS, value_bits=8)
    batch = 100
    lsh.RUN_CAP = 16 * batch * BANDS
    lsh._runs.inline_max = 2 * batch * BANDS
    rng = np.random.default_rng(7)
    sketches = rng.integers(0, 256, size=(60 * batch, NV), dtype=np.uint32)
    for b in range(60):
        part = sketches[b * batch : (b + 1) * batch]
        lsh.add_many([(f"k{b * batch + i}", s) for i, s in enumerate(part)])
        if b % 7 == 0:
            for i in range(0, (b + 1) * batch, 311):
                assert lsh.query(sketches[i])[0] == (f"k{i}", 1.0)
    writer = threading.current_thread().name
    assert max(merged[writer]) <= 2 * batch * BANDS
    copy = pickle.loads(pickle.dumps(lsh))  # a merge may be under way: it is finished first
    assert copy.query(sketches[17])[0] == ("k17", 1.0) and copy.stats()["runs"] == lsh.stats()["runs"]
    lsh._runs.publish(wait=True)
    for i in range(0, 60 * batch, 97):
        assert lsh.query(sketches[i])[0] == (f"k{i}", 1.0)
    assert max(merged["scrapy-simhash-run-merge"]) > 2 * batch * BANDS
    assert lsh._runs.copied_in_background > 0
    lsh.compact()
    assert lsh.stats()["runs"] == 0 and lsh.query(sketches[5])[0] == ("k5", 1.0)


def test_recent_buckets_pickle_while_a_merge_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A MinHashLSH is the user's object and may be pickled: a merge under way (held by a slow merge
    here) is finished and published first, instead of failing on its thread."""
    import pickle
    import threading

    runs = bucket_runs.BucketRuns()
    runs.inline_max = 4
    rng = np.random.default_rng(8)
    parts = [np.sort(rng.integers(0, 2**63, 10).astype(np.uint64)) for _ in range(5)]
    for part in parts[:4]:
        runs.add(part, 1000)
    release = threading.Event()
    real = bucket_runs.merged_runs

    def held(arrays: list[np.ndarray]) -> np.ndarray:
        release.wait(10)
        return real(arrays)

    monkeypatch.setattr(bucket_runs, "merged_runs", held)
    runs.add(parts[4], 1000)
    assert runs._merge is not None and not runs._merge.done()  # a merge under way
    threading.Timer(0.2, release.set).start()
    copy = pickle.loads(pickle.dumps(runs))
    want = np.sort(np.concatenate(parts))
    assert np.array_equal(np.sort(np.concatenate([run.entries for run in copy.runs])), want)
    assert len(copy.runs) < 5  # the merge's result was published before pickling
