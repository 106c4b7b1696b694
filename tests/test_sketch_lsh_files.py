"""The verified index's sketch LSH on disk: written with each table generation, mapped at open.

What could break: a reopened index that answers from stale files (a page replaced, removed, or given
its sketch after they were written), damaged files answered from, an index written before the files
existed that never gets them, and an open that still reads every sketch.
"""

from __future__ import annotations

import json
import logging
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from index_old_layouts import eight_byte_table_files

from scrapy_simhash.index import IndexCorruptError, open_index
from scrapy_simhash.index.embedded import storage as storage_module
from scrapy_simhash.index.lsh.lsh_segment import PARTS as LSH_PARTS
from scrapy_simhash.index.tables import prefault

NV = 128


def sketch(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, NV, dtype=np.uint32)


def near(values: np.ndarray, seed: int, keep: int = 110) -> np.ndarray:
    """A copy equal in its first ``keep`` values (a near-duplicate by the default rule)."""
    out = values.copy()
    out[keep:] = np.random.default_rng(10_000 + seed).integers(0, 2**32, NV - keep, dtype=np.uint32)
    return out


def answers(index, probes: list[tuple[int, np.ndarray]]) -> list[list[tuple[str, float]]]:
    return [[(m.key, m.similarity) for m in index.query(h, sketch=s)] for h, s in probes]


