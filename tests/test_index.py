"""The embedded SimhashIndex against the backend contract and brute force."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import index_contract as contract
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_simhash import SimhashIndex, open_index
from scrapy_simhash.index import IndexLockedError, LayoutError, SimhashIndexError
from scrapy_simhash.index.tables import tables

SETTINGS = settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture
def factory(tmp_path: Path) -> contract.Factory:
    counter = itertools.count()

    def make(k: int = 3, **options: Any) -> SimhashIndex:
        # tiny buffers so that a few operations already exercise every layer and merges
        options.setdefault("pending_max", 3)
        options.setdefault("delta_min", 7)
        return SimhashIndex(tmp_path / f"ix{next(counter)}", k=k, **options)

    return make


def reopen(index: SimhashIndex) -> SimhashIndex:  # type: ignore[override]
    index.close()
    return SimhashIndex(index.path, pending_max=index._pending_max, delta_min=index._delta_min)


@pytest.mark.parametrize("check", contract.ALL_FIXED, ids=lambda c: c.__name__)
def test_contract(factory: contract.Factory, check: Any) -> None:
    check(factory)


@pytest.mark.parametrize("k", range(9))
def test_distance_exactly_k_every_k(factory: contract.Factory, k: int) -> None:
    contract.check_distance_exactly_k_included(factory, k)


def test_reopen_keeps_everything(factory: contract.Factory) -> None:
    contract.check_reopen_keeps_everything(factory, reopen)


@SETTINGS
@given(st.data())
def test_random_programs_default_layout(factory: contract.Factory, data: st.DataObject) -> None:
    contract.run_program(factory, reopen, 3, data.draw(contract.programs(3)))


@SETTINGS
@given(st.data(), st.sampled_from(["blocks:5", "blocks:4:1", "tiered:5:2:4:1", "tiered:4:4", "blocks:6"]))
def test_random_programs_other_layouts(factory: contract.Factory, data: st.DataObject, layout: str) -> None:
    contract.run_program(factory, reopen, 3, data.draw(contract.programs(3)), layout=layout)


@SETTINGS
@given(st.data(), st.sampled_from([0, 1, 2, 4, 5, 6, 7, 8]))
def test_random_programs_other_k(factory: contract.Factory, data: st.DataObject, k: int) -> None:
    contract.run_program(factory, reopen, k, data.draw(contract.programs(k, max_ops=25)))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_random_programs_default_buffers(factory: contract.Factory, data: st.DataObject) -> None:
    """With production buffer sizes everything stays in the pending buffer until compact()."""
    ops = data.draw(contract.programs(3))
    contract.run_program(factory, reopen, 3, ops, pending_max=4096, delta_min=1 << 18)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_programs_without_the_c_probe(
    factory: contract.Factory, data: st.DataObject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The numpy fallback (no compiler at install time) honours the same contract."""
    monkeypatch.setattr(tables, "native", None)
    contract.run_program(factory, reopen, 3, data.draw(contract.programs(3)))


def test_second_writer_is_refused_and_reader_allowed(tmp_path: Path) -> None:
    with SimhashIndex(tmp_path / "ix") as first:
        first.add(0x1234, "a")
        with pytest.raises(IndexLockedError):
            SimhashIndex(tmp_path / "ix")
        with SimhashIndex(tmp_path / "ix", read_only=True) as reader:
            assert [m.key for m in reader.query(0x1234)] == ["a"]
            with pytest.raises(SimhashIndexError):
                reader.add(0x99, "b")
    with SimhashIndex(tmp_path / "ix") as again:  # the lock went with close()
        assert len(again) == 1


def test_reopen_with_incompatible_k_or_layout(tmp_path: Path) -> None:
    with SimhashIndex(tmp_path / "ix", k=2) as index:
        index.add(0x1234, "a")
        assert index.layout.max_k == 2
    with pytest.raises(LayoutError, match="k=2"):
        SimhashIndex(tmp_path / "ix", k=3)
    with pytest.raises(LayoutError, match="layout"):
        SimhashIndex(tmp_path / "ix", layout="blocks:6")
    with SimhashIndex(tmp_path / "ix") as index:  # k defaults to the stored one
        assert index.k == 2 and len(index) == 1
    with SimhashIndex(tmp_path / "ix", k=1) as index:  # a smaller k is always answerable
        assert index.k == 1 and [m.key for m in index.query(0x1234)] == ["a"]


