"""A verified batch write on the embedded index checks each page once and hands its sketches on as
one matrix: the same errors for bad input as ever, nothing stored from a batch with a bad item, and
the pages found by their sketches after the write and after a reopen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from scrapy_simhash.index import open_index
from scrapy_simhash.index.embedded import embedded, sketch_column
from scrapy_simhash.index.verified import verified_embedded

NV = 128


def sketches(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, size=(n, NV), dtype=np.uint32)


def good_items(n: int) -> list[tuple[Any, ...]]:
    return [(i + 1, f"https://example.org/{i}", {"i": i}, s) for i, s in enumerate(sketches(n))]


def test_a_verified_batch_checks_each_page_once_and_keeps_its_sketches_a_matrix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every key and fingerprint was checked by the verified index and again by the simhash
    store (two calls a page each), and the sketches, encoded to one byte string a page for the rows,
    were joined back into a matrix for the LSH. Now one check a page, and no join."""
    calls = {"check_key": 0, "check_simhash": 0, "decoded": 0}

    def counted(name: str, real: Any) -> Any:
        def wrapper(value: Any) -> Any:
            calls[name] += 1
            return real(value)

        return wrapper

    for module in (embedded, verified_embedded):
        for name in ("check_key", "check_simhash"):
            monkeypatch.setattr(module, name, counted(name, getattr(module, name)))
    real_decode = sketch_column.SketchColumn._decode_many

    def decode_many(self: Any, rows: list[bytes]) -> np.ndarray:
        calls["decoded"] += len(rows)
        return real_decode(self, rows)

    monkeypatch.setattr(sketch_column.SketchColumn, "_decode_many", decode_many)
    items = good_items(300)
    with open_index(tmp_path / "ix") as index:
        assert index.add_many(items) == 300
        assert calls == {"check_key": 300, "check_simhash": 300, "decoded": 0}
        for h, key, meta, sketch in items[::37]:
            (match, *_) = index.query(h, sketch=sketch)
            assert (match.key, match.simhash, match.meta, match.similarity) == (key, h, meta, 1.0)
    with open_index(tmp_path / "ix") as index:
        for h, key, _meta, sketch in items[::41]:
            assert index.query(h, sketch=sketch)[0].key == key
            assert np.array_equal(index.sketch(key).values, sketch & 0xFF)


class ForeignSketch:
    """A sketch object of a scheme of one's own: its values alone would pass every other check."""

    scheme = "someone-elses/2"

    def __init__(self, values: np.ndarray) -> None:
        self.values = values


BAD_ITEMS: dict[str, tuple[tuple[Any, ...], type[Exception], str]] = {
    "key not a str": ((5, 5, None, sketches(1)[0]), TypeError, "a key is a str, not int"),
    "key None": ((5, None, None, sketches(1)[0]), TypeError, "a key is a str, not NoneType"),
    "key empty": ((5, "", None, sketches(1)[0]), ValueError, "a key must not be empty"),
    "fingerprint 0": (
        (0, "b", None, sketches(1)[0]),
        ValueError,
        "the fingerprint 0 (a text without tokens) cannot be indexed or queried",
    ),
    "fingerprint of 65 bits": (
        (2**64, "b", None, sketches(1)[0]),
        ValueError,
        "a fingerprint is an unsigned 64-bit integer, got 18446744073709551616",
    ),
    "fingerprint negative": (
        (-3, "b", None, sketches(1)[0]),
        ValueError,
        "a fingerprint is an unsigned 64-bit integer, got -3",
    ),
    "fingerprint a str": (("x", "b", None, sketches(1)[0]), TypeError, "a fingerprint is an int, not str"),
    "fingerprint a bool": ((True, "b", None, sketches(1)[0]), TypeError, "a fingerprint is an int, not bool"),
    "fingerprint a float": (
        (3.0, "b", None, sketches(1)[0]),
        TypeError,
        "a fingerprint is an int, not float",
    ),
    "sketch too short": (
        (5, "b", None, sketches(1)[0][:64]),
        ValueError,
        "a sketch has shape (128,), got (64,)",
    ),
    "sketch of two dimensions": (
        (5, "b", None, sketches(1)),
        ValueError,
        "a sketch has shape (128,), got (1, 128)",
    ),
    "sketch of floats": (
        (5, "b", None, sketches(1)[0].astype(float)),
        ValueError,
        "sketch values must be integers in 0 .. 2**32-1",
    ),
    "sketch of negative ints": (
        (5, "b", None, [-1] * NV),
        ValueError,
        "sketch values must be integers in 0 .. 2**32-1",
    ),
    "sketch values over 32 bits": (
        (5, "b", None, np.full(NV, 2**40, dtype=np.uint64)),
        ValueError,
        "sketch values must be integers in 0 .. 2**32-1",
    ),
    "sketch of another scheme": (
        (5, "b", None, ForeignSketch(sketches(1)[0])),
        ValueError,
        "this index holds minhash-doc/1 sketches, not someone-elses/2",
    ),
    "meta not JSON, with a sketch": (
        (5, "b", {"x": object()}, sketches(1)[0]),
        ValueError,
        "meta of 'b' must be a JSON-serialisable mapping: Object of type object is not JSON serializable",
    ),
    "meta not JSON, without a sketch": (
        (5, "b", {"x": float("nan")}),
        ValueError,
        "meta of 'b' must be a JSON-serialisable mapping: Out of range float values are not JSON compliant",
    ),
}


