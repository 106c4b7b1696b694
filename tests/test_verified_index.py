"""The verified index (index/verified/verified.py), embedded and on a real redis-server: its answers are
exactly the decision rule's (brute force over every stored page), pages without sketch are judged
by simhash, both stores persist, reset and go away together, and Redis stays atomic across processes.
"""

from __future__ import annotations

import multiprocessing
import random
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis_server import RedisServer

from scrapy_simhash.decision import DEFAULT_RULE
from scrapy_simhash.index import IndexLostError, Match, open_index
from scrapy_simhash.index.verified.sketch_stores import SKETCH_PREFIX_SUFFIX
from scrapy_simhash.index.verified.verified import VerifiedIndex

NV = 128
MASK = (1 << 64) - 1


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> RedisServer:
    srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield srv
    srv.stop()


class Backend:
    """Fresh verified indexes on one backend, and reopening them as another process would."""

    def __init__(self, name: str, tmp_path: Path, server: RedisServer | None) -> None:
        self.name, self.tmp_path, self.server = name, tmp_path, server
        self.opened: list[str] = []
        self.merges: list[Any] = []

    def location(self) -> str:
        if self.server is not None:
            return f"{self.server.url}?prefix=v-{uuid.uuid4().hex[:12]}"
        return str(self.tmp_path / f"ix-{uuid.uuid4().hex[:12]}")

    def open(self, location: str | None = None, **options: Any) -> VerifiedIndex:
        location = location or self.location()
        self.opened.append(location)
        if self.name.startswith("embedded-"):  # a table generation (with the sketches' LSH) every few writes
            options = {"pending_max": 2, "delta_min": 3, **options}
        index = open_index(location, **options)
        assert isinstance(index, VerifiedIndex)
        index.where = location  # type: ignore[attr-defined]
        return index

    def reopen(self, index: VerifiedIndex) -> VerifiedIndex:
        where = index.where  # type: ignore[attr-defined]
        index.close()
        return self.open(where)

    def cleanup(self) -> None:
        if self.server is None:
            return
        for location in self.opened:
            with open_index(location) as index:
                index.clear()

    def run_merges(self) -> None:
        """Run the generation writes started so far (``embedded-background``: recorded, not run,
        so that operations interleave with a merge under way until this step)."""
        for job in self.merges:
            job.run()
        self.merges.clear()