def build(path: Path, n: int = 60) -> list[tuple[int, np.ndarray]]:
    """``n`` pages (one near-duplicate pair every 3), compacted: everything in the files."""
    probes = []
    with open_index(path) as index:
        for i in range(n):
            values = sketch(i // 3) if i % 3 != 2 else near(sketch(i // 3), i)
            index.add(
                (i + 1) * 0x9E3779B97F4A7C15 % 2**64 or 1, f"https://example.org/{i}", {"i": i}, sketch=values
            )
            probes.append(((i + 1) * 0x9E3779B97F4A7C15 % 2**64 or 1, values))
        index.compact()
    return probes


def count_sketch_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many rows each open reads through ``Store.sketches``."""
    reads: list[int] = []
    original = storage_module.Store.sketches

    def counting(self, *args, **kwargs):
        total = 0
        for chunk in original(self, *args, **kwargs):
            total += len(chunk)
            yield chunk
        reads.append(total)

    monkeypatch.setattr(storage_module.Store, "sketches", counting)
    return reads


def test_a_reopened_index_maps_its_sketches_instead_of_reading_them(tmp_path, monkeypatch) -> None:
    probes = build(tmp_path / "ix")
    reads = count_sketch_reads(monkeypatch)
    with open_index(tmp_path / "ix") as index:
        stats = index.sketches.stats()
        assert (stats["base"], stats["recent"]) == (60, 0)
        assert reads == [0]  # no row's sketch read at open
        index.add(7, "https://example.org/new", None, sketch=near(sketch(4), 99))
        found = {m.key for m in index.query(7, sketch=near(sketch(4), 98))}
        assert {"https://example.org/12", "https://example.org/new"} <= found  # both levels answer
        got = answers(index, probes)
    assert all(found and found[0][0].startswith("https://example.org/") for found in got)
    with open_index(tmp_path / "ix") as index:
        assert reads[-1] == 1  # only the row written since the files
        assert answers(index, probes) == got


def test_pages_replaced_removed_or_given_a_sketch_after_the_files_are_answered_from_their_rows(
    tmp_path,
) -> None:
    path = tmp_path / "ix"
    with open_index(path) as index:
        index.add(11, "https://example.org/legacy", None)  # no sketch yet
        index.add(12, "https://example.org/replaced", None, sketch=sketch(1))
        index.add(13, "https://example.org/removed", None, sketch=sketch(2))
        index.compact()
        age = index.get("https://example.org/legacy").seq
        assert index.add_sketch("https://example.org/legacy", sketch(3))
        index.add(14, "https://example.org/replaced", None, sketch=sketch(4))
        assert index.remove("https://example.org/removed")
        before = {s: [m.key for m in index.query(99, sketch=sketch(s))] for s in (1, 2, 3, 4)}
        assert len(index.sketches) == 2
    assert before == {
        1: [],
        2: [],
        3: ["https://example.org/legacy"],
        4: ["https://example.org/replaced"],
    }
    with open_index(path) as index:  # the files still hold the old state of all three
        assert {s: [m.key for m in index.query(99, sketch=sketch(s))] for s in (1, 2, 3, 4)} == before
        assert len(index.sketches) == 2
        assert index.stats()["without_sketch"] == 0
        legacy = index.get("https://example.org/legacy")
        assert legacy is not None and legacy.seq == age  # its age kept
        index.compact()  # and once merged into new files
    with open_index(path) as index:
        assert {s: [m.key for m in index.query(99, sketch=sketch(s))] for s in (1, 2, 3, 4)} == before
        assert index.sketches.stats()["recent"] == 0


@pytest.mark.parametrize("part", ["lsh_entries", "lsh_filter", "lsh_seqs", "lsh_directory", "lsh_dead"])
def test_damaged_lsh_files_are_never_answered_from(tmp_path, part, caplog) -> None:
    path = tmp_path / "ix"
    probes = build(path)
    with open_index(path, read_only=True) as index:
        want = answers(index, probes)
    target = next(path.glob(f"tables-*.{part}.npy"))
    data = bytearray(target.read_bytes())
    data[-5] ^= 0x5A  # a flipped byte in the array, size unchanged
    target.write_bytes(bytes(data))
    # A clean open reads no file whole. Damage its structural checks see (seqs out of order, a
    # directory that does not add up) is rebuilt from the rows at open; any other is found by the
    # prefault thread's CRC-32 check, and the index then refuses its next call.
    with caplog.at_level(logging.WARNING):
        try:
            with open_index(path) as index:
                assert prefault.wait()
                got = answers(index, probes)
        except IndexCorruptError as exc:
            assert f"{target.name} fails its CRC-32 check" in str(exc)
        else:
            assert got == want
            assert "sketch LSH files invalid" in caplog.text
    with caplog.at_level(logging.WARNING), open_index(path, verify="full") as index:
        assert answers(index, probes) == want
    with open_index(path) as index:  # the writer wrote them again
        assert prefault.wait()
        assert index.sketches.stats()["base"] == 60
        assert answers(index, probes) == want


def test_an_index_whose_files_predate_the_lsh_gets_them_from_its_first_writer(tmp_path, monkeypatch) -> None:
    path = tmp_path / "ix"
    probes = build(path)
    manifest = json.loads((path / "manifest.json").read_text())
    for part in [name for name in manifest["files"] if name.startswith("lsh_")]:
        (path / manifest["files"].pop(part)["name"]).unlink()
    del manifest["lsh"]
    (path / "manifest.json").write_text(json.dumps(manifest))
    reads = count_sketch_reads(monkeypatch)
    with open_index(path, read_only=True) as index:  # a reader reads the rows, writes nothing
        want = answers(index, probes)
        assert index.sketches.stats()["recent"] == 60
    with open_index(path) as index:
        assert answers(index, probes) == want
    with open_index(path) as index:
        assert index.sketches.stats()["base"] == 60
        assert answers(index, probes) == want
    assert reads == [60, 60, 0]
    assert sum(1 for _ in path.glob("tables-*.lsh_*.npy")) == len(LSH_PARTS)


def test_the_lsh_entries_take_four_bytes_a_band_and_page(tmp_path) -> None:
    path = tmp_path / "ix"
    build(path)
    manifest = json.loads((path / "manifest.json").read_text())
    entries = np.load(path / manifest["files"]["lsh_entries"]["name"])
    assert entries.dtype == np.uint32 and entries.size == 60 * manifest["lsh"]["bands"]


def test_an_index_with_8_byte_table_files_opens_and_its_first_writer_writes_them_again(
    tmp_path, monkeypatch, caplog
) -> None:
    path = tmp_path / "ix"
    probes = build(path)
    with open_index(path, read_only=True) as index:
        want = answers(index, probes)
    eight_byte_table_files(path)
    reads = count_sketch_reads(monkeypatch)
    with open_index(path, read_only=True) as index:  # a reader reads the rows, writes nothing
        assert answers(index, probes) == want
    with caplog.at_level(logging.INFO), open_index(path, verify="full") as index:
        assert answers(index, probes) == want
    assert "earlier layout" in caplog.text and "rebuilding them from the database" in caplog.text
    with open_index(path, verify="full") as index:
        assert index.sketches.stats()["base"] == 60
        assert answers(index, probes) == want
    assert reads == [60, 60, 0]
    files = json.loads((path / "manifest.json").read_text())["files"]
    assert {np.load(path / files[part]["name"]).dtype for part in ("entries", "lsh_entries")} == {
        np.dtype(np.uint32)
    }


def test_a_reader_and_the_writer_agree_across_generations(tmp_path, monkeypatch) -> None:
    from scrapy_simhash.index.embedded import generations

    # each generation written as soon as it starts (not in a thread): switched at the next write
    monkeypatch.setattr(generations, "start_thread", generations.MergeJob.run)
    path = tmp_path / "ix"
    probes = build(path, n=30)
    with open_index(path, pending_max=2, delta_min=3) as writer:
        for i in range(30, 45):
            values = near(sketch(i % 10), i)
            writer.add(i + 1, f"https://example.org/{i}", None, sketch=values)
            probes.append((i + 1, values))
        with open_index(path, read_only=True) as reader:
            assert answers(reader, probes) == answers(writer, probes)
        assert writer.stats()["generation"] > 1


# -- the segment itself: merges carry or drop dead pages, answers stay those of a brute force -------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(0, 300),
    st.integers(0, 120),
    st.lists(st.integers(0, 419), max_size=120),
    st.integers(1, 3),
)
def test_merged_segments_answer_exactly_the_live_pages(seed, n, m, kills, rounds) -> None:
    from scrapy_simhash.index.lsh.lsh import MinHashLSH
    from scrapy_simhash.index.lsh.lsh_segment import LSHSegment, verify

    rng = np.random.default_rng(seed)
    lsh = MinHashLSH(0.5, NV, value_bits=8)
    seeds = rng.integers(0, 256, size=(6, NV), dtype=np.uint32)

    def pages(count: int) -> np.ndarray:
        out = seeds[rng.integers(0, 6, count)].copy()
        change = rng.random(out.shape) < rng.uniform(0.0, 0.7, size=(count, 1))
        out[change] = rng.integers(0, 256, int(change.sum()), dtype=np.uint32)
        return out.astype(np.uint8)

    segment = LSHSegment.empty(NV)
    stored: dict[int, np.ndarray] = {}
    next_seq = 1
    for _ in range(rounds):
        batch = pages(n if not stored else m)
        seqs = np.arange(next_seq, next_seq + batch.shape[0], dtype=np.int64)
        next_seq += batch.shape[0] + int(rng.integers(0, 3))  # seqs have gaps (removals, notes)
        segment = segment.merged(lsh.hasher, batch, seqs)
        stored.update(zip(seqs.tolist(), batch, strict=True))
        dead = sorted({s for s in kills if s in stored})
        segment.kill(dead)
        for s in dead:
            stored.pop(s)
        # as written and mapped again: the files' arrays give the same segment
        arrays = segment.arrays()
        segment = LSHSegment.from_arrays(arrays, NV, segment.buckets.prefix)
        assert len(segment) == len(stored)
    for probe in pages(20):
        v, band_keys = lsh.prepare(probe.astype(np.uint32))
        candidates = segment.candidates(v, band_keys, lsh.bands, lsh.rows, lsh.min_matches)
        assert set(candidates.tolist()) <= set(stored)  # live pages only, each once
        assert candidates.tolist() == sorted(set(candidates.tolist()))
        matrix = np.array([stored[s] for s in candidates.tolist()], dtype=np.uint8).reshape(-1, NV)
        query_of = np.zeros(candidates.size, np.int64)
        counts = verify(matrix, query_of, v[None, :], lsh.bands, lsh.rows, lsh.min_matches)
        got = sorted(
            ((s, c) for s, c in zip(candidates.tolist(), counts.tolist(), strict=True) if c >= 0),
            key=lambda t: (-t[1], t[0]),
        )
        want = []
        for s, values in stored.items():
            eq = values == v.astype(np.uint8)
            bands_equal = eq[: lsh.bands * lsh.rows].reshape(lsh.bands, lsh.rows).all(axis=1).any()
            if bands_equal and int(eq.sum()) >= lsh.min_matches:
                want.append((s, int(eq.sum())))
        want.sort(key=lambda t: (-t[1], t[0]))
        assert got == want
        q, many = segment.candidates_many(
            np.stack([v, v]), np.stack([band_keys, band_keys]), lsh.rows, lsh.min_matches
        )
        size = candidates.size
        assert many.tolist() == candidates.tolist() * 2 and q.tolist() == [0] * size + [1] * size
        # the filter lets through every answer (exact), and spares the rows of nearly all else
        assert {s for s, _ in want} <= set(candidates.tolist())


def test_a_generation_with_a_copy_of_the_sketches_and_no_filter_is_read_from_the_rows_and_written_again(
    tmp_path, monkeypatch, caplog
) -> None:
    """Generations written until 2026-11-27 held every page's sketch again beside the band entries
    (``lsh_sketches``) and no filter: the index reads the rows instead, and its first writer writes
    the files again, with the filter and without the copy."""
    path = tmp_path / "ix"
    probes = build(path)
    with open_index(path, read_only=True) as index:
        want = answers(index, probes)
    manifest = json.loads((path / "manifest.json").read_text())
    (path / manifest["files"].pop("lsh_filter")["name"]).unlink()
    name = f"tables-{int(manifest['generation']):06d}.lsh_sketches.npy"
    np.save(path / name, np.stack([values.astype(np.uint8) for _, values in probes]).reshape(-1))
    data = (path / name).read_bytes()
    manifest["files"]["lsh_sketches"] = {"name": name, "bytes": len(data), "crc32": zlib.crc32(data)}
    (path / "manifest.json").write_text(json.dumps(manifest))
    reads = count_sketch_reads(monkeypatch)
    with caplog.at_level(logging.INFO), open_index(path) as index:
        assert answers(index, probes) == want
    assert "earlier layout" in caplog.text
    with open_index(path) as index:
        assert index.sketches.stats()["base"] == 60
        assert answers(index, probes) == want
    assert reads == [60, 0]
    assert not list(path.glob("tables-*.lsh_sketches.npy"))
    files = json.loads((path / "manifest.json").read_text())["files"]
    assert "lsh_filter" in files and "lsh_sketches" not in files


def test_the_filter_spares_the_row_of_a_page_that_shares_a_band_and_little_else() -> None:
    """A page sharing one whole band with the query (4 values) but few other values is found by the
    band entries; its 2-bit filter cannot pass the rule (65 equal values needed), so its row is not
    read. A page that passes in 8 bits always passes the filter (tested above with hypothesis)."""
    from scrapy_simhash.index.lsh.lsh import MinHashLSH
    from scrapy_simhash.index.lsh.lsh_segment import LSHSegment, filter_rows

    lsh = MinHashLSH(0.5, NV, value_bits=8)
    rng = np.random.default_rng(5)
    query = rng.integers(0, 256, NV, dtype=np.uint32)
    one_band = rng.integers(0, 256, NV, dtype=np.uint32)
    one_band[:4] = query[:4]  # band 0 equal
    similar = query.copy()
    similar[100:] = rng.integers(0, 256, NV - 100, dtype=np.uint32)  # ~100 values equal: an answer
    sketches = np.stack([one_band, similar]).astype(np.uint8)
    segment = LSHSegment.build(lsh.hasher, sketches, np.array([7, 9], dtype=np.int64))
    v, band_keys = lsh.prepare(query)
    _, ids = segment.buckets.lookup(band_keys)
    assert set(ids.tolist()) == {0, 1}  # both found by their bands
    assert segment.candidates(v, band_keys, lsh.bands, lsh.rows, lsh.min_matches).tolist() == [9]
    assert filter_rows(sketches).shape == (2, NV // 4)


def test_the_filter_gives_the_same_candidates_in_c_and_in_numpy(monkeypatch) -> None:
    from scrapy_simhash.index.lsh import lsh_segment
    from scrapy_simhash.index.lsh.lsh import MinHashLSH
    from scrapy_simhash.index.lsh.lsh_segment import LSHSegment

    if lsh_segment._native_query is None:
        pytest.skip("the C extension is not built")
    lsh = MinHashLSH(0.5, NV, value_bits=8)
    rng = np.random.default_rng(11)
    seeds = rng.integers(0, 256, size=(4, NV), dtype=np.uint32)
    pages = seeds[rng.integers(0, 4, 400)]
    change = rng.random(pages.shape) < rng.uniform(0.0, 0.9, size=(400, 1))
    pages[change] = rng.integers(0, 256, int(change.sum()), dtype=np.uint32)
    segment = LSHSegment.build(lsh.hasher, pages.astype(np.uint8), np.arange(1, 401, dtype=np.int64) * 3)
    segment.kill(range(3, 300, 7))
    probes = pages[rng.integers(0, 400, 30)].copy()
    probes[:, 90:] = rng.integers(0, 256, size=(30, NV - 90), dtype=np.uint32)
    values, band_keys = lsh.prepare_many(probes)

    def both() -> tuple[list, list]:
        one = [
            segment.candidates(values[i], band_keys[i], lsh.bands, lsh.rows, lsh.min_matches).tolist()
            for i in range(30)
        ]
        q, seqs = segment.candidates_many(values, band_keys, lsh.rows, lsh.min_matches)
        return one, list(zip(q.tolist(), seqs.tolist(), strict=True))

    native = both()
    monkeypatch.setattr(lsh_segment, "_native_query", None)
    monkeypatch.setattr(lsh_segment, "_native_verify", None)
    assert both() == native
    assert sum(map(len, native[0])) > 30  # the probes do find pages
    assert native[1] == [(q, s) for q, found in enumerate(native[0]) for s in found]
