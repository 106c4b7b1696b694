"""MinHashIndex: the persistent MinHash-LSH answers exactly as the in-memory MinHashLSH fed the
same operations (across reopens), refuses a second writer, serves readers, detects damage and
settings it was not created with.

The reference is :class:`MinHashLSH` itself (its answers are checked against brute force in
test_lsh.py); sketches here are short (8 values) over a tiny alphabet so that candidates,
shared bands, threshold ties and replacements happen constantly.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_simhash.fingerprint.minhash import minhash
from scrapy_simhash.index import (
    IndexCorruptError,
    IndexLockedError,
    IndexSettingsError,
    MinHashIndex,
    SimhashIndex,
    SimhashIndexError,
    open_index,
)
from scrapy_simhash.index.lsh.lsh import MinHashLSH

NV, THRESHOLD, BANDS, ROWS = 8, 0.5, 4, 2
KEYS = [f"k{i}" for i in range(8)]

# 0x100 and 0x10002 equal 0 and 2 in their low byte: one sketch to an 8-bit index, two to a 32-bit one
_values = st.lists(st.sampled_from([0, 1, 2, 0x100, 0x10002]), min_size=NV, max_size=NV)
_POOL = [[0] * NV, [0] * 4 + [1] * 4, [1] * NV, [0, 1] * 4]  # near each other: exact repeats and ties
sketches = (st.sampled_from(_POOL) | _values).map(lambda v: np.array(v, np.uint32))
metas = st.none() | st.fixed_dictionaries({"n": st.integers(0, 9)})
keys = st.sampled_from(KEYS)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), keys, sketches, metas),
        st.tuples(st.just("add_many"), st.lists(st.tuples(keys, sketches, metas), max_size=5)),
        st.tuples(st.just("check_and_add"), keys, sketches, metas),
        st.tuples(st.just("remove"), keys),
        st.tuples(st.just("query"), sketches),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


class Model:
    """The in-memory MinHashLSH plus each key's meta."""

    def __init__(self, value_bits: int = 32) -> None:
        self.lsh = MinHashLSH(THRESHOLD, NV, BANDS, ROWS, value_bits=value_bits)
        self.meta: dict[str, dict[str, Any]] = {}

    def answer(self, found: list[tuple[str, float]]) -> list[tuple[str, float, dict[str, Any]]]:
        return [(key, sim, self.meta[key]) for key, sim in found]

    def add(self, key: str, sketch: np.ndarray, meta: dict[str, Any] | None) -> None:
        self.lsh.add(key, sketch)
        self.meta[key] = dict(meta or {})


def rows(matches: list[Any]) -> list[tuple[str, float, dict[str, Any]]]:
    return [(m.key, m.similarity, m.meta) for m in matches]


def open_ix(path: Path, **options: Any) -> MinHashIndex:
    return MinHashIndex(path, THRESHOLD, NV, BANDS, ROWS, synchronous="normal", **options)


def assert_same_state(index: MinHashIndex, model: Model) -> None:
    assert index.keys() == model.lsh.keys()  # oldest first: the order ties are answered in
    assert len(index) == len(model.lsh)
    for key in KEYS:
        assert (key in index) == (key in model.lsh)
        got, want = index.get(key), model.lsh.get(key)
        assert (got is None and want is None) or np.array_equal(got, want)
        assert index.meta(key) == model.meta.get(key) if key in model.lsh else index.meta(key) is None