@pytest.fixture(params=["embedded", "embedded-merging", "embedded-background", "redis"])
def backend(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Backend:
    server = request.getfixturevalue("server") if request.param == "redis" else None
    made = Backend(request.param, tmp_path, server)
    made.merges = []
    if request.param == "embedded-background":
        from scrapy_simhash.index.embedded import generations
        from scrapy_simhash.index.lsh import bucket_runs
        from scrapy_simhash.index.lsh.lsh import MinHashLSH
        from scrapy_simhash.index.tables import delta_runs

        monkeypatch.setattr(generations, "start_thread", made.merges.append)
        # runs of a few pages at most: writes and answers over many sorted runs, merged or not, and
        # every merge of more than one page's entries in a thread of its own, published by a later write
        monkeypatch.setattr(delta_runs, "RUN_CAP", 4)
        monkeypatch.setattr(MinHashLSH, "RUN_CAP", 4 * DEFAULT_RULE.bands)
        monkeypatch.setattr(delta_runs, "INLINE_MAX", 1)
        monkeypatch.setattr(bucket_runs, "INLINE_MAX", DEFAULT_RULE.bands)
    yield made
    made.cleanup()


# -- the reference: the rule applied to every stored page ---------------------------------------


class Model:
    def __init__(self) -> None:
        self.rows: dict[str, tuple[int, np.ndarray | None, dict[str, Any], int]] = {}
        self.clock = 0

    def add(self, h: int, key: str, meta: dict[str, Any] | None, sketch: np.ndarray | None) -> None:
        self.clock += 1
        self.rows[key] = (h, sketch, dict(meta or {}), self.clock)

    def query(self, h: int, sketch: np.ndarray | None) -> list[tuple[Any, ...]]:
        return self.judged(self.rows, h, sketch)

    def judged(self, keys: Any, h: int, sketch: np.ndarray | None) -> list[tuple[Any, ...]]:
        """The answer to a query, the rule applied to the stored pages ``keys`` (in the order stored)."""
        found = []
        for key in keys:
            stored, stored_sketch, meta, clock = self.rows[key]
            verdict = DEFAULT_RULE.compare_values(h, stored, sketch, stored_sketch)
            if verdict.near_duplicate:
                found.append((key, stored, verdict.distance, verdict.similarity, meta, clock))
        found.sort(key=lambda r: (-(r[3] if r[3] is not None else -1.0), r[2], r[5]))
        return [row[:5] for row in found]


class IndexedModel(Model):
    """:class:`Model`'s answers over thousands of pages (the crash test's): the rule is applied to the
    pages it could judge near-duplicates, those within ``distance`` bits or sharing a band of sketch
    values (in either mode no other page is one), found over arrays of every page's values."""

    def __init__(self) -> None:
        super().__init__()
        self._arrays: tuple[list[str], list[int], np.ndarray, np.ndarray] | None = None

    def add(self, h: int, key: str, meta: dict[str, Any] | None, sketch: np.ndarray | None) -> None:
        super().add(h, key, meta, sketch)
        self._arrays = None

    def query(self, h: int, sketch: np.ndarray | None) -> list[tuple[Any, ...]]:
        rule = DEFAULT_RULE
        if self._arrays is None:
            keys = list(self.rows)
            values = np.zeros((len(keys), NV), dtype=np.uint32)
            with_sketch = np.zeros(len(keys), dtype=bool)
            for i, key in enumerate(keys):
                if (stored_sketch := self.rows[key][1]) is not None:
                    values[i], with_sketch[i] = rule.bits.reduce(np.asarray(stored_sketch, np.uint32)), True
            self._arrays = keys, [self.rows[key][0] for key in keys], values, with_sketch
        keys, simhashes, values, with_sketch = self._arrays
        near = np.array([(h ^ stored).bit_count() <= rule.distance for stored in simhashes], dtype=bool)
        if sketch is not None and keys:
            equal = values == rule.bits.reduce(np.asarray(sketch, np.uint32))
            width = rule.bands * rule.rows
            near |= with_sketch & equal[:, :width].reshape(-1, rule.bands, rule.rows).all(axis=2).any(axis=1)
        return self.judged([keys[i] for i in np.flatnonzero(near)], h, sketch)


def test_the_indexed_model_answers_as_the_model() -> None:
    """Pages planted around a few seeds (near and far in simhash, sharing 0..128 sketch values, some
    without sketch): every query's answer is the brute force's."""
    rng = random.Random(5)
    seeds = [(rng.getrandbits(64) or 1, np.array([rng.getrandbits(32) for _ in range(NV)], np.uint32))]
    seeds += [(rng.getrandbits(64) or 1, seeds[0][1]), (seeds[0][0], planted(rng, seeds[0][1], 0, False))]

    def page() -> tuple[int, np.ndarray | None]:
        h, base = rng.choice(seeds)
        for bit in rng.sample(range(64), rng.randrange(7)):
            h ^= 1 << bit
        overlap = rng.choice([0, 4, 60, 64, 68, 100, NV])
        return h or 1, None if rng.random() < 0.2 else planted(rng, base, overlap, rng.random() < 0.5)

    plain, indexed = Model(), IndexedModel()
    for i in range(400):
        h, sketch = page()
        for model in (plain, indexed):
            model.add(h, f"k{i % 300}", {"i": i}, sketch)
        if i % 20 == 0:
            assert indexed.query(h, sketch) == plain.query(h, sketch)
    answers = [(h, sketch, plain.query(h, sketch)) for h, sketch in (page() for _ in range(200))]
    assert sum(bool(found) for _, _, found in answers) > 50  # most find something: a real comparison
    assert all(indexed.query(h, sketch) == found for h, sketch, found in answers)


def rows(matches: list[Match]) -> list[tuple[Any, ...]]:
    return [(m.key, m.simhash, m.distance, m.similarity, dict(m.meta)) for m in matches]


def planted(rng: random.Random, base: np.ndarray, overlap: int, aligned: bool) -> np.ndarray:
    """A sketch equal to ``base`` in exactly ``overlap`` positions: random ones, or (``aligned``)
    filling whole bands first, so both sides of the band test are exercised."""
    order = list(range(NV))
    if not aligned:
        rng.shuffle(order)
    out = base.copy()
    for i in order[overlap:]:
        # differs from base here, in the low byte too (what the default rule compares)
        out[i] = int(base[i]) ^ (rng.getrandbits(24) << 8 | 1 + rng.getrandbits(7))
    return out


@st.composite
def programs(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """Operations over pages planted around a few seeds: sketches sharing 0..128 values with a
    seed's, simhashes 0..8 bits from a seed's, some pages without sketch; replaced keys, removals,
    queries, batches and reopenings."""
    rng = random.Random(draw(st.integers(0, 2**32)))
    seeds = [
        (rng.getrandbits(64) or 1, np.array([rng.getrandbits(32) for _ in range(NV)], dtype=np.uint32))
        for _ in range(draw(st.integers(1, 3)))
    ]

    def page() -> tuple[int, np.ndarray | None]:
        h, base = seeds[draw(st.integers(0, len(seeds) - 1))]
        for bit in rng.sample(range(64), draw(st.integers(0, 8))):
            h ^= 1 << bit
        if draw(st.integers(0, 4)) == 0:
            return h or 1, None
        overlap = draw(st.one_of(st.integers(0, NV), st.integers(56, 72)))
        return h or 1, planted(rng, base, overlap, draw(st.booleans()))

    ops: list[tuple[Any, ...]] = []
    keys = [f"k{i}" for i in range(8)]
    for _ in range(draw(st.integers(1, 20))):
        kinds = ["add", "check", "check", "batch", "query", "remove", "reopen", "compact", "add_sketch"]
        kind = draw(st.sampled_from([*kinds, "merge"]))
        if kind == "add_sketch":
            ops.append((kind, draw(st.sampled_from(keys)), page()[1]))
        elif kind in ("add", "check"):
            ops.append((kind, draw(st.sampled_from(keys)), *page()))
        elif kind == "batch":
            size = draw(st.integers(1, 4))
            ops.append(("batch", [(draw(st.sampled_from(keys)), *page()) for _ in range(size)]))
        elif kind == "query":
            ops.append(("query", *page()))
        elif kind == "remove":
            ops.append(("remove", draw(st.sampled_from(keys))))
        elif kind in ("compact", "merge"):
            ops.append((kind,))
        else:
            ops.append(("reopen",))
    return ops


SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(programs())
def test_answers_are_exactly_the_rules(backend: Backend, ops: list[tuple[Any, ...]]) -> None:
    index = backend.open()
    model = Model()
    probes: list[tuple[int, np.ndarray | None]] = []
    try:
        for op in ops:
            if op[0] in ("add", "check"):
                _, key, h, sketch = op
                meta = {"h": h % 1000, "simhash": "the caller's own field"}
                if op[0] == "check":
                    expected = model.query(h, sketch)
                    assert rows(index.check_and_add(h, key, meta, sketch=sketch)) == expected
                else:
                    index.add(h, key, meta, sketch=sketch)
                model.add(h, key, meta, sketch)
                probes.append((h, sketch))
            elif op[0] == "batch":
                index.add_many([(h, key, None, sketch) for key, h, sketch in op[1]])
                for key, h, sketch in op[1]:
                    model.add(h, key, None, sketch)
                    probes.append((h, sketch))
            elif op[0] == "query":
                probes.append(op[1:])
                assert rows(index.query(*op[1:2], sketch=op[2])) == model.query(*op[1:])
            elif op[0] == "remove":
                assert index.remove(op[1]) == (model.rows.pop(op[1], None) is not None)
            elif op[0] == "compact":
                index.compact()
            elif op[0] == "merge":  # a background merge finishes here (switched at the next write)
                backend.run_merges()
            elif op[0] == "add_sketch":
                _, key, sketch = op
                if sketch is None:
                    continue
                row = model.rows.get(key)
                assert index.add_sketch(key, sketch) == (row is not None and row[1] is None)
                if row is not None and row[1] is None:
                    model.rows[key] = (row[0], sketch, row[2], row[3])  # its age kept
            else:
                index = backend.reopen(index)
        singles = [index.query(h, sketch=s) for h, s in probes]
        for (h, s), got in zip(probes, singles, strict=True):
            assert rows(got) == model.query(h, s)
        batched = index.query_many([h for h, _ in probes], sketches=[s for _, s in probes])
        assert [rows(m) for m in batched] == [rows(m) for m in singles]
        assert len(index) == len(model.rows)
        for key, (h, sketch, meta, _) in model.rows.items():
            got = index.get(key)
            assert got is not None and got.simhash == h and dict(got.meta) == meta
            stored = index.sketch(key)
            assert (stored is None) == (sketch is None)
            # the index keeps the low value_bits of each value (8 by default), all the rule compares
            assert stored is None or np.array_equal(stored.values, index.rule.bits.reduce(sketch))
    finally:
        index.close()


# -- fixed scenarios ----------------------------------------------------------------------------


def sketch_of(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, size=NV, dtype=np.uint32)


def test_shared_band_below_threshold_and_threshold_without_band_are_not_reported(backend: Backend) -> None:
    base = sketch_of(1)
    one_band = planted(random.Random(1), base, 4, aligned=True)  # band 0 equal, similarity 4/128
    no_band = base.copy()
    no_band[3::4] ^= 1  # 3 of 4 values equal in every band: similarity 0.75, no band shared
    h = 0x0123456789ABCDEF
    with backend.open() as index:
        index.add(h, "one-band", sketch=one_band)
        index.add(h, "no-band", sketch=no_band)
        assert index.query(h, sketch=base) == []  # both are within 0 bits by simhash: not enough
        assert index.check_and_add(h, "base", sketch=base) == []
        index.add(h ^ 0xFF00, "half", sketch=planted(random.Random(2), base, 64, aligned=True))
        index.add(h ^ 0xFF00, "close", sketch=planted(random.Random(2), base, 65, aligned=True))
        (match,) = index.query(h, sketch=base)[1:]
        # 65 of 128 values equal in their low byte: (65/128 - 1/256) / (1 - 1/256) = 129/255 >= 0.5;
        # 64 (estimate 127/255) is below the threshold once chance agreement is taken out
        assert (match.key, match.distance, match.similarity) == ("close", 8, 129 / 255)


def test_check_and_add_reports_the_keys_own_previous_entry(backend: Backend) -> None:
    """Replacing a key: its old entry (old fingerprint, meta and sketch) is judged, as every backend does."""
    base = sketch_of(12)
    with backend.open() as index:
        index.add(0xF0F0, "page", {"v": 1}, sketch=base)
        index.add(0xF0F0, "legacy-far", {"v": 0})
        again = planted(random.Random(3), base, 65, aligned=True)
        (match,) = index.check_and_add(0xF0F0 ^ 0xF0000, "page", {"v": 2}, sketch=again)
        assert (match.key, match.simhash, match.distance, match.similarity, match.meta) == (
            "page",
            0xF0F0,
            4,
            129 / 255,
            {"v": 1},
        )
        index.add(0xAB, "was-legacy", {"v": 1})
        found = index.check_and_add(0xAB ^ 0b11, "was-legacy", {"v": 2}, sketch=sketch_of(13))
        assert [(m.key, m.simhash, m.similarity) for m in found] == [("was-legacy", 0xAB, None)]


def test_page_without_sketch_matches_by_simhash(backend: Backend) -> None:
    h = 0xFEEDFACECAFEBEEF
    with backend.open() as index:
        index.add(h, "legacy", {"url": "a"})
        index.add(h ^ 0b1, "sketched", sketch=sketch_of(2))
        found = index.query(h ^ 0b111, sketch=sketch_of(3))  # the sketch matches nothing
        assert [(m.key, m.distance, m.similarity) for m in found] == [("legacy", 3, None)]
        found = index.query(h)  # a query without sketch: every page by simhash
        assert [(m.key, m.similarity) for m in found] == [("legacy", None), ("sketched", None)]
        assert index.query(h ^ 0b1111, sketch=sketch_of(2))[0].similarity == 1.0  # 4 bits: by sketch
        assert index.stats()["without_sketch"] == 1


def test_add_sketch_gives_a_legacy_page_its_sketch_and_keeps_its_age(backend: Backend) -> None:
    h = 0x1234567890ABCDEF
    with backend.open() as index:
        index.add(h, "legacy", {"url": "a"})
        index.add(h ^ 0xFFFF, "newer", {"url": "b"}, sketch=sketch_of(6))
        before = index.get("legacy")
        assert index.query(h ^ 0xFFFF, sketch=sketch_of(5)) == []  # 16 bits away; no sketch to match
        assert index.add_sketch("legacy", sketch_of(5))
        after = index.get("legacy")
        assert (after.simhash, after.meta, after.seq) == (before.simhash, before.meta, before.seq)
        assert np.array_equal(index.sketch("legacy").values, sketch_of(5) & 0xFF)  # the 8 bits kept
        found = index.query(h ^ 0xFFFF, sketch=sketch_of(5))  # now verified: by sketch, 16 bits away
        assert [(m.key, m.distance, m.similarity, dict(m.meta)) for m in found] == [
            ("legacy", 16, 1.0, {"url": "a"})
        ]
        assert not index.add_sketch("legacy", sketch_of(7))  # has one: kept
        assert np.array_equal(index.sketch("legacy").values, sketch_of(5) & 0xFF)  # the 8 bits kept
        assert not index.add_sketch("missing", sketch_of(7))
        assert index.sketch("missing") is None
        assert index.stats()["without_sketch"] == 0
        index = backend.reopen(index)  # durable
        assert np.array_equal(index.sketch("legacy").values, sketch_of(5) & 0xFF)  # the 8 bits kept
        assert index.get("legacy").seq == before.seq
        index.close()


def test_replaced_without_sketch_loses_its_sketch_and_remove_forgets_both(backend: Backend) -> None:
    h, sketch = 0x0F0F0F0F0F0F0F0F, sketch_of(4)
    with backend.open() as index:
        index.add(h, "page", sketch=sketch)
        index.add(h ^ 0xFFFF, "page")  # re-fetched, fingerprinted without sketch
        assert index.sketch("page") is None
        assert index.query(h, sketch=sketch) == []  # 16 bits away, and no sketch to match any more
        index.add_many(
            [(h, "twice", None, sketch), (h, "twice", None), (h, "last", None), (h, "last", None, sketch)]
        )
        assert index.sketch("twice") is None and index.sketch("last") is not None
        assert index.remove("last") and index.sketch("last") is None and index.get("last") is None
        assert index.query(h ^ 0xF000, sketch=sketch) == []
        assert not index.remove("last")


def test_clear_empties_both_stores_and_the_index_stays_usable(backend: Backend) -> None:
    h = 0x1111222233334444
    with backend.open() as index:
        index.add(h, "page", {"v": 1}, sketch=sketch_of(40))
        index.add(h ^ 0b1, "legacy", {"v": 1})
        if backend.server is None:
            with pytest.raises(ValueError, match="reset=True"):
                index.clear()
            return
        assert index.clear() > 0
        assert len(index) == 0 and index.sketch("page") is None
        assert index.query(h, sketch=sketch_of(40)) == [] and index.stats()["without_sketch"] == 0
        index.add(h, "again", sketch=sketch_of(40))
        assert [m.key for m in index.query(h, sketch=sketch_of(40))] == ["again"]


def test_bad_item_in_a_batch_stores_nothing(backend: Backend) -> None:
    with backend.open() as index:
        for bad in [
            (0, "zero", None, sketch_of(5)),
            (1, "", None, sketch_of(5)),
            (1, "meta", {"x": object()}),
            (1, "meta-with-sketch", {"x": float("nan")}, sketch_of(5)),
        ]:
            with pytest.raises((ValueError, TypeError)):
                index.add_many([(7, "good", None, sketch_of(6)), bad])
            with pytest.raises((ValueError, TypeError)):
                index.check_and_add(*bad[:3], sketch=bad[3] if len(bad) > 3 else None)
        assert len(index) == 0 and index.sketch("good") is None and index.query(7, sketch=sketch_of(6)) == []


def test_reopen_gives_the_same_answers(backend: Backend) -> None:
    rng = random.Random(5)
    base = sketch_of(7)
    index = backend.open()
    pages = [
        (rng.getrandbits(64) | 1, f"p{i}", planted(rng, base, rng.randrange(40, 129), False))
        for i in range(30)
    ]
    index.add_many([(h, key, {"i": i}, s) for i, (h, key, s) in enumerate(pages)])
    index.add(pages[0][0], "legacy")
    before = [rows(index.query(h, sketch=s)) for h, _, s in pages]
    assert any(len(found) > 1 for found in before)
    index = backend.reopen(index)
    try:
        assert [rows(index.query(h, sketch=s)) for h, _, s in pages] == before
        assert len(index) == 31 and index.stats()["without_sketch"] == 1
    finally:
        index.close()


def test_simhash_store_get_many_equals_get(backend: Backend) -> None:
    """The one read the verified index makes for a batch's matches beyond k (both backends)."""
    with backend.open() as index:
        index.add_many([(i + 1, f"k{i}", {"i": i}) for i in range(1200)])
        index.add(7, "k3", {"i": "again"})
        wanted = [f"k{i}" for i in range(0, 1200, 3)] + ["missing"]
        got = index.simhashes.get_many(wanted)
        assert set(got) == set(wanted) - {"missing"}
        assert all(got[key] == index.get(key) for key in wanted[:50]) and got["k3"].meta == {"i": "again"}
        assert index.simhashes.get_many([]) == {}


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-3, 60), min_size=1, max_size=40), st.randoms(use_true_random=False))
def test_rows_read_by_seq_hints_are_the_rows_read_by_key(hints: list[int], rnd: random.Random) -> None:
    """Embedded: a match's row is read by the seq the sketch store remembers for it. Any hint (right,
    0, another key's seq, a removed row's, one never used) gives exactly the rows read by key."""
    import tempfile

    with tempfile.TemporaryDirectory() as where, open_index(where) as index:
        index.add_many([(i + 1, f"k{i}", {"i": i}, sketch_of(i)) for i in range(30)])
        index.add(7, "k3", {"i": "again"}, sketch=sketch_of(3))  # k3 moves to a new seq
        index.remove("k5")
        wanted = [f"k{rnd.randrange(32)}" for _ in hints]
        right = index.simhashes.rows_many(wanted)
        assert index.simhashes.rows_many(wanted, hints) == right
        assert set(right) == set(wanted) - {"k5", "k30", "k31"}
        assert "k3" not in right or right["k3"][2] == {"i": "again"}
        true_seqs = [right[key][0] if key in right else 0 for key in wanted]
        assert index.simhashes.rows_many(wanted, true_seqs) == right