@pytest.mark.parametrize("where", [0, 40, 80])
@pytest.mark.parametrize("name", sorted(BAD_ITEMS))
def test_one_bad_page_in_a_verified_batch_raises_its_error_and_stores_nothing(
    tmp_path: Path, name: str, where: int
) -> None:
    bad, error, message = BAD_ITEMS[name]
    items = good_items(80)
    with open_index(tmp_path / "ix") as index:
        with pytest.raises(error) as raised:
            index.add_many([*items[:where], bad, *items[where:]])
        assert str(raised.value) == message
        assert len(index) == 0 and index.sketch(items[0][1]) is None
        assert index.query(items[3][0], sketch=items[3][3]) == []
        assert index.add_many(items) == 80  # the index takes the next batch as ever
        assert index.query(items[3][0], sketch=items[3][3])[0].key == items[3][1]


def test_a_batch_with_a_key_twice_and_pages_without_sketch_ends_as_its_last_items_say(tmp_path: Path) -> None:
    """The batch path that cannot hand the sketches on as one matrix (a key twice, a page without
    sketch) stores what the last item of each key says."""
    s = sketches(4, seed=9)
    with open_index(tmp_path / "ix") as index:
        index.add_many(
            [
                (1, "a", None, s[0]),
                (2, "b", None),
                (3, "a", None, s[1]),
                (4, "c", None, s[2]),
                (5, "b", None, s[3]),
            ]
        )
        assert len(index) == 3
        assert np.array_equal(index.sketch("a").values, s[1] & 0xFF)
        assert np.array_equal(index.sketch("b").values, s[3] & 0xFF)
        assert index.query(3, sketch=s[1])[0].key == "a" and index.query(1, sketch=s[0]) == []
        index.add_many([(6, "a", None), (7, "d", None, s[0])])
        assert index.sketch("a") is None and index.get("a").simhash == 6
        assert index.query(7, sketch=s[0])[0].key == "d"


def test_a_sketch_of_another_scheme_is_refused_by_every_verified_call(tmp_path: Path) -> None:
    """Values of another sketch scheme would be compared as if they were minhash-doc/1's: a
    similarity that means nothing. Each call that takes a sketch refuses it, naming both schemes."""
    items = good_items(3)
    h, _key, _meta, sketch = items[0]
    foreign = ForeignSketch(sketch)
    calls = {
        "add": lambda index: index.add(h, "x", sketch=foreign),
        "check_and_add": lambda index: index.check_and_add(h, "x", sketch=foreign),
        "query": lambda index: index.query(h, sketch=foreign),
        "query_many": lambda index: index.query_many([h], sketches=[foreign]),
    }
    with open_index(tmp_path / "ix") as index:
        index.add_many(items)
        for name, call in calls.items():
            with pytest.raises(ValueError, match="not someone-elses/2") as raised:
                call(index)
            assert "minhash-doc/1" in str(raised.value), name
        assert len(index) == 3 and "x" not in index
