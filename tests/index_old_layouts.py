"""Indexes as earlier development versions wrote them, built with raw sqlite3 and numpy (no run-time code
of the index), for the converter's tests (tests/test_index_upgrade.py).

Each builder writes one old kind at ``path`` from the same pages: ``(simhash, key, meta, sketch)``,
sketch a uint32 array of 128 minhash-doc/1 values or None. Checksums are computed here from their
documented formulas, so a damaged row can be told from an intact one. :func:`eight_byte_table_files`
rewrites an index's table files in the earlier on-disk layout, from the in-memory arrays that layout
stored as they were (the tables' segments, the LSH's sorted buckets).
"""

from __future__ import annotations

import json
import random
import sqlite3
import struct
import uuid
import zlib
from pathlib import Path

import numpy as np

NV = 128
THRESHOLD, BANDS, ROWS = 0.5, 32, 4
"""The verified rule's sketch settings (DEFAULT_RULE)."""
_GOLDEN, _MIXER = 0x9E3779B97F4A7C15, 0xD6E8FEB86659FD93
_M64 = (1 << 64) - 1

Page = tuple[int, str, dict | None, np.ndarray | None]


def pages(n: int = 48, seed: int = 3, every_without: int = 5) -> list[Page]:
    """Clusters of 4 near pages (near simhash and near sketch), every ``every_without``-th without sketch."""
    rng = random.Random(seed)
    out: list[Page] = []
    for i in range(n):
        cluster = i // 4
        base = np.random.default_rng(cluster).integers(0, 2**32, size=NV, dtype=np.uint32)
        sketch = base.copy()
        for j in rng.sample(range(NV), (i % 4) * 10):
            sketch[j] ^= np.uint32(1 + rng.getrandbits(7))  # the low byte differs too
        h = ((0x0123456789ABCDEF * (cluster + 1)) & _M64) ^ (1 << rng.randrange(64))
        meta = {"i": i, "t": "é"} if i % 3 else None
        out.append((h or 1, f"https://example.org/{i}", meta, None if i % every_without == 2 else sketch))
    return out


# -- the documented checksums -----------------------------------------------------------------------
def _mix(seq: int, h: int) -> int:
    x = (h ^ (seq * _GOLDEN)) & _M64
    x = ((x ^ (x >> 32)) * _MIXER) & _M64
    return ((x ^ (x >> 32)) & 0x7FFFFFFF) | 0x80000000


def _text_crc(key: str, meta: str | None, crc: int = 0) -> int:
    return zlib.crc32(f"{key}\x00{meta or ''}".encode("utf-8", "surrogatepass"), crc)


def row_check(seq: int, h: int, key: str, meta: str | None, sketch: bytes | None) -> int:
    """Signed: CRC-32 of (sketch, then) key NUL meta in the high half, a mix of seq and simhash low."""
    value = _text_crc(key, meta, zlib.crc32(sketch) if sketch else 0) << 32 | _mix(seq, h)
    return value - (1 << 64) if value >> 63 else value


def sketch_row_check(seq: int, key: str, sketch: bytes, meta: str | None) -> int:
    return _text_crc(key, meta, zlib.crc32(sketch, zlib.crc32(struct.pack("<q", seq))))


def settings_check(values: dict[str, str]) -> str:
    return str(zlib.crc32(json.dumps(values, sort_keys=True).encode()))


def _signed(h: int) -> int:
    return h - (1 << 64) if h >> 63 else h


def _meta(meta: dict | None) -> str | None:
    return None if meta is None else json.dumps(meta, ensure_ascii=False, separators=(",", ":"))


def encode(sketch: np.ndarray, bits: int) -> bytes:
    return (sketch.astype("<u4") if bits == 32 else (sketch & 0xFF).astype(np.uint8)).tobytes()