def test_the_sketch_column_remembers_each_pages_seq(tmp_path: Path) -> None:
    """The hints are there to be used: every page's seq after an open, and after each write (a page and
    its sketch are one row: the write knows the seq); a page without sketch has none."""
    with open_index(tmp_path / "ix") as index:
        index.add_many([(i + 1, f"k{i}", None, sketch_of(i)) for i in range(20)])
    with open_index(tmp_path / "ix") as index:
        keys = [f"k{i}" for i in range(20)]
        assert index.sketches.hints(keys) == [index.get(key).seq for key in keys]
        index.add(99, "new", None, sketch=sketch_of(100))
        index.add(3, "k2", None, sketch=sketch_of(2))  # re-added: a new seq
        index.check_and_add(4, "k3", None, sketch=sketch_of(3))
        assert index.add_sketch("k9", sketch_of(9)) is False  # it has one: nothing written
        index.add(5, "k4", None)  # replaced by a page without sketch
        changed = ["new", "k2", "k3", "k4"]
        assert index.sketches.hints(changed) == [index.get(key).seq for key in changed[:3]] + [0]
        assert index.sketches.hints(["k9"]) == [index.get("k9").seq]
        assert [m.key for m in index.query(99, sketch=sketch_of(100))] == ["new"]
    with open_index(tmp_path / "ix") as index:
        assert index.sketches.hints(changed) == [index.get(key).seq for key in changed[:3]] + [0]


