"""The embedded verified index keeps each page's sketch in the page's own row
(index/embedded/sketch_column.py): one database, the key once, the row's checksum over the sketch, a
byte a value. (Indexes written with a second sketch store, ``sketches/``, are converted by
``scrapy-simhash index upgrade``: tests/test_index_upgrade.py.)
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from scrapy_simhash.index import IndexCorruptError, open_index
from scrapy_simhash.index.embedded.embedded import SimhashIndex
from scrapy_simhash.index.verified.verified import VerifiedIndex

NV = 128


def sketch_of(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, size=NV, dtype=np.uint32)


def near(base: np.ndarray, seed: int, changed: int) -> np.ndarray:
    """``base`` with ``changed`` random values different in their low byte too."""
    rng = random.Random(seed)
    out = base.copy()
    for i in rng.sample(range(NV), changed):
        out[i] ^= np.uint32(1 + rng.getrandbits(7))
    return out


def pages(n: int = 60) -> list[tuple[int, str, dict[str, int], np.ndarray | None]]:
    """Clusters of near pages (sketch and simhash near), and every 7th page without sketch."""
    rng = random.Random(5)
    out = []
    for i in range(n):
        seed = sketch_of(i // 4)
        h = (0x0123456789ABCDEF * (i // 4 + 1)) & ((1 << 64) - 1) ^ (1 << rng.randrange(64))
        out.append(
            (h or 1, f"https://example.org/{i}", {"i": i}, None if i % 7 == 3 else near(seed, i, i % 4 * 8))
        )
    return out


def answers(index: VerifiedIndex, asked: list[tuple[int, np.ndarray | None]]) -> list[list[tuple]]:
    return [[(m.key, m.distance, m.similarity, m.seq) for m in index.query(h, sketch=s)] for h, s in asked]


def test_one_database_the_key_once_and_the_sketch_in_its_row(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    rows = pages()
    with open_index(path) as index:
        index.add_many(rows)
    assert not (path / "sketches").exists()
    assert sorted(p.name for p in path.glob("*.sqlite3")) == ["index.sqlite3"]
    with sqlite3.connect(path / "index.sqlite3") as db:
        lengths = dict(db.execute("SELECT key, length(sketch) FROM entries"))
    assert lengths == {key: (None if s is None else NV) for _, key, _, s in rows}  # a byte a value


def test_a_damaged_sketch_is_reported_not_answered_from(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with open_index(path) as index:
        index.add_many(pages(8))
    with sqlite3.connect(path / "index.sqlite3") as db:  # one byte of one sketch changed on disk
        (seq, sketch) = db.execute(
            "SELECT seq, sketch FROM entries WHERE sketch IS NOT NULL LIMIT 1"
        ).fetchone()
        db.execute("UPDATE entries SET sketch = ? WHERE seq = ?", (bytes([sketch[0] ^ 1]) + sketch[1:], seq))
    with pytest.raises(IndexCorruptError, match="fails its checksum"):
        open_index(path)
    with sqlite3.connect(path / "index.sqlite3") as db:  # restored, then the sketch dropped
        db.execute("UPDATE entries SET sketch = NULL WHERE seq = ?", (seq,))
    with SimhashIndex(path) as simhashes, pytest.raises(IndexCorruptError, match="fails its checksum"):
        [m for m in simhashes]


def test_add_sketch_is_durable_and_keeps_the_pages_age(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with open_index(path, mode="simhash") as index:
        index.add_many([(0xF0F0, "a", {"u": 1}), (0xF0F1, "b", None)])
    with open_index(path) as index:
        seq = index.get("a").seq
        assert index.add_sketch("a", sketch_of(1)) and not index.add_sketch("missing", sketch_of(1))
        assert not index.add_sketch("a", sketch_of(2))  # it has one
    with open_index(path) as index:
        assert index.get("a").seq == seq and index.get("a").meta == {"u": 1}
        assert np.array_equal(index.sketch("a").values, sketch_of(1) & 0xFF)
        found = index.query(0x0F0F0F0F, sketch=sketch_of(1))  # 16+ bits away: by sketch alone
        assert [(m.key, m.similarity) for m in found] == [("a", 1.0)]
        assert index.stats()["without_sketch"] == 1


def test_a_sketch_of_the_wrong_length_is_a_damaged_database(tmp_path: Path) -> None:
    """Even with a checksum that matches (written so by something else): the rule cannot read it."""
    from scrapy_simhash.index.embedded.integrity import row_check
    from scrapy_simhash.index.embedded.storage import to_signed, to_unsigned

    path = tmp_path / "ix"
    with open_index(path) as index:
        index.add(5, "a", None, sketch=sketch_of(3))
    with sqlite3.connect(path / "index.sqlite3") as db:
        seq, key, h, meta = db.execute("SELECT seq, key, simhash, meta FROM entries").fetchone()
        short = bytes(100)
        check = to_signed(row_check(seq, to_unsigned(h), key, meta, short))
        db.execute("UPDATE entries SET sketch = ?, chk = ? WHERE seq = ?", (short, check, seq))
    with pytest.raises(IndexCorruptError, match="sketch of the wrong length"):
        open_index(path)


def test_the_columns_settings_are_kept_and_checked(tmp_path: Path) -> None:
    """The similarity a column was created with is kept: another one is refused, as is a value width
    this version does not read (written by a later one)."""
    from scrapy_simhash.index import IndexSettingsError

    path = tmp_path / "ix"
    with open_index(path, similarity=0.6) as index:
        index.add(5, "a", None, sketch=sketch_of(3))
    with pytest.raises(IndexSettingsError, match=r"was created with other settings: threshold=0\.7"):
        open_index(path, similarity=0.7)
    with open_index(path, similarity=0.6) as index:
        assert index.rule.similarity == 0.6 and index.sketches.threshold == 0.6
    with SimhashIndex(path) as simhashes:
        simhashes.set_sketches([], {"sketch_value_bits": "4"})
    with pytest.raises(IndexSettingsError, match="4-bit sketch values, which this version does not read"):
        open_index(path, similarity=0.6)
    with SimhashIndex(path) as simhashes:  # the format keeps 8 bits: 32-bit values are an older one's
        simhashes.set_sketches([], {"sketch_value_bits": "32"})
    with pytest.raises(IndexSettingsError, match="records 32-bit sketch values; its format keeps 8"):
        open_index(path, similarity=0.6)