def run_program(path: Path, program: list[tuple], value_bits: int = 32) -> None:
    model = Model(value_bits)
    index = open_ix(path, reset=True, value_bits=value_bits)
    try:
        for op in program:
            kind = op[0]
            if kind == "add":
                index.add(op[1], op[2], op[3])
                model.add(op[1], op[2], op[3])
            elif kind == "add_many":
                assert index.add_many(op[1]) == len(op[1])
                for key, sketch, meta in op[1]:
                    model.add(key, sketch, meta)
            elif kind == "check_and_add":
                want = model.answer(model.lsh.query(op[2]))
                assert rows(index.check_and_add(op[1], op[2], op[3])) == want
                model.add(op[1], op[2], op[3])
            elif kind == "remove":
                assert index.remove(op[1]) == model.lsh.remove(op[1])
                model.meta.pop(op[1], None)
            elif kind == "query":
                assert rows(index.query(op[1])) == model.answer(model.lsh.query(op[1]))
            else:
                index.close()
                index = open_ix(path)
            stored = model.lsh.keys()
            for key in stored:  # every stored sketch as a query, after every step
                assert rows(index.query(model.lsh.get(key))) == model.answer(
                    model.lsh.query(model.lsh.get(key))
                )
        assert_same_state(index, model)
        index.close()
        index = open_ix(path)
        assert_same_state(index, model)
        stored = model.lsh.keys()
        probes = [model.lsh.get(key) for key in stored] + [np.zeros(NV, np.uint32)]
        want = [model.answer(r) for r in model.lsh.query_many(probes)]
        assert [rows(r) for r in index.query_many(probes)] == want
    finally:
        index.close()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=operations, value_bits=st.sampled_from([8, 32]))
def test_answers_equal_the_in_memory_lsh_across_reopens(
    tmp_path: Path, program: list[tuple], value_bits: int
) -> None:
    run_program(tmp_path / "ix", program, value_bits)


def test_8_bit_values_are_stored_in_a_byte_each_and_read_back(tmp_path: Path) -> None:
    sketch = np.arange(NV, dtype=np.uint32) * np.uint32(0x01010101)
    with MinHashIndex(tmp_path / "ix", THRESHOLD, NV, BANDS, ROWS, value_bits=8) as index:
        index.add("a", sketch)
        assert np.array_equal(index.get("a"), sketch & 0xFF)
    with sqlite3.connect(tmp_path / "ix" / "minhash.sqlite3") as conn:
        (blob,) = conn.execute("SELECT sketch FROM sketches").fetchone()
    assert blob == bytes(range(NV))
    with MinHashIndex(tmp_path / "ix") as index:  # the stored width, without being told
        assert index.value_bits == 8 and np.array_equal(index.get("a"), sketch & 0xFF)
        assert [m.key for m in index.query(sketch ^ np.uint32(0xFFFFFF00))] == ["a"]  # the low byte alike
    with pytest.raises(IndexSettingsError, match="value_bits=32"):
        MinHashIndex(tmp_path / "ix", value_bits=32)
    for bad in (0, 4, 12):
        with pytest.raises(ValueError, match="value_bits must be one of 8, 16, 32"):
            MinHashIndex(tmp_path / f"bad{bad}", value_bits=bad)


def test_an_index_from_before_value_bits_is_upgraded_to_32_bit_values(tmp_path: Path) -> None:
    """A database without the setting (written before it existed, and before ``format``) is refused;
    the upgrade records 32 bits, whatever a new index would get (``new_value_bits``). In this format a
    database without the setting is damaged, and a width a later version might write is refused."""
    from index_old_layouts import NV as OLD_NV
    from index_old_layouts import minhash_index

    from scrapy_simhash.index.embedded.sketch_rows import settings_check
    from scrapy_simhash.index.embedded.store_format import IndexFormatError
    from scrapy_simhash.index.upgrade import upgrade

    path, new = tmp_path / "ix", tmp_path / "new"
    sketch = np.arange(OLD_NV, dtype=np.uint32) * np.uint32(0x01010101)
    minhash_index(path, [(1, "a", None, sketch)], bits=None)
    with pytest.raises(IndexFormatError, match="scrapy-simhash index upgrade"):
        MinHashIndex(path, new_value_bits=8)
    upgrade(path, new)
    with MinHashIndex(new, new_value_bits=8) as index:
        assert index.value_bits == 32 and np.array_equal(index.get("a"), sketch)
        assert index.query(sketch ^ np.uint32(0xFFFFFF00)) == []
    with MinHashIndex(tmp_path / "fresh", THRESHOLD, NV, BANDS, ROWS, new_value_bits=8) as index:
        assert index.value_bits == 8

    def resign(change: str) -> None:
        with sqlite3.connect(new / "minhash.sqlite3") as conn:
            conn.execute(change)
            stored = dict(conn.execute("SELECT name, value FROM settings WHERE name != 'check'").fetchall())
            conn.execute("UPDATE settings SET value = ? WHERE name = 'check'", (settings_check(stored),))
        conn.close()

    resign("UPDATE settings SET value = '4' WHERE name = 'value_bits'")  # a width a later version might write
    with pytest.raises(IndexSettingsError, match="4-bit sketch values, which this version does not read"):
        MinHashIndex(new)
    resign("DELETE FROM settings WHERE name = 'value_bits'")
    with pytest.raises(IndexCorruptError, match="the settings lack value_bits"):
        MinHashIndex(new)