def test_answers_of_a_batch_share_no_meta(tmp_path: Path) -> None:
    """One row read serves every answer of a batch that matches it: each answer gets its own meta."""
    with open_index(tmp_path / "ix") as index:
        index.add(5, "p", {"tags": ["a"]}, sketch=sketch_of(1))
        first, second = index.query_many([5, 5], sketches=np.stack([sketch_of(1), sketch_of(1)]))
        assert first == second and first[0].meta == {"tags": ["a"]}
        first[0].meta["note"] = "set by a caller on one answer"
        assert second[0].meta == {"tags": ["a"]}


def test_reset_empties_both_stores(tmp_path: Path) -> None:
    path = tmp_path / "ix"
    with open_index(path) as index:
        index.add(5, "a", sketch=sketch_of(8))
    with open_index(path, reset=True) as index:
        assert len(index) == 0 and index.sketch("a") is None
        assert index.query(5, sketch=sketch_of(8)) == [] and len(index.sketches) == 0


def test_lookups_skip_the_simhash_tables_only_while_every_page_has_a_sketch(tmp_path: Path) -> None:
    """Embedded: with no page stored without sketch, a lookup with a sketch needs no simhash probe (only
    such pages are judged by simhash); the answers stay the rule's as pages without sketch come and go,
    and across a reopen (the set is rebuilt from both stores)."""
    path = tmp_path / "ix"
    h = 0x0123456789ABCDEF
    model = Model()

    def check(index: VerifiedIndex, probing: bool) -> None:
        assert index._probing() is probing
        for q, sk in [(h, sketch_of(30)), (h ^ 0b11, sketch_of(31)), (h ^ 0xFF00, sketch_of(30))]:
            assert rows(index.query(q, sketch=sk)) == model.query(q, sk)
        many = index.query_many([h, h ^ 0b11], sketches=np.stack([sketch_of(30), sketch_of(31)]))
        want = [model.query(h, sketch_of(30)), model.query(h ^ 0b11, sketch_of(31))]
        assert [rows(m) for m in many] == want

    def add(index: VerifiedIndex, simhash: int, key: str, sketch: np.ndarray | None) -> None:
        index.add(simhash, key, {"k": key}, sketch=sketch)
        model.add(simhash, key, {"k": key}, sketch)

    def check_and_add(index: VerifiedIndex, simhash: int, key: str, sketch: np.ndarray | None) -> None:
        expected = model.query(simhash, sketch)
        assert rows(index.check_and_add(simhash, key, {"k": key}, sketch=sketch)) == expected
        model.add(simhash, key, {"k": key}, sketch)

    with open_index(path) as index:
        add(index, h ^ 0b1, "a", sketch_of(30))
        add(index, h ^ 0xFF000000, "b", sketch_of(30))  # far by simhash, same sketch
        check(index, probing=False)
        # a write while no page lacks a sketch: the matches by sketch alone, the key's own old entry too
        check_and_add(index, h ^ 0b11, "a", sketch_of(30))
        check_and_add(index, h, "e", sketch_of(31))
        check(index, probing=False)
        add(index, h ^ 0b10, "legacy", None)  # judged by simhash: the tables are probed again
        check(index, probing=True)
    with open_index(path) as index:
        check(index, probing=True)
        assert index.add_sketch("legacy", sketch_of(31))
        model.rows["legacy"] = (*model.rows["legacy"][:1], sketch_of(31), *model.rows["legacy"][2:])
        check(index, probing=False)
        index.check_and_add(h ^ 0b100, "c", {"k": "c"})
        model.add(h ^ 0b100, "c", {"k": "c"}, None)
        check(index, probing=True)
        assert index.remove("c")
        del model.rows["c"]
        check(index, probing=False)
        index.add_many([(h ^ 0b1000, "d", None), (h ^ 0b1000, "d", None, sketch_of(32))])
        model.add(h ^ 0b1000, "d", None, sketch_of(32))
        check(index, probing=False)