def test_layout_that_cannot_be_complete_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LayoutError):
        SimhashIndex(tmp_path / "a", k=3, layout="blocks:5:3")
    with pytest.raises(LayoutError):
        SimhashIndex(tmp_path / "b", k=4, layout="manku")
    with pytest.raises(LayoutError):
        SimhashIndex(tmp_path / "c", k=9)
    assert not (tmp_path / "a" / "manifest.json").exists()


def test_open_index_dispatches_paths(tmp_path: Path) -> None:
    from scrapy_simhash.index.verified.verified import VerifiedIndex

    with open_index(f"file://{tmp_path}/ix", mode="simhash") as index:
        assert isinstance(index, SimhashIndex)
        index.add(0x42, "x")
    with open_index(tmp_path / "ix") as index:  # verified by default: the same simhash store inside
        assert isinstance(index, VerifiedIndex) and isinstance(index.simhashes, SimhashIndex)
        assert "x" in index and index.sketch("x") is None


def test_iteration_and_merges_keep_all_rows(tmp_path: Path) -> None:
    with SimhashIndex(tmp_path / "ix", pending_max=16, delta_min=64) as index:
        for i in range(1, 400):
            index.add(i * 0x9E3779B97F4A7C15 & (2**64 - 1) or 1, f"k{i}")
        for i in range(1, 400, 3):
            index.remove(f"k{i}")
        stats = index.stats()
        assert stats["merges"] >= 2 and stats["size"] == len(index) == 266
        assert [m.key for m in index] == [f"k{i}" for i in range(1, 400) if i % 3 != 1]
    with SimhashIndex(tmp_path / "ix") as index:
        assert len(index) == 266
        for i in (2, 3, 398):
            h = i * 0x9E3779B97F4A7C15 & (2**64 - 1)
            assert f"k{i}" in [m.key for m in index.query(h)]
        assert index.query(1 * 0x9E3779B97F4A7C15) == []


def test_closed_index_refuses_calls(tmp_path: Path) -> None:
    index = SimhashIndex(tmp_path / "ix")
    index.close()
    with pytest.raises(SimhashIndexError, match="closed"):
        index.query(0x1)
    with pytest.raises(SimhashIndexError, match="closed"):
        index.add(0x1, "a")


def test_path_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        SimhashIndex(tmp_path / "file")


def test_synchronous_normal_is_accepted_and_bad_values_refused(tmp_path: Path) -> None:
    with SimhashIndex(tmp_path / "ix", synchronous="normal") as index:
        index.add(0x77, "a")
        assert index._store.conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    with SimhashIndex(tmp_path / "ix") as index:
        assert "a" in index
        assert index._store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL by default
    with pytest.raises(ValueError, match="synchronous"):
        SimhashIndex(tmp_path / "ix", synchronous="off")
    with SimhashIndex(tmp_path / "ix") as index:  # the refused open released the lock
        assert len(index) == 1


def test_a_match_is_a_frozen_value() -> None:
    """Match sets its fields through its own __init__ (for speed); it must still behave as the frozen
    dataclass it is declared to be: immutable, compared and pickled by value, replace() and defaults."""
    import dataclasses
    import pickle

    from scrapy_simhash.index import Match

    match = Match("a", 5, 1, {"url": "a"}, 7, 0.75)
    with pytest.raises(dataclasses.FrozenInstanceError):
        match.seq = 8  # type: ignore[misc]
    assert match == Match(key="a", simhash=5, distance=1, meta={"url": "a"}, seq=7, similarity=0.75)
    assert match != Match("a", 5, 1, {"url": "a"}, 8, 0.75)
    assert pickle.loads(pickle.dumps(match)) == match
    assert dataclasses.replace(match, seq=9).seq == 9 and dataclasses.asdict(match)["meta"] == {"url": "a"}
    plain = Match("b", 6, 0)
    assert (plain.meta, plain.seq, plain.similarity) == ({}, 0, None)
    assert plain.meta is not Match("c", 6, 0).meta  # each its own dict