def test_check_and_add_reports_the_replaced_entry_with_its_old_meta(tmp_path: Path) -> None:
    sketch = np.zeros(NV, np.uint32)
    with open_ix(tmp_path / "ix") as index:
        index.add("a", sketch, {"v": 1})
        assert rows(index.check_and_add("a", sketch, {"v": 2})) == [("a", 1.0, {"v": 1})]
        assert index.meta("a") == {"v": 2}


def test_real_sketches_and_defaults(tmp_path: Path) -> None:
    text = " ".join(f"word{i}" for i in range(300))
    a, b = minhash(text), minhash(text.replace("word150", "changed"))
    with MinHashIndex(tmp_path / "ix") as index:
        assert (index.threshold, index.num_values) == (0.8, 128)
        assert index.check_and_add("a", a, {"url": "http://a/"}) == []
        (match,) = index.check_and_add("b", b)
        assert (match.key, match.meta) == ("a", {"url": "http://a/"})
        assert match.similarity == a.jaccard(b) >= 0.8
    with open_index(tmp_path / "ix", kind="minhash") as index:
        assert [m.key for m in index.query(a)] == ["a", "b"]
        assert (index.bands, index.rows) == (MinHashLSH(0.8, 128).bands, MinHashLSH(0.8, 128).rows)


def test_a_bad_item_stores_nothing(tmp_path: Path) -> None:
    good = np.zeros(NV, np.uint32)
    with open_ix(tmp_path / "ix") as index:
        for bad in [("", good, None), ("x", np.zeros(NV + 1, np.uint32), None), ("x", good, {"a": {1, 2}})]:
            with pytest.raises((ValueError, TypeError)):
                index.add_many([("ok", good, None), bad])
        assert len(index) == 0
    with open_ix(tmp_path / "ix") as index:
        assert len(index) == 0


def test_second_writer_refused_reader_served(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    sketch = np.arange(NV, dtype=np.uint32)
    with open_ix(path) as writer:
        writer.add("a", sketch, {"n": 1})
        with pytest.raises(IndexLockedError):
            open_ix(path)
        with open_ix(path, read_only=True) as reader:
            assert [(m.key, m.meta) for m in reader.query(sketch)] == [("a", {"n": 1})]
            with pytest.raises(SimhashIndexError, match="read-only"):
                reader.add("b", sketch)
            with pytest.raises(SimhashIndexError, match="read-only"):
                reader.remove("a")
            writer.add("b", sketch)  # the reader keeps its snapshot
            assert reader.keys() == ["a"]
            writer.remove("a")  # its meta is gone: the reader's snapshot still answers the key
            assert [(m.key, m.meta) for m in reader.query(sketch)] == [("a", {})]
            assert reader.meta("a") == {}
        with pytest.raises(ValueError, match="read_only"):
            open_ix(path, read_only=True, reset=True)
    with open_ix(path) as writer:  # the lock went with close()
        assert writer.keys() == ["b"]
    with pytest.raises(FileNotFoundError):
        open_ix(tmp_path / "missing", read_only=True)


def _filled(path: Path) -> None:
    with open_ix(path) as index:
        index.add_many([(f"k{i}", np.full(NV, 0x51515151 + i, np.uint32), {"i": i}) for i in range(20)])


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE sketches SET sketch = zeroblob(32) WHERE key = 'k3'",
        "UPDATE sketches SET sketch = substr(sketch, 1, 28) WHERE key = 'k3'",
        "UPDATE sketches SET meta = '{\"i\":99}' WHERE key = 'k3'",
        "UPDATE sketches SET key = 'k99' WHERE key = 'k3'",
        "UPDATE sketches SET seq = 1000 WHERE key = 'k3'",
        "UPDATE sketches SET chk = chk + 1 WHERE key = 'k3'",
    ],
)
def test_damaged_row_is_refused(tmp_path: Path, sql: str) -> None:
    path = tmp_path / "ix"
    _filled(path)
    with sqlite3.connect(path / "minhash.sqlite3") as conn:
        conn.execute(sql)
    for read_only in (False, True):
        with pytest.raises(IndexCorruptError, match="fails its checksum"):
            open_ix(path, read_only=read_only)