def test_simhash_mode_over_a_verified_index_leaves_no_stale_sketch(backend: Backend) -> None:
    path = backend.location()
    h, old = 0x5555AAAA5555AAAA, sketch_of(21)
    with backend.open(path) as index:
        index.add(h, "page", {"v": 1}, sketch=old)
        index.add(h ^ 0b1, "kept", {"v": 1}, sketch=sketch_of(22))
        index.add(h ^ 0b11, "gone", {"v": 1}, sketch=sketch_of(23))
    with open_index(path, mode="simhash") as index:  # a SIMHASH_MODE=simhash crawl over it
        found = index.check_and_add(h ^ 0xFFFF0000, "page", {"v": 2})  # its content changed
        assert found == [] and [(m.key, m.distance, m.similarity) for m in index.query(h)] == [
            ("kept", 1, None),
            ("gone", 2, None),
        ]
        assert [m.key for m in index.query(h, sketch=old)] == ["kept", "gone"]  # simhash alone
        assert [[m.key for m in ms] for ms in index.query_many([h])] == [["kept", "gone"]]
        assert index.remove("gone")
        assert "without_sketch" not in index.stats() and index.stats()["size"] == 2
    with backend.open(path) as index:
        assert index.sketch("page") is None and index.sketch("gone") is None
        assert index.sketch("kept") is not None
        assert index.query(h ^ 0xFFFF, sketch=old) == []  # the old content's sketch matches nothing
        found = index.query(h ^ 0xFFFF, sketch=sketch_of(22))
        assert [(m.key, m.similarity) for m in found] == [("kept", 1.0)]
        assert index.stats()["without_sketch"] == 1


