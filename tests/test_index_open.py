"""Opening the embedded index reads nothing in proportion to its size, unless a check is due.

A cleanly closed index opens on its manifest, its files' sizes and headers, its commit mark and a
few lookups; after an unclean shutdown (the last writer was killed) the next opener runs SQLite's
check; damage at rest is found by ``scrapy-simhash index check`` (a subprocess here) or
``verify="full"``. What is counted: calls of SQLite's checks, of the files' CRC-32, of ``count(*)``,
and SQLite's virtual-machine steps while opening (rows read), at two sizes of index.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scrapy_simhash import SimhashIndex
from scrapy_simhash.index import IndexCorruptError, open_index
from scrapy_simhash.index.embedded import database, storage
from scrapy_simhash.index.embedded.integrity import read_mark
from scrapy_simhash.index.tables import manifest as table_files
from scrapy_simhash.index.tables import prefault

ENTRY = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"
KILLED = r"""
import sys
from scrapy_simhash import SimhashIndex

index = SimhashIndex(sys.argv[1], synchronous="normal")
index.add_many([(i + 1, f"late{i}", None) for i in range(30)])
print("DONE", flush=True)
sys.stdin.readline()
"""


class Spy:
    """Counts what an open reads: SQLite checks, CRC-32s of files, ``count(*)``, VM steps."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sqlite_checks: list[bool] = []
        self.crcs = 0
        self.steps = 0
        real_check, real_crc, real_connect = storage.check_sqlite, table_files._crc, database.connect

        def check(conn: sqlite3.Connection, path: Path, thorough: bool) -> None:
            self.sqlite_checks.append(thorough)
            real_check(conn, path, thorough)

        def crc(path: Path) -> int:
            self.crcs += 1
            return real_crc(path)

        def connect(*args: Any) -> sqlite3.Connection:
            conn = real_connect(*args)
            conn.set_progress_handler(self._step, 100)
            return conn

        monkeypatch.setattr(storage, "check_sqlite", check)
        monkeypatch.setattr(table_files, "_crc", crc)
        monkeypatch.setattr(storage, "connect", connect)

    def _step(self) -> int:
        self.steps += 100
        return 0

    def reset(self) -> None:
        self.sqlite_checks, self.crcs, self.steps = [], 0, 0


def _verified(path: Path, n: int) -> None:
    """A verified index of ``n`` pages, all in its table files (compacted), cleanly closed."""
    rng = np.random.default_rng(n)
    hashes = rng.integers(1, 2**63, size=n, dtype=np.uint64).tolist()
    sketches = rng.integers(0, 2**32, size=(n, 128), dtype=np.uint32)
    with open_index(path) as index:
        index.add_many((h, f"https://e.example/{i}", None, sketches[i]) for i, h in enumerate(hashes))
        index.compact()