def test_a_row_gone_under_the_writer_is_damage_not_empty_meta(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _filled(path)
    with open_ix(path) as index:
        with sqlite3.connect(path / "minhash.sqlite3") as conn:  # as a damaged key index would
            conn.execute("DELETE FROM sketches WHERE key = 'k3'")
        with pytest.raises(IndexCorruptError, match="no row found for the stored key 'k3'"):
            index.query(np.full(NV, 0x51515151 + 3, np.uint32))
        with pytest.raises(IndexCorruptError, match="'k3'"):
            index.meta("k3")


def test_flipped_byte_in_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _filled(path)
    db = path / "minhash.sqlite3"
    assert not (path / "minhash.sqlite3-wal").exists() or (path / "minhash.sqlite3-wal").stat().st_size == 0
    data = bytearray(db.read_bytes())
    at = data.find(np.full(NV, 0x51515151 + 7, "<u4").tobytes())
    assert at > 0
    data[at + 5] ^= 0x04
    db.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError):
        open_ix(path, verify=False)  # without SQLite's checks: the row checksum alone finds it


def test_lost_acknowledged_writes_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with open_ix(path) as index:
        index.add("a", np.zeros(NV, np.uint32))
    shutil.copy(path / "minhash.sqlite3", tmp_path / "old.sqlite3")
    with open_ix(path) as index:
        index.add("b", np.ones(NV, np.uint32))
    shutil.copy(tmp_path / "old.sqlite3", path / "minhash.sqlite3")  # an older database, as if rolled back
    with pytest.raises(IndexCorruptError, match="lost acknowledged writes"):
        open_ix(path)
    (path / "minhash.sqlite3").write_bytes(b"not a database, " * 512)
    with pytest.raises(IndexCorruptError, match="damaged or not a MinHash index"):
        open_ix(path)
    (path / "minhash.sqlite3").unlink()
    with pytest.raises(IndexCorruptError, match="missing"):
        open_ix(path)


def test_settings_mismatch_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _filled(path)
    for options, word in [
        ({"num_values": 16}, "num_values=16"),
        ({"threshold": 0.9}, "threshold=0.9"),
        ({"bands": 2}, "bands=2"),
        ({"rows": 4}, "rows=4"),
    ]:
        with pytest.raises(IndexSettingsError, match=word):
            MinHashIndex(path, **options)
    with MinHashIndex(path) as index:  # nothing given: the stored settings
        assert (index.threshold, index.num_values, index.bands, index.rows) == (THRESHOLD, NV, BANDS, ROWS)
    with sqlite3.connect(path / "minhash.sqlite3") as conn:
        conn.execute("UPDATE settings SET value = '64' WHERE name = 'num_values'")
    with pytest.raises(IndexCorruptError, match="settings fail their checksum"):
        MinHashIndex(path)


def test_other_scheme_is_refused(tmp_path: Path) -> None:
    from scrapy_simhash.index.embedded.sketch_rows import settings_check

    path = tmp_path / "ix"
    _filled(path)
    with sqlite3.connect(path / "minhash.sqlite3") as conn:
        conn.execute("UPDATE settings SET value = 'minhash-doc/2' WHERE name = 'scheme'")
        stored = dict(conn.execute("SELECT name, value FROM settings WHERE name != 'check'").fetchall())
        conn.execute("UPDATE settings SET value = ? WHERE name = 'check'", (settings_check(stored),))
    with pytest.raises(IndexSettingsError, match="minhash-doc/2"):
        MinHashIndex(path)