def test_simhash_mode_reset_empties_the_sketches_too(tmp_path: Path) -> None:
    path = tmp_path / "ix"  # embedded only: a Redis index has no reset option (clear() empties it)
    with open_index(path, similarity=0.6) as index:
        index.add(0x77, "page", sketch=sketch_of(24))
    with open_index(path, mode="simhash", reset=True) as index:
        assert len(index) == 0
    with open_index(path, similarity=0.6) as index:  # emptied with its settings
        assert index.sketch("page") is None and index.query(0x77, sketch=sketch_of(24)) == []
        assert len(index.sketches) == 0


def test_simhash_mode_without_sketches_is_the_simhash_index(backend: Backend) -> None:
    path = backend.location()
    with open_index(path, mode="simhash") as index:
        index.add(0x77, "page")
        assert not isinstance(index, VerifiedIndex)
    with open_index(path, mode="simhash") as index:  # still none: nothing was created
        assert not isinstance(index, VerifiedIndex) and len(index) == 1
        if backend.server is None:
            assert not (Path(path) / "sketches").exists()
        else:
            index.clear()


def test_read_only_opening_of_a_legacy_index(tmp_path: Path) -> None:
    path = tmp_path / "legacy"
    with open_index(path, mode="simhash") as index:
        index.add_many([(0xAAAA, "a", {"u": 1}), (0xAAAB, "b", None)])
    assert not (path / "sketches").exists()
    with open_index(path, read_only=True) as index:
        assert isinstance(index, VerifiedIndex) and index.sketches is None
        found = index.query(0xAAAA, sketch=sketch_of(9))
        assert [(m.key, m.distance, m.similarity) for m in found] == [("a", 0, None), ("b", 1, None)]
        assert index.stats()["without_sketch"] == 2 and index.sketch("a") is None
    assert not (path / "sketches").exists()  # reading wrote nothing
    with open_index(path) as index:  # the first writer adds the sketch store beside the tables
        index.add(0xAAAA, "c", sketch=sketch_of(9))
        assert [m.key for m in index.query(0xAAAA, sketch=sketch_of(9))] == ["c", "a", "b"]