def _simhash(path: Path, n: int = 300) -> dict[str, int]:
    rows = {f"k{i}": (i * 0x9E3779B97F4A7C15) % (1 << 64) or 1 for i in range(n)}
    with SimhashIndex(path) as index:
        index.add_many([(h, key, None) for key, h in list(rows.items())[: n // 2]])
        index.compact()
        index.add_many([(h, key, None) for key, h in list(rows.items())[n // 2 :]])
    return rows


def test_the_mark_says_clean_only_after_a_clean_close(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    index = SimhashIndex(path)
    index.add(5, "a")
    mark = read_mark(path)
    assert mark is not None and not mark.clean
    index.close()
    mark = read_mark(path)
    assert mark is not None and mark.clean and (mark.high, mark.count) == (1, 1)
    with SimhashIndex(path, read_only=True):  # a reader leaves it as it is
        pass
    assert read_mark(path).clean  # type: ignore[union-attr]


@pytest.mark.parametrize("read_only", [False, True])
def test_a_cleanly_closed_index_opens_without_reading_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, read_only: bool
) -> None:
    small, large = tmp_path / "small", tmp_path / "large"
    _verified(small, 1_000)
    _verified(large, 10_000)
    spy = Spy(monkeypatch)
    steps = []
    for path in (small, large):
        with open_index(path) as index:  # a writer's first open: adds what the database lacks, once
            pass
        spy.reset()
        with open_index(path, read_only=read_only) as index:
            assert len(index) == (1_000 if path is small else 10_000)
            assert (spy.sqlite_checks, spy.crcs) == ([], 0)
            assert index.simhashes._store.counts == 0  # the row count is the mark's
        steps.append(spy.steps)
    assert steps[1] < 2 * steps[0] + 2_000, steps  # ten times the pages, not ten times the rows read


def test_after_a_killed_writer_the_next_open_runs_sqlite_integrity_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ix"
    _simhash(path)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "DONE"
    spy = Spy(monkeypatch)
    with SimhashIndex(path, read_only=True) as index:  # a writer holds it: it checked when it opened
        assert spy.sqlite_checks == [] and len(index) >= 300
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    for read_only, thorough in ((True, False), (False, True)):
        spy.reset()
        with SimhashIndex(path, read_only=read_only) as index:
            assert spy.sqlite_checks == [thorough]  # quick_check for a reader, integrity_check for a writer
            assert len(index) == 330 and index._store.counts >= 1  # counted, not taken from the mark
    spy.reset()
    with SimhashIndex(path) as index:  # the writer closed it cleanly: no check due
        assert spy.sqlite_checks == [] and len(index) == 330


def test_verify_full_checks_a_cleanly_closed_index_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ix"
    _simhash(path)
    spy = Spy(monkeypatch)
    with SimhashIndex(path, verify="full"):
        assert spy.sqlite_checks == [True] and spy.crcs == 4
    with pytest.raises(ValueError, match="verify"):
        SimhashIndex(path, verify="sometimes")


def _cli_check(path: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("SCRAPY_SIMHASH")}
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "index", "check", *options, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_index_check_finds_damage_at_rest_that_a_clean_open_does_not_read(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _verified(path, 300)
    done = _cli_check(path)
    assert done.returncode == 0 and "ok (300 rows" in done.stdout, done.stderr
    manifest = json.loads((path / "manifest.json").read_text())
    target = path / manifest["files"]["lsh_entries"]["name"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x04
    target.write_bytes(data)
    done = _cli_check(path)
    assert done.returncode == 1, done.stderr
    assert f"{target.name} fails its CRC-32 check" in done.stdout and "DAMAGED" in done.stdout


def test_index_check_finds_a_damaged_row_and_a_lost_one(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    _simhash(path)
    with sqlite3.connect(path / "index.sqlite3") as conn:
        conn.execute("UPDATE entries SET simhash = simhash + 1 WHERE key = 'k3'")  # in the base
    conn.close()
    done = _cli_check(path)
    assert done.returncode == 1 and "fails its checksum" in done.stdout, (done.stdout, done.stderr)
    _simhash(tmp_path / "other")
    with sqlite3.connect(tmp_path / "other" / "index.sqlite3") as conn:
        conn.execute("DELETE FROM entries WHERE key = 'k3'")  # a row of the base gone, nothing else told
    conn.close()
    done = _cli_check(tmp_path / "other")
    assert done.returncode == 1 and "lost acknowledged writes" in done.stdout, (done.stdout, done.stderr)
    assert _cli_check(tmp_path / "nothing").returncode == 2


def test_a_row_count_that_disagrees_with_the_mark_is_counted(tmp_path: Path) -> None:
    """The mark's count is used only while it agrees with the database: its high-water seq, and the
    rows the table files and the newer rows account for."""
    path = tmp_path / "ix"
    _simhash(path)
    with SimhashIndex(path, read_only=True) as index:
        assert len(index) == 300 and index._store.counts == 0
    with sqlite3.connect(path / "index.sqlite3") as conn:  # the high-water seq moved, the mark not told
        conn.execute("UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'entries'")
    conn.close()
    with SimhashIndex(path, read_only=True) as index:
        assert len(index) == 300 and index._store.counts >= 1
    with sqlite3.connect(path / "index.sqlite3") as conn:  # a newer row lost, the high-water seq as marked
        conn.execute("DELETE FROM entries WHERE key = 'k200'")
        conn.execute("UPDATE sqlite_sequence SET seq = seq - 1 WHERE name = 'entries'")
    conn.close()
    for read_only in (True, False):
        with pytest.raises(IndexCorruptError, match="lost acknowledged writes"):
            SimhashIndex(path, read_only=read_only)


def test_an_open_maps_the_files_without_populating_them_and_a_thread_faults_them_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MAP_POPULATE faults in every page before the open returns (linear: ~5 GB at 10M verified
    pages); the prefault thread does it afterwards, without the interpreter's lock."""
    import mmap
    import threading

    from scrapy_simhash.index.tables import prefault

    path = tmp_path / "ix"
    _verified(path, 500)
    populate = getattr(mmap, "MAP_POPULATE", 0)
    real, flags = mmap.mmap, []

    def recording(*args: Any, **kwargs: Any) -> mmap.mmap:
        flags.append(kwargs.get("flags", 0))
        return real(*args, **kwargs)

    monkeypatch.setattr(mmap, "mmap", recording)
    before = prefault.faulted_in()
    with open_index(path) as index:
        mapped = len(flags)  # the table and LSH files that hold anything (an empty one is not mapped)
        assert mapped >= 8 and not any(flag & populate for flag in flags)
        assert any(thread.name == "scrapy-simhash-prefault" for thread in threading.enumerate())
        assert prefault.wait()  # waits for the thread's work (an event), asserts no duration
        assert prefault.faulted_in() >= before + mapped
        assert len(index) == 500


@pytest.mark.parametrize("part", ["hashes", "lsh_entries"])
def test_damage_at_rest_is_found_after_a_clean_open_and_refused(tmp_path: Path, part: str) -> None:
    """A clean open reads no file whole; the prefault thread then checks each file's CRC-32, and a
    file that fails makes the index refuse its next call, rather than answer from it. Opened with
    verify="full", the table files are rebuilt from the database and the index answers again."""
    path = tmp_path / "ix"
    _verified(path, 300)
    with open_index(path, read_only=True) as index:
        stored = list(index)
    manifest = json.loads((path / "manifest.json").read_text())
    target = path / manifest["files"][part]["name"]
    data = bytearray(target.read_bytes())
    data[len(data) // 2 + 3] ^= 0x10
    target.write_bytes(data)

    for read_only in (True, False):
        # refused at the open (the thread was quick) or at the next call
        with pytest.raises(IndexCorruptError) as raised, open_index(path, read_only=read_only) as index:
            assert prefault.wait()
            index.query(stored[0].simhash)
        assert f"{target.name} fails its CRC-32 check" in str(raised.value)
        assert 'verify="full"' in str(raised.value)

    with open_index(path, verify="full") as index:  # its own CRC checks: the files rebuilt from the rows
        assert prefault.wait()
        assert {m.key for m in index.query(stored[0].simhash)} >= {stored[0].key}
        assert len(index) == 300
    with open_index(path) as index:  # and clean from then on
        assert prefault.wait()
        assert [m.key for m in index.query(stored[0].simhash, k=0)] == [stored[0].key]


def test_a_sound_index_is_not_refused_after_the_files_are_checked(tmp_path: Path) -> None:
    from scrapy_simhash.index.tables import prefault

    path = tmp_path / "ix"
    _verified(path, 300)
    with open_index(path) as index:
        assert prefault.wait()
        assert prefault.damage_in(path) == []
        assert len(list(index)) == 300


def test_index_check_repair_rebuilds_damaged_table_files(tmp_path: Path) -> None:
    """What the refusal tells a user to run: the writer's full open writes the files again."""
    path = tmp_path / "ix"
    _verified(path, 300)
    manifest = json.loads((path / "manifest.json").read_text())
    for part in ("hashes", "lsh_entries"):
        target = path / manifest["files"][part]["name"]
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0x04
        target.write_bytes(data)
    assert _cli_check(path).returncode == 1
    done = _cli_check(path, "--repair")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "repair: the table files were written again" in done.stdout and "ok (300 rows" in done.stdout
    assert _cli_check(path).returncode == 0
    done = _cli_check(path, "--repair")  # sound: nothing to write again
    assert done.returncode == 0 and "repair: no table file needed writing again" in done.stdout
    with open_index(path) as index:
        assert prefault.wait()
        assert len(list(index)) == 300


def test_index_check_calls_table_files_of_the_earlier_layout_sound_and_repair_rewrites_them(
    tmp_path: Path,
) -> None:
    """Files of the 8-byte layout are not damage: ``index check`` says ok (exit 0) with a note that
    names the way to write them again, and ``--repair`` does so."""
    from index_old_layouts import eight_byte_table_files

    path = tmp_path / "ix"
    _verified(path, 300)
    eight_byte_table_files(path)
    done = _cli_check(path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "note: the table files have an earlier layout" in done.stdout and "--repair" in done.stdout
    assert "ok (300 rows" in done.stdout and "damaged" not in done.stdout
    done = _cli_check(path, "--repair")
    assert done.returncode == 0 and "repair: the table files were written again" in done.stdout
    assert "note:" not in done.stdout and "ok (300 rows" in done.stdout
