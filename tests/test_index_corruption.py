"""Damaged files: each kind gives a clear error or an automatic rebuild, never wrong answers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from index_old_layouts import eight_byte_table_files

from scrapy_simhash import SimhashIndex
from scrapy_simhash.index import IndexCorruptError

PARTS = ("entries", "directory", "hashes", "seqs")


def _fill(path: Path) -> dict[str, int]:
    """An index with a compacted base, a tombstone in it, and fresh rows beyond it."""
    rng = np.random.default_rng(11)
    hashes = [int(h) for h in rng.integers(1, 2**64, size=400, dtype=np.uint64)]
    rows = {f"k{i}": h for i, h in enumerate(hashes)}
    rows["twin"] = hashes[0]
    with SimhashIndex(path) as index:
        index.add_many([(h, key, {"n": key}) for key, h in list(rows.items())[:300]])
        index.compact()
        index.add_many([(h, key, None) for key, h in list(rows.items())[300:]])
        index.remove("k7")
    del rows["k7"]
    return rows


def _assert_exact(index: SimhashIndex, rows: dict[str, int]) -> None:
    assert len(index) == len(rows)
    probes = [*list(rows.values())[::7], rows["twin"] ^ 0b101]
    for probe in probes:
        got = sorted((m.key, m.distance) for m in index.query(probe))
        expected = sorted(
            (key, bin(probe ^ h).count("1")) for key, h in rows.items() if bin(probe ^ h).count("1") <= 3
        )
        assert got == expected


def _table_file(path: Path, part: str) -> Path:
    manifest = json.loads((path / "manifest.json").read_text())
    return path / manifest["files"][part]["name"]


def _reopen_rebuilds(path: Path, rows: dict[str, int], verify: bool | str = True) -> None:
    with SimhashIndex(path, verify=verify) as index:
        assert index.stats()["rebuilds"] == 1
        _assert_exact(index, rows)
    with SimhashIndex(path, verify=verify) as index:  # the rebuilt files are sound again
        assert index.stats()["rebuilds"] == 0
        _assert_exact(index, rows)


@pytest.mark.parametrize("part", PARTS)
@pytest.mark.parametrize("damage", ["truncate", "flip", "delete", "header"])
def test_damaged_table_file_is_rebuilt(tmp_path: Path, part: str, damage: str) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    target = _table_file(path, part)
    data = bytearray(target.read_bytes())
    if damage == "truncate":
        target.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        data[len(data) - 3] ^= 0x10
        target.write_bytes(data)
    elif damage == "header":
        data[10] ^= 0xFF
        target.write_bytes(data)
    else:
        target.unlink()
    # a flipped bit keeps the file's size and header: a clean open does not read every byte of the
    # files (`index check` and verify="full" do, tests/test_index_open.py), so it is asked for here
    _reopen_rebuilds(path, rows, verify="full" if damage == "flip" else True)


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: text[: len(text) // 2],
        lambda text: "",
        lambda text: "\x00\xff garbage",
        lambda text: text.replace('"max_seq"', '"max_sek"'),
        lambda text: text.replace("scrapy-simhash-index/1", "other/9"),
    ],
    ids=["truncated", "empty", "garbage", "missing-field", "wrong-format"],
)
def test_damaged_manifest_is_rebuilt(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "ix"
    rows = _fill(path)
    manifest = path / "manifest.json"
    manifest.write_text(damage(manifest.read_text()))
    _reopen_rebuilds(path, rows)


def test_a_check_of_files_written_again_under_their_names_finds_no_damage(
    tmp_path: Path, monkeypatch
) -> None:
    """An open maps the first table files, then finds another one missing and writes the generation
    again from the database: the background CRC-32 check of the files mapped before, run after the
    new ones are written, must not call the new files damaged (nor read a file cut short under it)."""
    from scrapy_simhash.index.tables import prefault

    path = tmp_path / "ix"
    rows = _fill(path)
    _table_file(path, "directory").unlink()
    held: list[tuple] = []
    monkeypatch.setattr(prefault, "in_background", lambda *args: held.append(args))
    with SimhashIndex(path) as index:
        assert index.stats()["rebuilds"] == 1
    monkeypatch.undo()
    assert any(args[1] is not None for args in held)  # the entries, mapped before the rebuild
    for args in held:
        if args[1] is not None:
            prefault._check(*args)
    assert prefault.damage_in(path) == []
    with SimhashIndex(path) as index:
        _assert_exact(index, rows)


def test_table_files_of_the_earlier_8_byte_layout_are_written_again_once(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    eight_byte_table_files(path)
    _reopen_rebuilds(path, rows)
    files = json.loads((path / "manifest.json").read_text())["files"]
    assert set(files) == set(PARTS)
    assert np.load(path / files["entries"]["name"]).dtype == np.uint32
    assert not list(path.glob("tables-*.keys.npy")) and not list(path.glob("tables-*.rows.npy"))


def test_missing_manifest_is_rebuilt(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    (path / "manifest.json").unlink()
    with SimhashIndex(path) as index:
        _assert_exact(index, rows)


def test_table_files_of_another_index_are_not_trusted(tmp_path: Path) -> None:
    rows = _fill(tmp_path / "ix")
    with SimhashIndex(tmp_path / "other") as other:
        other.add(0xABCDEF, "stranger")
        other.compact()
    for name in ["manifest.json", *(p.name for p in (tmp_path / "ix").glob("tables-*"))]:
        (tmp_path / "ix" / name).unlink()
    for source in (tmp_path / "other").glob("tables-*"):
        (tmp_path / "ix" / source.name).write_bytes(source.read_bytes())
    (tmp_path / "ix" / "manifest.json").write_bytes((tmp_path / "other" / "manifest.json").read_bytes())
    _reopen_rebuilds(tmp_path / "ix", rows)


def test_stale_files_from_an_interrupted_merge_are_removed(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    rows = _fill(path)
    (path / "tables-999999.keys.npy").write_bytes(b"half written")
    (path / "manifest.json.tmp").write_text("{")
    with SimhashIndex(path) as index:
        _assert_exact(index, rows)
        assert index.stats()["rebuilds"] == 0
    assert not (path / "tables-999999.keys.npy").exists() and not (path / "manifest.json.tmp").exists()


@pytest.mark.parametrize("damage", ["header", "garbage", "truncate"])
def test_damaged_database_is_a_clear_error(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "ix"
    _fill(path)
    db = path / "index.sqlite3"
    data = bytearray(db.read_bytes())
    if damage == "header":
        data[:16] = b"not a database!!"
    elif damage == "garbage":
        data = bytearray(b"\x13" * len(data))
    else:
        data = data[:50]
    db.write_bytes(data)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    with pytest.raises(IndexCorruptError, match="source of truth"):
        SimhashIndex(path)
    # the lock is released after the failure; emptying the index takes an explicit reset
    with SimhashIndex(path, reset=True) as index:
        assert len(index) == 0


def test_seqs_take_four_bytes_on_disk_and_older_eight_byte_files_still_load(tmp_path: Path) -> None:
    """The table files keep each fingerprint's seq in 4 bytes (widened to int64 when loaded); a
    generation written with 8-byte seqs (before) is valid as it is: answered from, not rebuilt."""
    import zlib

    path = tmp_path / "ix"
    rows = _fill(path)
    seqs_file = _table_file(path, "seqs")
    on_disk = np.load(seqs_file)
    assert on_disk.dtype == np.uint32 and on_disk.size == 300
    with SimhashIndex(path) as index:
        assert index.stats()["rebuilds"] == 0
        _assert_exact(index, rows)
    np.save(seqs_file, on_disk.astype(np.int64))  # as an earlier version wrote it
    manifest = json.loads((path / "manifest.json").read_text())
    data = seqs_file.read_bytes()
    manifest["files"]["seqs"].update(bytes=len(data), crc32=zlib.crc32(data))
    (path / "manifest.json").write_text(json.dumps(manifest))
    with SimhashIndex(path) as index:
        assert index.stats()["rebuilds"] == 0
        _assert_exact(index, rows)
        index.compact()  # the next generation is written narrow again
    assert np.load(_table_file(path, "seqs")).dtype == np.uint32