# -- Redis: several processes, a lost namespace -------------------------------------------------


def planted_clusters(n: int, seed: int) -> list[list[tuple[int, np.ndarray]]]:
    """n clusters of 6 pages: sketches differing from the cluster's in 24 positions (estimated
    Jaccard >= 0.62 between members, so every pair is a near-duplicate only if a band is shared:
    the members keep the first 8 bands whole), simhashes 2..6 bits from the cluster's (pairs up
    to 12 bits apart: the simhash rule alone would miss most)."""
    rng = np.random.default_rng(seed)
    clusters = []
    for _ in range(n):
        base = rng.integers(0, 2**32, size=NV, dtype=np.uint32)
        h = int(rng.integers(1, 2**63))
        members = []
        for _ in range(6):
            member = base.copy()
            spots = rng.choice(np.arange(32, NV), size=24, replace=False)
            member[spots] ^= rng.integers(1, 2**32, size=24, dtype=np.uint32)
            flips = rng.choice(64, size=int(rng.integers(2, 7)), replace=False)
            members.append((h ^ sum(1 << int(b) for b in flips) or 1, member))
        clusters.append(members)
    return clusters


def insert_worker(uri: str, worker: int, workers: int, clusters: Any, barrier: Any, results: Any) -> None:
    index = open_index(uri)
    barrier.wait()
    originals = []
    for c, members in enumerate(clusters):
        for m, (h, sketch) in enumerate(members):
            if (c + m) % workers == worker and not index.check_and_add(
                h, f"c{c}-m{m}", {"w": worker}, sketch=sketch
            ):
                originals.append(c)
    index.close()
    results.put((worker, originals))


def test_four_processes_racing_record_one_original_per_cluster(server: RedisServer) -> None:
    uri = f"{server.url}?prefix=race-{uuid.uuid4().hex[:12]}"
    clusters = planted_clusters(40, seed=4)
    for members in clusters:  # the planting is what the docstring says: by sketch, not by simhash
        for h, s in members[1:]:
            verdict = DEFAULT_RULE.compare_values(members[0][0], h, members[0][1], s)
            assert verdict.near_duplicate and verdict.method == "verified"
    assert any(
        DEFAULT_RULE.compare_values(a[0], b[0], None, None).near_duplicate is False
        for members in clusters
        for a in members
        for b in members
    )
    open_index(uri).close()  # both namespaces exist before the workers race
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [
        ctx.Process(target=insert_worker, args=(uri, w, 4, clusters, barrier, results)) for w in range(4)
    ]
    for p in procs:
        p.start()
    outcome = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    assert sorted(c for found in outcome.values() for c in found) == list(range(len(clusters)))
    with open_index(uri) as index:
        assert len(index) == 6 * len(clusters) and index.stats()["without_sketch"] == 0
        h, sketch = clusters[0][0]
        assert {m.key for m in index.query(h, sketch=sketch)} == {f"c0-m{m}" for m in range(6)}
        index.clear()