# -- the layouts ---------------------------------------------------------------------------------------
def _database(
    path: Path,
    rows: list[Page],
    *,
    chk: bool,
    sketch_column: bool,
    settings: dict[str, str],
    signed: bool,
    unchecked: int = 0,
    value_bits: int | None = None,
    removed: int = 0,
) -> None:
    """``index.sqlite3``: the pages' rows (seq 1, 2, ...; the first ``unchecked`` without checksum), then
    ``removed`` more seqs handed out to removals (the high-water seq moves past the last row)."""
    path.mkdir(parents=True)
    columns = (
        "seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, simhash INTEGER NOT NULL, meta TEXT"
    )
    columns += ", chk INTEGER" if chk else ""
    columns += ", sketch BLOB" if sketch_column else ""
    db = sqlite3.connect(path / "index.sqlite3", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("BEGIN")  # one transaction: a million rows in seconds
        db.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(f"CREATE TABLE entries ({columns})")
        db.execute("CREATE TABLE tombstones (seq INTEGER PRIMARY KEY)")
        for seq, (h, key, meta, sketch) in enumerate(rows, 1):
            text = _meta(meta)
            data = None if sketch is None or value_bits is None else encode(sketch, value_bits)
            values = [seq, key, _signed(h), text]
            if chk:
                values.append(None if seq <= unchecked else row_check(seq, h, key, text, data))
            if sketch_column:
                values.append(data)
            db.execute(f"INSERT INTO entries VALUES ({','.join('?' * len(values))})", values)
        if removed:
            db.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'entries'", (len(rows) + removed,))
        values = {"layout": "tiered:4:1:4:1", "k": "3", "db_id": uuid.uuid4().hex, **settings}
        if signed:
            values["check"] = settings_check(values)
        db.executemany("INSERT INTO settings VALUES (?, ?)", values.items())
        db.execute("COMMIT")
    finally:
        db.close()
    (path / "LOCK").touch()


def _sketch_settings(bits: int) -> dict[str, str]:
    params = {"num_values": NV, "threshold": THRESHOLD, "bands": BANDS, "rows": ROWS, "value_bits": bits}
    return {f"sketch_{name}": str(value) for name, value in {**params, "scheme": "minhash-doc/1"}.items()}


def format_1(path: Path, rows: list[Page]) -> None:
    """Before checksums: no ``chk`` column, no settings check, no format, no sketches."""
    _database(path, rows, chk=False, sketch_column=False, settings={}, signed=False)


def checks_without_format(path: Path, rows: list[Page], unchecked: int = 4) -> None:
    """Checksummed rows and settings but no ``format``; the first rows (kept from before) without one."""
    _database(path, rows, chk=True, sketch_column=False, settings={}, signed=True, unchecked=unchecked)


def format_2_unchecked(path: Path, rows: list[Page], unchecked: int = 6) -> None:
    """Format 2 whose first writer added checksums: rows up to ``unchecked_upto`` have none; 8-bit sketches
    in the rows, and seqs handed out to removals after the last row."""
    settings = {"format": "2", "unchecked_upto": str(unchecked), **_sketch_settings(8)}
    _database(
        path,
        rows,
        chk=True,
        sketch_column=True,
        settings=settings,
        signed=True,
        unchecked=unchecked,
        value_bits=8,
        removed=3,
    )


def format_2_without_sketches(path: Path, rows: list[Page]) -> None:
    """Format 2 written before sketches (no sketch column) or only ever in simhash mode."""
    _database(path, rows, chk=True, sketch_column=False, settings={"format": "2"}, signed=True)


def format_2_32_bit(path: Path, rows: list[Page]) -> None:
    """Format 2 with its sketches in the rows as 32-bit values (before 8 bits became the default)."""
    settings = {"format": "2", **_sketch_settings(32)}
    _database(path, rows, chk=True, sketch_column=True, settings=settings, signed=True, value_bits=32)


def two_stores(path: Path, rows: list[Page], bits: int | None = 8, orphan: bool = True) -> None:
    """Format 2 with the sketches in a second store ``sketches/minhash.sqlite3`` (a MinHash index;
    ``bits`` None: written before ``value_bits`` was recorded, 32-bit), and a sketch whose page a
    crash cut."""
    _database(path, rows, chk=True, sketch_column=True, settings={"format": "2"}, signed=True)
    stored = [(key, sketch, None) for _, key, _, sketch in rows if sketch is not None]
    if orphan:
        stored.append(("https://example.org/cut", rows[0][3], None))
    _minhash_database(path / "sketches", stored, bits)


def _minhash_database(
    directory: Path, stored: list[tuple[str, np.ndarray, dict | None]], bits: int | None
) -> None:
    """``minhash.sqlite3``: a MinHash index's rows (seq 1, 2, ...) and signed settings without ``format``
    (``bits`` None: without ``value_bits`` either, 32-bit values)."""
    directory.mkdir(parents=True)
    width = 32 if bits is None else bits
    db = sqlite3.connect(directory / "minhash.sqlite3", isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("BEGIN")  # one transaction: a million rows in seconds
        db.execute("CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute(
            "CREATE TABLE sketches (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL UNIQUE, "
            "sketch BLOB NOT NULL, meta TEXT, chk INTEGER NOT NULL)"
        )
        for seq, (key, sketch, meta) in enumerate(stored, 1):
            data, text = encode(sketch, width), _meta(meta)
            db.execute(
                "INSERT INTO sketches VALUES (?, ?, ?, ?, ?)",
                (seq, key, data, text, sketch_row_check(seq, key, data, text)),
            )
        values = {
            "kind": "minhash",
            "scheme": "minhash-doc/1",
            "num_values": str(NV),
            "threshold": repr(THRESHOLD),
            "bands": str(BANDS),
            "rows": str(ROWS),
            "db_id": uuid.uuid4().hex,
        }
        if bits is not None:
            values["value_bits"] = str(bits)
        values["check"] = settings_check(values)
        db.executemany("INSERT INTO settings VALUES (?, ?)", values.items())
        db.execute("COMMIT")
    finally:
        db.close()


def minhash_index(path: Path, rows: list[Page], bits: int | None = None) -> None:
    """A MinHash-kind index (``dedupe --method minhash --index``) as written before it recorded a
    format: the pages with a sketch, their meta kept; ``bits`` None: before ``value_bits`` too."""
    _minhash_database(
        path, [(key, sketch, meta) for _, key, meta, sketch in rows if sketch is not None], bits
    )
    (path / "LOCK").touch()


KINDS = {
    "format-1": format_1,
    "checks-without-format": checks_without_format,
    "format-2-unchecked-rows": format_2_unchecked,
    "format-2-without-sketches": format_2_without_sketches,
    "format-2-32-bit-sketches": format_2_32_bit,
    "sketch-store": two_stores,
    "sketch-store-32-bit": lambda path, rows: two_stores(path, rows, bits=None),
}
"""Every old kind, by name."""
WITH_SKETCHES = {"format-2-unchecked-rows", "format-2-32-bit-sketches", "sketch-store", "sketch-store-32-bit"}


def eight_byte_table_files(path: Path) -> None:
    """Rewrite the table files of the index at ``path`` (written by this version) as earlier versions
    wrote them: per table entry a combined key and a row (4 bytes each, the in-memory segment's
    arrays), and, when the generation has the sketches' LSH, 8-byte bucket entries (``band key's high
    32 bits << 32 | id``) with their directory and window width; the manifest's sizes and CRC-32s to
    match."""
    from scrapy_simhash.index.lsh.lsh_bands import BandHasher
    from scrapy_simhash.index.lsh.lsh_buckets import SortedBuckets, band_entries
    from scrapy_simhash.index.tables.layouts import resolve
    from scrapy_simhash.index.tables.tables import Segment

    manifest = json.loads((path / "manifest.json").read_text())
    files = manifest["files"]
    hashes = np.load(path / files["hashes"]["name"])
    seqs = np.load(path / files["seqs"]["name"]).astype(np.int64)
    segment = Segment.build(resolve(manifest["layout"], 0), hashes, seqs)
    arrays = {"keys": segment.keys, "rows": segment.rows}
    for part in ("entries", "directory"):
        (path / files.pop(part)["name"]).unlink()
    del manifest["tables"], manifest["prefix_bits"]
    info = manifest.get("lsh")
    if info is not None:
        lsh_seqs = np.load(path / files["lsh_seqs"]["name"]).astype(np.int64).tolist()
        with sqlite3.connect(path / "index.sqlite3") as conn:  # the sketches are in the rows
            by_seq = dict(conn.execute("SELECT seq, sketch FROM entries WHERE sketch IS NOT NULL"))
        conn.close()
        blob = b"".join(by_seq[seq] for seq in lsh_seqs)
        sketches = np.frombuffer(blob, dtype=np.uint8).reshape(-1, info["num_values"])
        buckets = SortedBuckets(band_entries(BandHasher(info["bands"], info["rows"]), sketches))
        arrays.update(lsh_entries=buckets.entries, lsh_directory=buckets.directory)
        del info["entries"], info["prefix_bits"]
        info["width"] = buckets.width
    generation = int(manifest["generation"])
    for part, array in arrays.items():
        name = f"tables-{generation:06d}.{part}.npy"
        np.save(path / name, array, allow_pickle=False)
        data = (path / name).read_bytes()
        files[part] = {"name": name, "bytes": len(data), "crc32": zlib.crc32(data)}
    (path / "manifest.json").write_text(json.dumps(manifest))
