"""Indexes of earlier development formats: refused at open with the command that converts them, and
``scrapy-simhash index upgrade OLD NEW`` (run as a subprocess from a clean environment) converts each
kind into an index that answers what the old rows imply; damaged old input writes nothing."""

from __future__ import annotations

import dataclasses
import os
import random
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from index_old_layouts import BANDS, KINDS, NV, ROWS, THRESHOLD, WITH_SKETCHES, Page, minhash_index, pages

from scrapy_simhash.decision import DEFAULT_RULE
from scrapy_simhash.index import open_index
from scrapy_simhash.index.embedded.embedded import SimhashIndex
from scrapy_simhash.index.embedded.store_format import IndexFormatError

ENTRY = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"
RULE = dataclasses.replace(DEFAULT_RULE, distance=3)


def cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash index ...`` with nothing from the test's environment but PATH."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "index", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )


def files(directory: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()
    }


def queries(rows: list[Page]) -> list[tuple[int, np.ndarray | None]]:
    """Near each page (a few bits, a few values changed), the pages themselves without sketch, far ones."""
    rng = np.random.default_rng(7)
    out: list[tuple[int, np.ndarray | None]] = []
    for h, _, _, sketch in rows:
        near = rng.integers(0, 2**32, size=NV, dtype=np.uint32) if sketch is None else sketch.copy()
        near[rng.choice(NV, 20, replace=False)] ^= np.uint32(0x5A)
        out.append((h ^ 0b1011, near))
    out += [(h, None) for h, *_ in rows[::5]]
    out += [(int(rng.integers(1, 2**63)), rng.integers(0, 2**32, size=NV, dtype=np.uint32)) for _ in range(5)]
    return out


def brute_force(rows: list[Page], h: int, sketch: np.ndarray | None, with_sketches: bool) -> set[str]:
    return {
        key
        for ph, key, _, ps in rows
        if RULE.compare_values(h, ph, sketch, ps if with_sketches else None).near_duplicate
    }


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_old_index_is_refused_with_the_command_that_converts_it(tmp_path: Path, kind: str) -> None:
    old = tmp_path / "old"
    KINDS[kind](old, pages())
    before = files(old)
    command = re.escape(f"`scrapy-simhash index upgrade {old} NEW`")
    for opening in (
        lambda: open_index(old),
        lambda: open_index(old, read_only=True),
        lambda: open_index(old, mode="simhash"),
        lambda: SimhashIndex(old, read_only=True),
    ):
        with pytest.raises(IndexFormatError, match=command):
            opening()
    for args in (("info", str(old)), ("stats", str(old)), ("compact", str(old))):
        done = cli(tmp_path, *args)
        assert done.returncode == 2, done.stderr
        assert f"`scrapy-simhash index upgrade {old} NEW`" in done.stderr and "Traceback" not in done.stderr
    assert files(old) == before  # nothing was changed, moved or added


@pytest.mark.parametrize("kind", list(KINDS))
def test_upgrade_converts_each_old_kind_into_an_index_with_the_same_answers(
    tmp_path: Path, kind: str
) -> None:
    rows = pages()
    old, new = tmp_path / "old", tmp_path / "new"
    KINDS[kind](old, rows)
    before = files(old)
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 0, done.stderr
    assert "pages read" in done.stderr  # progress on stderr
    assert f"{len(rows)} pages" in done.stdout
    assert files(old) == before
    with_sketches = kind in WITH_SKETCHES
    without = sum(s is None for *_, s in rows) if with_sketches else len(rows)
    assert f"without sketch: {without} pages" in done.stdout
    with open_index(new, read_only=True) as index:
        # every page with its age (seq), fingerprint and meta; the sketch kept as its low 8 bits
        assert {m.key: (m.seq, m.simhash, m.meta) for m in index} == {
            key: (seq, h, meta or {}) for seq, (h, key, meta, _) in enumerate(rows, 1)
        }
        assert index.stats()["without_sketch"] == without
        for _, key, _, sketch in rows:
            got = index.sketch(key)
            if sketch is None or not with_sketches:
                assert got is None, key
            else:
                assert got is not None and np.array_equal(got.values, sketch & 0xFF), key
        assert index.sketch("https://example.org/cut") is None  # a sketch without page is dropped
        for h, sketch in queries(rows):
            assert {m.key for m in index.query(h, sketch=sketch)} == brute_force(
                rows, h, sketch, with_sketches
            )
    with open_index(new) as index:  # a writer goes on after the old high-water seq
        high = max(m.seq for m in index)
        index.add(
            0x5555, "https://example.org/new", None, sketch=rows[0][3] if rows[0][3] is not None else None
        )
        assert index.get("https://example.org/new").seq > high
    if kind == "format-2-unchecked-rows":  # three removals advanced the seq past the last row
        assert high == len(rows)
        with open_index(new, read_only=True) as index:
            assert index.get("https://example.org/new").seq == len(rows) + 4