def test_simhash_and_minhash_directories_are_told_apart(tmp_path: Path) -> None:
    with SimhashIndex(tmp_path / "s") as index:
        index.add(1, "a")
    with pytest.raises(IndexSettingsError, match="simhash index"):
        MinHashIndex(tmp_path / "s")
    _filled(tmp_path / "m")
    with pytest.raises(IndexSettingsError, match="kind='minhash'"):
        open_index(tmp_path / "m")
    with pytest.raises(ValueError, match="kind"):
        open_index(tmp_path / "m", kind="lsh")  # type: ignore[call-overload]


def test_reset_empties_and_closed_index_refuses(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _filled(path)
    index = open_ix(path, reset=True)
    assert len(index) == 0
    index.close()
    index.close()
    with pytest.raises(SimhashIndexError, match="closed"):
        index.add("a", np.zeros(NV, np.uint32))


@pytest.mark.parametrize("value_bits", [32, 8])
def test_bulk_load_answers_as_add_many_and_stays_incremental(value_bits: int) -> None:
    """At 8 bits the load takes the matrix a byte a value, as the store reads it (no uint32 copy)."""
    rng = np.random.default_rng(5)
    n = 3000
    base = rng.integers(0, 2**32, size=(40, NV), dtype=np.uint32)
    batch = base[rng.integers(0, 40, n)]  # copies of 40 sketches, each with some values replaced
    mask = rng.random(batch.shape) < 0.3
    batch[mask] = rng.integers(0, 4, size=int(mask.sum()), dtype=np.uint32)
    batch[rng.random(batch.shape) < 0.2] ^= np.uint32(0x3F00)  # differences above the low byte
    keys = [f"d{i}" for i in range(n)]

    def fresh() -> MinHashLSH:
        return MinHashLSH(THRESHOLD, NV, BANDS, ROWS, value_bits=value_bits)

    one_by_one = fresh()  # the reference: add, one at a time
    added, loaded = fresh(), fresh()
    for key, sketch in zip(keys, batch, strict=True):
        one_by_one.add(key, sketch)
    for start in range(0, n, 700):  # batches of new keys take add_many's array path
        added.add_many(zip(keys[start : start + 700], batch[start : start + 700], strict=True))
    loaded.load(keys, batch.astype(np.uint8) if value_bits == 8 else batch)
    probes = np.concatenate([batch[:300], base])
    want = one_by_one.query_many(probes)
    assert sum(map(len, want)) > 1000
    assert loaded.query_many(probes) == added.query_many(probes) == want
    assert [loaded.query(p) for p in probes[:100]] == [added.query(p) for p in probes[:100]] == want[:100]
    for lsh in (one_by_one, added, loaded):  # then the usual writes, over the loaded state
        lsh.add_many(zip([f"e{i}" for i in range(500)], batch[:500], strict=True))
        lsh.add_many(zip([f"e{i}" for i in range(400, 600)], batch[:200], strict=True))  # replaces some
        for i in range(0, n, 3):
            lsh.remove(f"d{i}")
        lsh.add("d1", base[0])
    assert loaded.keys() == added.keys() == one_by_one.keys()
    want = one_by_one.query_many(probes)
    assert loaded.query_many(probes) == added.query_many(probes) == want
    loaded.compact()
    assert loaded.query_many(probes) == want
    with pytest.raises(ValueError, match="empty"):
        loaded.load(["x"], batch[:1])
    with pytest.raises(ValueError, match="unique"):
        fresh().load(["x", "x"], batch[:2])


def test_check_and_add_is_atomic_across_threads(tmp_path: Path) -> None:
    import threading

    sketch = np.arange(NV, dtype=np.uint32)
    firsts: list[str] = []
    with open_ix(tmp_path / "ix") as index:

        def crawl(worker: int) -> None:
            for i in range(50):
                if not index.check_and_add(f"w{worker}-{i}", sketch):
                    firsts.append(f"w{worker}-{i}")

        threads = [threading.Thread(target=crawl, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(firsts) == 1 and len(index) == 200
    with open_ix(tmp_path / "ix") as index:
        assert index.keys()[0] == firsts[0] and len(index.query(sketch)) == 200
