"""The embedded index never loses or invents data silently: reset under the lock, a lost
database refused, damaged rows and settings detected, raw SQLite/JSON errors wrapped."""

from __future__ import annotations

import json
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import SimhashIndex
from scrapy_simhash.crawl_index import open_crawl_index
from scrapy_simhash.index import IndexCorruptError, IndexLockedError, SimhashIndexError
from scrapy_simhash.index.embedded.integrity import row_check
from scrapy_simhash.index.embedded.storage import to_signed, to_unsigned
from scrapy_simhash.settings import SimhashConfigError

WRITER = r"""
import sys
from scrapy_simhash import SimhashIndex

index = SimhashIndex(sys.argv[1], synchronous="normal")
print("OPEN", flush=True)
for i in range(int(sys.argv[2])):
    index.add((i * 0x9E3779B97F4A7C15) % (1 << 64) or 1, f"w{i}")
    print(f"A w{i}", flush=True)
    if i == 20:
        sys.stdin.readline()  # wait while the parent tries to reset the index
index.close()
"""


def _fill(path: Path, n: int = 200, compact: bool = True) -> dict[str, int]:
    rows = {f"k{i}": (i * 0x9E3779B97F4A7C15) % (1 << 64) or 1 for i in range(n)}
    items = list(rows.items())
    with SimhashIndex(path) as index:
        index.add_many([(h, key, {"i": key}) for key, h in items[: n // 2]])
        if compact:
            index.compact()
        index.add_many([(h, key, {"i": key}) for key, h in items[n // 2 :]])
    return rows


def _files(path: Path) -> set[str]:
    return {p.name for p in path.iterdir()}


# -- reset takes the lock first --------------------------------------------------------------
def test_reset_of_an_index_another_process_writes_is_refused_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), "100"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None and writer.stdin is not None
    assert writer.stdout.readline().strip() == "OPEN"
    acked = []
    while len(acked) < 21:
        acked.append(writer.stdout.readline().split()[1])
    with pytest.raises(IndexLockedError):
        open_crawl_index(str(path), 3, reset=True)
    with pytest.raises(IndexLockedError):
        SimhashIndex(path, reset=True)
    writer.stdin.write("go on\n")
    writer.stdin.flush()
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    acked += [line.split()[1] for line in out.splitlines()]
    assert len(acked) == 100
    with SimhashIndex(path) as index:
        assert {m.key for m in index} == set(acked)


def test_reset_of_an_unlocked_index_empties_it_under_the_lock(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _fill(path)
    (path / "notes.txt").write_text("not part of the index")
    index = open_crawl_index(str(path), 3, reset=True)
    try:
        assert len(index) == 0
        with pytest.raises(IndexLockedError):  # the lock was held throughout: no second writer
            SimhashIndex(path)
        index.add(0xABC, "fresh")
    finally:
        index.close()
    assert not list(path.glob("tables-*")) and (path / "notes.txt").exists()
    with SimhashIndex(path) as index:
        assert [m.key for m in index] == ["fresh"]
    with pytest.raises(ValueError):
        SimhashIndex(path, read_only=True, reset=True)


# -- a lost database is refused, nothing deleted ---------------------------------------------
def _lose_database(path: Path, how: str, tmp_path: Path) -> None:
    db = path / "index.sqlite3"
    if how == "missing":
        db.unlink()
    elif how == "emptied":
        db.write_bytes(b"")
    elif how == "replaced-by-empty":
        with SimhashIndex(tmp_path / "blank"):
            pass
        shutil.copy(tmp_path / "blank" / "index.sqlite3", db)
    else:  # every row deleted behind the index's back
        with sqlite3.connect(db) as conn:
            conn.execute("DELETE FROM entries")


@pytest.mark.parametrize("how", ["missing", "emptied", "replaced-by-empty", "rows-deleted"])
def test_lost_database_is_refused_and_nothing_deleted(tmp_path: Path, how: str) -> None:
    path = tmp_path / "ix"
    _fill(path)
    _lose_database(path, how, tmp_path)
    before = _files(path)
    for read_only in (False, True):
        with pytest.raises(IndexCorruptError, match=r"index\.sqlite3"):
            SimhashIndex(path, read_only=read_only)
        assert before <= _files(path)  # nothing deleted (SQLite may add its -wal and -shm)
    assert any(name.startswith("tables-") for name in before)


def test_new_index_in_an_empty_or_missing_directory_is_created(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    for path in (tmp_path / "empty", tmp_path / "missing"):
        with SimhashIndex(path) as index:
            index.add(5, "a")
        with SimhashIndex(path, read_only=True) as index:
            assert len(index) == 1


# -- damage detected ------------------------------------------------------------------------
@pytest.mark.parametrize("field", ["crc32", "bytes", "name"])
def test_manifest_without_a_file_field_is_rebuilt(tmp_path: Path, field: str) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    manifest = json.loads((path / "manifest.json").read_text())
    del manifest["files"]["entries"][field]
    (path / "manifest.json").write_text(json.dumps(manifest))
    with SimhashIndex(path) as index:
        assert index.stats()["rebuilds"] == 1
        assert {m.key: m.simhash for m in index} == rows
        assert [m.key for m in index.query(rows["k3"])] == ["k3"]


@pytest.mark.parametrize("where", ["base", "delta"])
def test_row_changed_behind_the_index_is_detected(tmp_path: Path, where: str) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    key = "k3" if where == "base" else "k150"
    with sqlite3.connect(path / "index.sqlite3") as conn:
        conn.execute("UPDATE entries SET simhash = simhash + 1 WHERE key = ?", (key,))
    if where == "delta":  # read at open to build the in-memory tables
        with pytest.raises(IndexCorruptError, match="checksum"):
            SimhashIndex(path)
        return
    with SimhashIndex(path) as index:
        with pytest.raises(IndexCorruptError, match="checksum"):
            index.get(key)
        with pytest.raises(IndexCorruptError, match="checksum"):
            index.query(rows[key])
        with pytest.raises(IndexCorruptError, match="checksum"):
            list(index)


def test_changed_settings_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _fill(path)
    with sqlite3.connect(path / "index.sqlite3") as conn:
        conn.execute("UPDATE settings SET value = '2' WHERE name = 'k'")
    with pytest.raises(IndexCorruptError, match="settings"):
        SimhashIndex(path)


@pytest.mark.parametrize("damage", ["bad-json", "no-table"])
def test_raw_sqlite_and_json_errors_become_index_corrupt(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    with SimhashIndex(path) as index:
        with sqlite3.connect(path / "index.sqlite3") as conn:  # behind the open index's back
            if damage == "bad-json":  # signed as it is: its checksum cannot tell
                seq, h = conn.execute("SELECT seq, simhash FROM entries WHERE key = 'k3'").fetchone()
                check = to_signed(row_check(seq, to_unsigned(h), "k3", '{"i": '))
                conn.execute("UPDATE entries SET meta = '{\"i\": ', chk = ? WHERE key = 'k3'", (check,))
            else:
                conn.execute("ALTER TABLE entries RENAME TO gone")
        for call in (lambda: index.get("k3"), lambda: index.query(rows["k3"]), lambda: list(index)):
            with pytest.raises(IndexCorruptError, match=r"index\.sqlite3"):
                call()


def test_database_behind_its_commit_mark_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with SimhashIndex(path) as index:
        index.add_many([(i + 1, f"a{i}", None) for i in range(50)])
    shutil.copy(path / "index.sqlite3", tmp_path / "backup.sqlite3")
    with SimhashIndex(path) as index:
        index.add(1000, "later")
        index.remove("a3")
    shutil.copy(tmp_path / "backup.sqlite3", path / "index.sqlite3")  # the two writes are lost
    with pytest.raises(IndexCorruptError, match="lost acknowledged writes"):
        SimhashIndex(path)
    with pytest.raises(IndexCorruptError, match="lost acknowledged writes"):
        SimhashIndex(path, read_only=True)


def test_removal_lost_after_the_mark_is_refused(tmp_path: Path) -> None:
    """A removal changes no row count a table file knows of; the mark still catches its loss."""
    path = tmp_path / "ix"
    with SimhashIndex(path) as index:
        index.add_many([(i + 1, f"a{i}", None) for i in range(50)])
    shutil.copy(path / "index.sqlite3", tmp_path / "backup.sqlite3")
    with SimhashIndex(path) as index:
        index.remove("a3")
    shutil.copy(tmp_path / "backup.sqlite3", path / "index.sqlite3")
    with pytest.raises(IndexCorruptError, match="lost acknowledged writes"):
        SimhashIndex(path)


def test_loss_after_a_reboot_with_synchronous_normal_is_only_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "ix"
    with SimhashIndex(path, synchronous="normal") as index:
        index.add_many([(i + 1, f"a{i}", None) for i in range(50)])
    shutil.copy(path / "index.sqlite3", tmp_path / "backup.sqlite3")
    with SimhashIndex(path, synchronous="normal") as index:
        index.add(1000, "later")
    shutil.copy(tmp_path / "backup.sqlite3", path / "index.sqlite3")
    mark = (path / "COMMITTED").read_bytes()
    body = mark[:-20] + bytes(16)  # written in another boot (a power cut lost the last commit)
    (path / "COMMITTED").write_bytes(body + zlib.crc32(body).to_bytes(4, "little"))
    with SimhashIndex(path) as index:
        assert len(index) == 50
    assert "power cut" in caplog.text


def test_an_index_without_checksums_is_refused_and_upgraded_with_every_row_checksummed(
    tmp_path: Path,
) -> None:
    """An index written before row checksums (none of their markers: no ``chk`` column, no settings
    check, no format) is not opened with unverified rows: it is refused, and the converter gives every
    row a checksum that this version verifies like any other."""
    from scrapy_simhash.index.embedded.store_format import IndexFormatError
    from scrapy_simhash.index.upgrade import upgrade

    path, new = tmp_path / "ix", tmp_path / "new"
    rows = _fill(path)
    with sqlite3.connect(path / "index.sqlite3") as conn:
        conn.execute("ALTER TABLE entries DROP COLUMN chk")
        conn.execute("DELETE FROM settings WHERE name IN ('check', 'format')")
    conn.close()
    (path / "COMMITTED").unlink()
    for read_only in (True, False):
        with pytest.raises(IndexFormatError, match="scrapy-simhash index upgrade"):
            SimhashIndex(path, read_only=read_only)
    report = upgrade(path, new)
    assert (report.found_format, report.pages, report.unchecked) == ("none", 200, 200)
    with SimhashIndex(new) as index:
        assert {m.key: m.simhash for m in index} == rows
    with sqlite3.connect(new / "index.sqlite3") as conn:
        assert conn.execute("SELECT count(*) FROM entries WHERE chk IS NULL").fetchone()[0] == 0
        conn.execute("UPDATE entries SET chk = NULL WHERE key = 'k150'")  # no row may lack one now
    conn.close()
    with SimhashIndex(new) as index, pytest.raises(IndexCorruptError, match="has no checksum"):
        index.get("k150")  # in the table files the upgrade wrote: checked when read


# -- a checksum that damage cannot switch off --------------------------------------------------------
@pytest.mark.parametrize("change", ["", "simhash = simhash + 1", 'meta = \'{"i": "forged"}\''])
@pytest.mark.parametrize("where", ["base", "delta"])
def test_a_null_row_checksum_in_a_checksummed_index_is_damage(
    tmp_path: Path, where: str, change: str
) -> None:
    """No row may lack its checksum: a NULL ``chk`` cannot hide a changed row."""
    path = tmp_path / "ix"
    rows = _fill(path)
    key = "k3" if where == "base" else "k150"
    with sqlite3.connect(path / "index.sqlite3") as conn:
        conn.execute(
            f"UPDATE entries SET {', '.join(filter(None, ['chk = NULL', change]))} WHERE key = ?", (key,)
        )
    if where == "delta":  # read at open to build the in-memory tables
        for read_only in (False, True):
            with pytest.raises(IndexCorruptError, match="has no checksum"):
                SimhashIndex(path, read_only=read_only)
        return
    with SimhashIndex(path) as index:
        for call in (lambda: index.get(key), lambda: index.query(rows[key]), lambda: list(index)):
            with pytest.raises(IndexCorruptError, match="has no checksum"):
                call()


def _verified_pages(path: Path, n: int = 12) -> list[str]:
    from scrapy_simhash.index import open_index

    rng = np.random.default_rng(3)
    keys = [f"https://example.org/{i}" for i in range(n)]
    with open_index(path) as index:
        index.add_many(
            [
                (i + 1, key, {"i": i}, rng.integers(0, 2**32, size=128, dtype=np.uint32))
                for i, key in enumerate(keys)
            ]
        )
    return keys


@pytest.mark.parametrize("damage", ["chk = NULL, sketch = zeroblob(128)", "sketch = NULL"])
def test_a_changed_or_dropped_sketch_is_found_when_the_verified_index_opens(
    tmp_path: Path, damage: str
) -> None:
    """A sketch set to NULL is caught at open, as a flipped or short one is, not at the row's first read;
    nor does a NULL checksum hide a changed sketch."""
    from scrapy_simhash.index import open_index

    path = tmp_path / "ix"
    keys = _verified_pages(path)
    with sqlite3.connect(path / "index.sqlite3") as conn:
        conn.execute(f"UPDATE entries SET {damage} WHERE key = ?", (keys[5],))
    for read_only in (False, True):
        with pytest.raises(IndexCorruptError, match="checksum"):
            open_index(path, read_only=read_only)


@pytest.mark.parametrize("deleted", [["check"], ["check", "format"]])
@pytest.mark.parametrize("read_only", [False, True])
def test_a_missing_settings_check_is_damage_not_signed_again(
    tmp_path: Path, deleted: list[str], read_only: bool
) -> None:
    """Deleting the settings' check (and format) does not make changed settings (k 3 -> 2) acceptable,
    nor the database look older: only a database written before checksums may lack it, and this one
    has checksummed rows."""
    path = tmp_path / "ix"
    _fill(path)
    db = path / "index.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.executemany("DELETE FROM settings WHERE name = ?", [(name,) for name in deleted])
        conn.execute("UPDATE settings SET value = '2' WHERE name = 'k'")
    with pytest.raises(IndexCorruptError, match="settings"):
        SimhashIndex(path, read_only=read_only)
    with sqlite3.connect(db) as conn:  # and nothing was signed in their place
        assert conn.execute("SELECT count(*) FROM settings WHERE name = 'check'").fetchone()[0] == 0


def test_settings_record_the_format_and_a_later_one_is_refused(tmp_path: Path) -> None:
    from scrapy_simhash.index import IndexSettingsError
    from scrapy_simhash.index.embedded.database import settings_check

    path = tmp_path / "ix"
    _fill(path)
    db = path / "index.sqlite3"
    with sqlite3.connect(db) as conn:
        stored = dict(conn.execute("SELECT name, value FROM settings WHERE name != 'check'").fetchall())
        assert stored["format"] == "3" and "unchecked_upto" not in stored
        stored["format"] = "4"  # written by a later version, signed as it would sign it
        conn.execute("DELETE FROM settings")
        conn.executemany(
            "INSERT INTO settings VALUES (?, ?)", [*stored.items(), ("check", settings_check(stored))]
        )
    conn.close()
    with pytest.raises(IndexSettingsError, match="format 4, written by a later version"):
        SimhashIndex(path)


def test_an_index_written_before_the_format_setting_is_refused_and_upgraded(tmp_path: Path) -> None:
    """A database as versions that checksummed rows but recorded no format wrote it (rows an even older
    version wrote, which that one migrated, have no checksum): refused at open, converted with its
    rows, a row that fails its checksum stops the conversion."""
    from scrapy_simhash.index.embedded.database import settings_check
    from scrapy_simhash.index.embedded.store_format import IndexFormatError
    from scrapy_simhash.index.upgrade import UpgradeDamaged, upgrade

    path = tmp_path / "ix"
    rows = _fill(path)
    db = path / "index.sqlite3"
    with sqlite3.connect(db) as conn:
        conn.executemany("UPDATE entries SET chk = NULL WHERE key = ?", [("k1",), ("k2",)])
        stored = dict(conn.execute("SELECT name, value FROM settings").fetchall())
        for name in ("check", "format"):
            stored.pop(name, None)
        conn.execute("DELETE FROM settings")
        conn.executemany(
            "INSERT INTO settings VALUES (?, ?)", [*stored.items(), ("check", settings_check(stored))]
        )
    conn.close()
    for read_only in (True, False):
        with pytest.raises(IndexFormatError, match="earlier development version"):
            SimhashIndex(path, read_only=read_only)
    report = upgrade(path, tmp_path / "new")
    assert (report.pages, report.unchecked) == (200, 2)
    with SimhashIndex(tmp_path / "new", read_only=True) as index:
        assert {m.key: m.simhash for m in index} == rows
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE entries SET simhash = simhash + 1 WHERE key = 'k4'")
    conn.close()
    with pytest.raises(UpgradeDamaged, match="fails its checksum"):
        upgrade(path, tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_commit_mark_format_is_what_read_mark_expects(tmp_path: Path) -> None:
    from scrapy_simhash.index.embedded.integrity import read_mark

    path = tmp_path / "ix"
    with SimhashIndex(path) as index:
        index.add_many([(i + 1, f"a{i}", None) for i in range(5)])
        index.remove("a1")
    mark = read_mark(path)
    assert mark is not None and (mark.high, mark.count) == (6, 4)
    (path / "COMMITTED").write_bytes(struct.pack("<4s", b"junk"))
    assert read_mark(path) is None  # damaged: logged, and the database is trusted as it is
    with SimhashIndex(path) as index:
        assert len(index) == 4


# -- the crawl side: the real reason, counted --------------------------------------------------------
def test_open_crawl_index_refuses_a_file_as_a_configuration_error(tmp_path: Path) -> None:
    """Retrying cannot help: the crawl refuses to start, naming the setting to change."""
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(SimhashConfigError, match="is a file, not an index directory: point SIMHASH_INDEX"):
        open_crawl_index(str(tmp_path / "file"), 3)
    assert (tmp_path / "file").read_text() == "not a directory"


def test_open_crawl_index_turns_any_other_failure_into_an_index_error(tmp_path: Path) -> None:
    location = tmp_path / "index"
    _fill(location)
    (location / "index.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(SimhashIndexError):
        open_crawl_index(str(location), 3)


@pytest.mark.slow  # one Scrapy crawl, ~4 s
def test_crawl_with_a_lost_database_reports_the_reason_and_counts_it(tmp_path: Path) -> None:
    from crawl_support import demo_site, run_crawl

    location = tmp_path / "index"
    _fill(location)
    (location / "index.sqlite3").unlink()
    with demo_site.serve(demo_site.build_site(4)) as base:
        result = run_crawl(
            base + "/", tmp_path / "run", {"SIMHASH_INDEX": str(location), "SIMHASH_WORKERS": 1}
        )
    assert result.stat("simhash/error/index_open") == 1
    assert "index.sqlite3 is missing" in result.log
    assert "could not be opened: None" not in result.log
    assert any(name.startswith("tables-") for name in _files(location))


READER_RACE_WRITER = r"""
import sys
from scrapy_simhash import SimhashIndex

index = SimhashIndex(sys.argv[1], pending_max=4, delta_min=16, synchronous="normal")
print("OPEN", flush=True)
for i in range(3000):
    index.add((i * 0x9E3779B97F4A7C15) % (1 << 64) or 1, f"w{i}")
    if i % 3 == 2:
        index.remove(f"w{i - 1}")  # removals of rows in the base leave tombstones
index.close()
"""


def _is_a_state_of_the_race_writer(keys: list[str]) -> bool:
    """Whether ``keys`` is what READER_RACE_WRITER held after one of its writes: w0..wN added, and
    w(i - 1) removed for every i = 2 mod 3 up to N (the last removal may still be to come)."""
    added = sorted(int(key[1:]) for key in keys)
    if not added:
        return True
    top = added[-1]
    expected = set(range(top + 1)) - {i - 1 for i in range(2, top + 1, 3)}
    return set(added) in (expected, expected | ({top - 1} if top % 3 == 2 else set()))


def test_readers_opening_while_the_writer_switches_generations_see_no_damage(tmp_path: Path) -> None:
    """The new checks compare files written at different moments: none may fire on a live index."""
    path = tmp_path / "ix"
    writer = subprocess.Popen(
        [sys.executable, "-c", READER_RACE_WRITER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout is not None and writer.stdout.readline().strip() == "OPEN"
    opened = 0
    while writer.poll() is None or opened == 0:
        with SimhashIndex(path, read_only=True) as index:
            counted = len(index)  # as of the open; iteration reads the database later, the writer went on
            keys = [m.key for m in index]
            assert _is_a_state_of_the_race_writer(keys) and len(set(keys)) == len(keys)
            assert counted <= len(keys) + 1  # (a removal can be all that came between)
        opened += 1
    assert writer.wait() == 0 and opened > 5
    with SimhashIndex(path, read_only=True) as index:
        assert len(index) == 2000


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 2**40),
    st.lists(
        st.tuples(
            st.integers(1, 2**64 - 1),
            st.text(min_size=1),
            st.none() | st.text(),
            st.none() | st.binary(min_size=1),
        ),
        max_size=80,
    ),
)
def test_batch_checksums_equal_row_checksums(
    start: int, items: list[tuple[int, str, str | None, bytes | None]]
) -> None:
    """The vectorised checksums written by add_many are the ones every read verifies row by row; a
    row's sketch is covered, a row without one checks as before sketches existed."""
    from scrapy_simhash.index.embedded.integrity import bad_rows, row_checks, stored_row_checks

    checks = row_checks(start, items)
    assert checks == [to_signed(row_check(start + i, *row[:3], row[3])) for i, row in enumerate(items)]
    as_stored = [
        (start + i, key, to_signed(h), meta, chk, sketch)
        for i, ((h, key, meta, sketch), chk) in enumerate(zip(items, checks, strict=True))
    ]
    assert stored_row_checks(as_stored).view(np.int64).tolist() == checks  # the check of every row at open
    for i, (h, key, meta, sketch) in enumerate(items):
        plain = row_check(start + i, h, key, meta)
        assert (to_signed(plain) == checks[i]) is (sketch is None)  # 2**-32 chance of a false failure
    seqs = np.arange(start, start + len(items), dtype=np.int64)
    hashes = np.array([row[0] for row in items], dtype=np.uint64)
    assert bad_rows(seqs, hashes, np.array(checks, dtype=np.int64)).size == 0
    if items:
        assert bad_rows(seqs, hashes ^ np.uint64(1), np.array(checks, dtype=np.int64)).size == len(items)