def _flip_meta(database: Path, seq: int) -> None:
    with sqlite3.connect(database) as db:
        db.execute("UPDATE entries SET meta = ? WHERE seq = ?", ('{"i":999}', seq))
    db.close()


def _flip_sketch(database: Path, seq: int) -> None:
    with sqlite3.connect(database) as db:
        (sketch,) = db.execute("SELECT sketch FROM sketches WHERE seq = ?", (seq,)).fetchone()
        db.execute("UPDATE sketches SET sketch = ? WHERE seq = ?", (bytes([sketch[0] ^ 1]) + sketch[1:], seq))
    db.close()


def _flip_setting(database: Path, seq: int) -> None:
    with sqlite3.connect(database) as db:
        db.execute("UPDATE settings SET value = '2' WHERE name = 'k'")
    db.close()


def _garble_pages(database: Path, seq: int) -> None:
    """Random bytes over a page of the rows, in the middle of the file (no row checksum can catch it)."""
    data = bytearray(database.read_bytes())
    page = 4096
    start = len(data) // page // 2 * page
    assert start >= 4 * page
    data[start : start + page] = random.Random(seq).randbytes(page)
    database.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("kind", "damage", "where", "said"),
    [
        (
            "format-2-unchecked-rows",
            _flip_meta,
            "index.sqlite3",
            "row 20 ('https://example.org/19') fails its checksum",
        ),
        (
            "checks-without-format",
            _flip_meta,
            "index.sqlite3",
            "row 9 ('https://example.org/8') fails its checksum",
        ),
        ("format-2-32-bit-sketches", _flip_setting, "index.sqlite3", "the settings fail their checksum"),
        (
            "sketch-store",
            _flip_sketch,
            "sketches/minhash.sqlite3",
            "row 3 ('https://example.org/3') fails its checksum",
        ),
        ("format-1", _garble_pages, "index.sqlite3", "is damaged"),
    ],
)
def test_damaged_old_input_exits_1_and_writes_nothing(
    tmp_path: Path, kind: str, damage: object, where: str, said: str
) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    KINDS[kind](old, pages(400 if kind == "format-1" else 48))
    damage(
        old / where, 20 if kind == "format-2-unchecked-rows" else 9 if kind == "checks-without-format" else 3
    )
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 1, (done.returncode, done.stderr)
    lines = [line for line in done.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and said in lines[0], done.stderr
    assert "Traceback" not in done.stderr
    assert not new.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # no half-written directory left


def test_upgrade_refuses_an_existing_new_and_an_index_of_this_format(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    KINDS["format-2-unchecked-rows"](old, pages())
    new.mkdir()
    (new / "keep").write_text("mine")
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 2 and f"{new} exists" in done.stderr
    assert files(new) == {"keep": b"mine"}
    current = tmp_path / "current"
    with open_index(current) as index:
        index.add(5, "https://example.org/a")
    done = cli(tmp_path, "upgrade", str(current), str(tmp_path / "other"))
    assert done.returncode == 2 and "already in format 3" in done.stderr
    assert not (tmp_path / "other").exists()


# -- the MinHash kind (``dedupe --method minhash --index``) -------------------------------------------
@pytest.mark.parametrize("bits", [None, 8])
def test_a_minhash_index_of_an_earlier_format_is_refused_then_upgraded_with_the_same_answers(
    tmp_path: Path, bits: int | None
) -> None:
    """Without ``format`` (and, before the setting, without ``value_bits``: 32-bit values): refused with
    the command; converted with every row as it was, answering as an index built from the same rows."""
    from scrapy_simhash.index.embedded.minhash_store import MinHashIndex

    rows = pages()
    old, new, fresh = tmp_path / "old", tmp_path / "new", tmp_path / "fresh"
    minhash_index(old, rows, bits)
    command = re.escape(f"`scrapy-simhash index upgrade {old} NEW`")
    for opening in (lambda: MinHashIndex(old), lambda: open_index(old, kind="minhash", read_only=True)):
        with pytest.raises(IndexFormatError, match=command):
            opening()
    info = cli(tmp_path, "info", str(old))
    assert info.returncode == 2 and f"`scrapy-simhash index upgrade {old} NEW`" in info.stderr
    before = files(old)  # (a refused reader may leave SQLite's empty -wal and -shm files)
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 0, done.stderr
    assert files(old) == before
    stored = [(key, sketch, meta) for _, key, meta, sketch in rows if sketch is not None]
    width = 32 if bits is None else bits
    with MinHashIndex(fresh, THRESHOLD, NV, BANDS, ROWS, value_bits=width) as built:
        built.add_many(stored)
    with MinHashIndex(new, read_only=True) as index, MinHashIndex(fresh, read_only=True) as built:
        assert index.value_bits == width and len(index) == len(stored)
        for key, sketch, meta in stored:
            assert np.array_equal(index.get(key), sketch if width == 32 else sketch & 0xFF)
            assert index.meta(key) == (meta or {})
        for _, sketch in queries(rows):
            if sketch is not None:
                assert index.query(sketch) == built.query(sketch)


def test_a_damaged_minhash_index_exits_1_and_writes_nothing(tmp_path: Path) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    minhash_index(old, pages())
    _flip_sketch(old / "minhash.sqlite3", 3)
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 1 and "row 3 ('https://example.org/3') fails its checksum" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]


def test_a_reset_empties_an_old_index_without_converting_it(tmp_path: Path) -> None:
    """``reset=True`` (``SIMHASH_RESET``) needs no upgrade: the old index's files go, its second sketch
    store too, and a new index of this format takes their place."""
    old = tmp_path / "old"
    KINDS["sketch-store"](old, pages())
    (old / "notes.txt").write_text("not the index's")
    with open_index(old, reset=True) as index:
        assert len(index) == 0
        index.add(5, "https://example.org/a", None, sketch=np.arange(NV, dtype=np.uint32))
    assert not (old / "sketches").exists()
    assert (old / "notes.txt").read_text() == "not the index's"
    with open_index(old, read_only=True) as index:
        assert [m.key for m in index] == ["https://example.org/a"]


def test_a_conversion_stopped_half_way_leaves_no_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stopped after the rows are written (while the new index builds its tables): no NEW, no staging."""
    import scrapy_simhash.index.upgrade as converter

    old, new = tmp_path / "old", tmp_path / "new"
    KINDS["format-2-unchecked-rows"](old, pages())

    def interrupted(directory: Path, reader: object) -> None:
        assert (directory / "index.sqlite3").exists()  # the rows were written there
        raise KeyboardInterrupt("stopped")

    monkeypatch.setattr(converter, "_open_once", interrupted)
    with pytest.raises(KeyboardInterrupt):
        converter.upgrade(old, new)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]
    monkeypatch.undo()
    assert converter.upgrade(old, new).pages == 48  # and it can be run again


def test_the_crawls_payload_digests_and_captures_go_with_the_index(tmp_path: Path) -> None:
    """The WARC payload digests and the URLs' last captures a crawl keeps in the index directory are
    copied to NEW: a crawl pointed at NEW still writes revisit records for payloads archived before, and
    compares pages with their last captures."""
    from scrapy_simhash.index.archive.captures import Capture, EmbeddedCaptures
    from scrapy_simhash.index.archive.payload_digests import EmbeddedPayloadDigests, Original

    old, new = tmp_path / "old", tmp_path / "new"
    KINDS["format-2-unchecked-rows"](old, pages())
    digests = EmbeddedPayloadDigests(old)
    originals = {
        f"sha1:{i:032d}": Original(f"<urn:uuid:{i}>", f"https://example.org/{i}", "2024") for i in range(5)
    }
    for digest, original in originals.items():
        digests.confirm(digest, original)
    digests.close()
    captures = [
        Capture(f"https://example.org/{i}", f"<urn:uuid:{i}>", "2024", "p", "t", i + 1, None)
        for i in range(3)
    ]
    store = EmbeddedCaptures(old)
    for capture in captures:
        store.put(capture)
    store.close()
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 0, done.stderr
    assert "payload digests (for revisit records) copied: 5" in done.stdout
    assert "last captures of URLs (for change kinds) copied: 3" in done.stdout
    store = EmbeddedCaptures(new)
    try:
        assert [store.last(capture.url) for capture in captures] == captures
    finally:
        store.close()
    copied = EmbeddedPayloadDigests(new)
    try:
        assert {
            digest: copied.claim(digest, Original("x", "y", "z")).original for digest in originals
        } == originals
    finally:
        copied.close()


@pytest.mark.parametrize(
    ("build", "options"),
    [
        (lambda path: KINDS["sketch-store"](path, pages()), []),
        (lambda path: minhash_index(path, pages()), ["--method", "minhash"]),
    ],
    ids=["simhash-kind", "minhash-kind"],
)
def test_dedupe_with_an_old_index_exits_2_with_the_command(
    tmp_path: Path, corpus: Path, build: object, options: list[str]
) -> None:
    """``dedupe --index`` (and ``tag --index``, the same opening) on an index of an earlier format: a usage
    error naming the converter, the index left as it was."""
    warc = corpus / "warcs/cdxj-indexer/example.warc.gz"
    old = tmp_path / "old"
    build(old)
    before = files(old)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", ENTRY, "dedupe", str(warc), "--index", str(old), *options],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr
    assert f"`scrapy-simhash index upgrade {old} NEW`" in done.stderr and "Traceback" not in done.stderr
    assert {name: data for name, data in files(old).items() if not name.endswith(("-wal", "-shm"))} == before


def test_rows_only_in_the_write_ahead_log_of_a_killed_writer_are_converted(tmp_path: Path) -> None:
    """An old writer killed before SQLite checkpointed leaves committed rows in ``index.sqlite3-wal``
    alone: the converter reads them (it reads the file as immutable only when there is no log)."""
    import shutil

    from index_old_layouts import _signed, row_check

    rows = pages()
    live = tmp_path / "live"
    KINDS["format-2-32-bit-sketches"](live, rows)
    writer = sqlite3.connect(live / "index.sqlite3", isolation_level=None)
    writer.execute("PRAGMA wal_autocheckpoint=0")
    seq, h, key = len(rows) + 1, 0x0F0F, "https://example.org/late"
    writer.execute(
        "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?)",
        (seq, key, _signed(h), None, row_check(seq, h, key, None, None), None),
    )
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(live, old)  # what a SIGKILL leaves: the database and its log, not checkpointed
    writer.close()
    assert (old / "index.sqlite3-wal").stat().st_size > 0
    done = cli(tmp_path, "upgrade", str(old), str(new))
    assert done.returncode == 0, done.stderr
    with open_index(new, read_only=True) as index:
        late = index.get(key)
        assert late is not None and (late.seq, late.simhash) == (seq, h)
        assert len(index) == len(rows) + 1