def test_lost_sketch_namespace_raises_index_lost(server: RedisServer) -> None:
    prefix = f"lost-{uuid.uuid4().hex[:12]}"
    index = open_index(f"{server.url}?prefix={prefix}&retries=2&retry_cap=0.1")
    try:
        index.add(0xABC, "a", sketch=sketch_of(10))
        client = server.client()
        try:  # the sketch store's keys evicted or flushed: the simhash store's are still there
            client.delete(*client.keys(f"simhash:{{{prefix}{SKETCH_PREFIX_SUFFIX}}}:*"))
        finally:
            client.close()
        for call in (
            lambda: index.check_and_add(0xABC, "b", sketch=sketch_of(10)),
            lambda: index.query(0xABC, sketch=sketch_of(10)),
            lambda: index.add(0xABD, "c", sketch=sketch_of(11)),
        ):
            with pytest.raises(IndexLostError, match="lost the index namespace"):
                call()
        assert [m.key for m in index.query(0xABC)] == ["a"]  # no sketch asked: the simhash store answers
    finally:
        index.close()
        with open_index(f"{server.url}?prefix={prefix}", mode="simhash") as simhashes:
            simhashes.clear()


# -- crash safety ---------------------------------------------------------------------------------


@pytest.mark.parametrize("sync", ["full", "normal", "normal-merging", "normal-background", "normal-runs"])
def test_sigkill_loses_no_acknowledged_insert(tmp_path: Path, sync: str) -> None:
    from crash_support import VERIFIED_CHILD, acknowledged, run_and_kill

    rng = random.Random(13)
    path = tmp_path / "ix"
    present: dict[str, tuple[int, np.ndarray | None]] = {}
    inside_a_merge = 0
    for round_ in range(12):
        lines = run_and_kill(VERIFIED_CHILD, path, round_, rng, sync)
        marks = Path(f"{path}.merges")
        if marks.exists():  # "-background": was this kill inside a generation's write?
            inside_a_merge += marks.read_text().endswith("+")
            marks.unlink()
        present, in_doubt = acknowledged(lines, present)
        if in_doubt is not None:  # cut during remove: either state
            present.pop(in_doubt, None)
        with open_index(path) as index:
            stored = {m.key: m.simhash for m in index}
            sketches = {key: None if (found := index.sketch(key)) is None else found.values for key in stored}
            for key, (h, want) in present.items():
                assert stored.get(key) == h, f"round {round_}: acknowledged insert {key} lost"
                got = sketches[key]
                assert (got is None) == (want is None), f"round {round_}: {key}'s sketch"
                assert got is None or np.array_equal(got, want & 0xFF)  # the 8 bits kept
            # a page and its sketch are one row, one transaction: no sketch outlives its page
            assert set(index.sketches.keys()) <= stored.keys(), f"round {round_}: a sketch without its page"
            model = IndexedModel()
            for key in stored:
                model.add(stored[key], key, None, sketches[key])
            for key in rng.sample(sorted(stored), min(10, len(stored))):
                h, sketch = stored[key], sketches[key]
                got = [(m.key, m.distance, m.similarity) for m in index.query(h, sketch=sketch)]
                assert sorted(got) == sorted((r[0], r[2], r[3]) for r in model.query(h, sketch))
            # the unacknowledged tail is now simply part of the index
            present = {key: (h, sketches[key]) for key, h in stored.items()}
    assert len(present) > 50
    if sync.endswith("-background"):
        assert inside_a_merge > 0, "no kill landed inside a background merge"


def test_an_index_with_32_bit_sketches_decides_on_8_bits_once_upgraded(tmp_path: Path) -> None:
    """An index whose sketches were written with whole values (before the default became 8 bits) is
    converted to 8-bit values, and the new index applies the rule at 8 bits, as every index does."""
    from index_old_layouts import format_2_32_bit

    from scrapy_simhash.index.upgrade import upgrade

    base = sketch_of(21)
    high_only = base ^ np.uint32(0xFFFFFF00)  # every value differs, but not in its low byte
    old, new = tmp_path / "old", tmp_path / "new"
    format_2_32_bit(old, [(0x1234, "page", None, base)])
    assert upgrade(old, new).narrowed == 1
    with open_index(new) as index:
        assert index.rule.value_bits == 8 and index.sketches.value_bits == 8
        found = index.query(0x1234 ^ 0xFFFF, sketch=high_only)  # 16 bits away: by sketch alone
        assert [(m.key, m.similarity) for m in found] == [("page", 1.0)]
