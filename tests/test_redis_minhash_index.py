"""RedisMinHashIndex against real redis-server processes: the answers of the in-memory MinHashLSH fed
the same operations, one original per cluster under concurrent processes, lost and unreachable
servers detected, settings checked.

Sketches in the programs are short (8 values) over a tiny alphabet so that candidates, shared
bands, threshold ties and replacements happen constantly (as in test_minhash_index.py).
"""

from __future__ import annotations

import json
import multiprocessing
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot
from redis_server import RedisServer, free_port

from scrapy_simhash.fingerprint.minhash import minhash
from scrapy_simhash.index import (
    IndexLostError,
    IndexSettingsError,
    IndexUnavailableError,
    SimhashIndexError,
    open_index,
)
from scrapy_simhash.index.lsh.lsh import MinHashLSH
from scrapy_simhash.index.redis.redis_minhash import BUCKET_KINDS, RedisMinHashIndex

NV, THRESHOLD, BANDS, ROWS = 8, 0.5, 4, 2
KEYS = [f"k{i}" for i in range(8)]

# 0x100 and 0x10002 equal 0 and 2 in their low byte: one sketch to an 8-bit index, two to a 32-bit one
_values = st.lists(st.sampled_from([0, 1, 2, 0x100, 0x10002]), min_size=NV, max_size=NV)
_POOL = [[0] * NV, [0] * 4 + [1] * 4, [1] * NV, [0, 1] * 4]
sketches = (st.sampled_from(_POOL) | _values).map(lambda v: np.array(v, np.uint32))
metas = st.none() | st.fixed_dictionaries({"n": st.integers(0, 9)})
keys = st.sampled_from(KEYS)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), keys, sketches, metas),
        st.tuples(st.just("add_many"), st.lists(st.tuples(keys, sketches, metas), max_size=5)),
        st.tuples(st.just("check_and_add"), keys, sketches, metas),
        st.tuples(st.just("remove"), keys),
        st.tuples(st.just("query"), sketches),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


@pytest.fixture(scope="module")
def server(redis_server: RedisServer) -> RedisServer:
    """The module's redis-server (conftest's), by the name these tests use."""
    return redis_server


@pytest.fixture
def uri(server: RedisServer) -> str:
    """A fresh namespace per test on the shared server."""
    return f"{server.url}?prefix=mh-{uuid.uuid4().hex[:12]}"


def open_small(uri: str, **options: Any) -> RedisMinHashIndex:
    return open_index(
        uri, kind="minhash", threshold=THRESHOLD, num_values=NV, bands=BANDS, rows=ROWS, **options
    )


class Model:
    """The in-memory MinHashLSH plus each key's meta."""

    def __init__(self, value_bits: int = 32) -> None:
        self.lsh = MinHashLSH(THRESHOLD, NV, BANDS, ROWS, value_bits=value_bits)
        self.meta: dict[str, dict[str, Any]] = {}

    def answer(self, found: list[tuple[str, float]]) -> list[tuple[str, float, dict[str, Any]]]:
        return [(key, sim, self.meta[key]) for key, sim in found]

    def add(self, key: str, sketch: np.ndarray, meta: dict[str, Any] | None) -> None:
        self.lsh.add(key, sketch)
        self.meta[key] = dict(meta or {})


def rows(matches: list[Any]) -> list[tuple[str, float, dict[str, Any]]]:
    return [(m.key, m.similarity, m.meta) for m in matches]


def assert_same_state(index: RedisMinHashIndex, model: Model) -> None:
    assert index.keys() == model.lsh.keys()  # oldest first: the order ties are answered in
    assert len(index) == len(model.lsh)
    for key in KEYS:
        assert (key in index) == (key in model.lsh)
        got, want = index.get(key), model.lsh.get(key)
        assert (got is None and want is None) or np.array_equal(got, want)
        assert index.meta(key) == (model.meta[key] if key in model.lsh else None)


def bucket_entries(server: RedisServer, index: RedisMinHashIndex) -> int:
    """Band memberships stored in Redis: sets' members, or 8-byte entries of the hash buckets."""
    client = server.client()
    try:
        base = index._base.decode()
        total = sum(client.scard(name) for name in client.scan_iter(match=f"{base}b:*", count=1000))
        for name in client.scan_iter(match=f"{base}h:*", count=1000):
            total += sum(len(value) // 8 for value in client.hvals(name))
        return total
    finally:
        client.close()


def run_program(
    server: RedisServer, uri: str, program: list[tuple], buckets: str, value_bits: int = 32
) -> None:
    model = Model(value_bits)
    index = open_small(uri, reset=True, buckets=buckets, value_bits=value_bits)
    try:
        for op in program:
            kind = op[0]
            if kind == "add":
                index.add(op[1], op[2], op[3])
                model.add(op[1], op[2], op[3])
            elif kind == "add_many":
                assert index.add_many(op[1]) == len(op[1])
                for key, sketch, meta in op[1]:
                    model.add(key, sketch, meta)
            elif kind == "check_and_add":
                want = model.answer(model.lsh.query(op[2]))
                assert rows(index.check_and_add(op[1], op[2], op[3])) == want
                model.add(op[1], op[2], op[3])
            elif kind == "remove":
                assert index.remove(op[1]) == model.lsh.remove(op[1])
                model.meta.pop(op[1], None)
            elif kind == "query":
                assert rows(index.query(op[1])) == model.answer(model.lsh.query(op[1]))
            else:  # another connection, as a second crawler process opens it
                index.close()
                index = open_index(uri, kind="minhash")
                assert (index.buckets, index.value_bits) == (
                    buckets,
                    value_bits,
                )  # adopted from the namespace
            stored = model.lsh.keys()
            for key in stored:  # every stored sketch as a query, after every step
                probe = model.lsh.get(key)
                assert rows(index.query(probe)) == model.answer(model.lsh.query(probe))
        assert_same_state(index, model)
        assert bucket_entries(server, index) == BANDS * len(model.lsh)  # removals leave no members
        stored = model.lsh.keys()
        probes = [model.lsh.get(key) for key in stored] + [np.zeros(NV, np.uint32)]
        want = [model.answer(r) for r in model.lsh.query_many(probes)]
        assert [rows(r) for r in index.query_many(probes)] == want
    finally:
        index.clear(reopen=False)
        index.close()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=operations, value_bits=st.sampled_from([8, 32]))
@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_answers_equal_the_in_memory_lsh(
    server: RedisServer, buckets: str, program: list[tuple], value_bits: int
) -> None:
    run_program(server, f"{server.url}?prefix=prog-{uuid.uuid4().hex[:12]}", program, buckets, value_bits)


def test_a_namespace_keeps_its_value_bits_and_one_from_before_them_is_32(
    server: RedisServer, uri: str
) -> None:
    """8-bit records hold a byte per value; a config without ``value_bits`` (a namespace created
    before the setting existed) is read as 32 bits, whatever a new namespace would get."""
    sketch = np.arange(NV, dtype=np.uint32) * np.uint32(0x01010101)
    with open_small(uri, value_bits=8) as index:
        index.add("a", sketch)
        record = server.client().hget(index._redis.keys[3], b"1")  # the docs hash, seq 1
        assert record[8 : 8 + NV] == bytes(range(NV))  # request id, then one byte per value
    with open_index(uri, kind="minhash", new_value_bits=32) as again:  # the stored width wins
        assert again.value_bits == 8 and np.array_equal(again.get("a"), sketch & 0xFF)
        assert [m.key for m in again.query(sketch ^ np.uint32(0xFFFFFF00))] == ["a"]
        again.clear(reopen=False)
    old = f"{server.url}?prefix=old-{uuid.uuid4().hex[:12]}"
    with open_small(old, value_bits=32) as index:
        index.add("a", sketch)
        server.client().hdel(index._config, "value_bits")
    with open_index(old, kind="minhash", new_value_bits=8) as again:
        assert again.value_bits == 32 and np.array_equal(again.get("a"), sketch)
        assert again.query(sketch ^ np.uint32(0xFFFFFF00)) == []
        server.client().hset(again._config, "value_bits", "4")  # a width a later version might write
        with pytest.raises(IndexSettingsError, match="4-bit sketch values, which this version does not read"):
            open_index(old, kind="minhash")
        again.clear(reopen=False)


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_check_and_add_reports_the_replaced_entry_with_its_old_meta(uri: str, buckets: str) -> None:
    sketch = np.zeros(NV, np.uint32)
    with open_small(uri, buckets=buckets) as index:
        index.add("a", sketch, {"v": 1})
        assert rows(index.check_and_add("a", sketch, {"v": 2})) == [("a", 1.0, {"v": 1})]
        assert index.meta("a") == {"v": 2} and len(index) == 1
        index.clear(reopen=False)


def test_real_sketches_and_defaults(uri: str) -> None:
    text = " ".join(f"word{i}" for i in range(300))
    a, b = minhash(text), minhash(text.replace("word150", "changed"))
    with open_index(uri, kind="minhash") as index:
        assert (index.threshold, index.num_values) == (0.8, 128)
        assert (index.bands, index.rows) == (MinHashLSH(0.8, 128).bands, MinHashLSH(0.8, 128).rows)
        assert index.check_and_add("a", a, {"url": "http://a/"}) == []
        (match,) = index.check_and_add("b", b)
        assert (match.key, match.meta) == ("a", {"url": "http://a/"})
        assert match.similarity == a.jaccard(b) >= 0.8
        assert [m.key for m in index.query(a)] == ["a", "b"]
        assert index.stats()["size"] == 2 and index.stats()["redis_used_memory"] > 0
        index.clear(reopen=False)


VECTORS = Path(__file__).parent / "data" / "minhash-doc-1-vectors.json"


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_buckets_are_named_by_the_band_keys_of_the_scheme_vectors(server: RedisServer, buckets: str) -> None:
    """docs/minhash-doc-1.md §7: a second implementation sharing the namespace finds a document's
    buckets by band number and 64-bit key, as the committed vectors give them."""
    vectors = json.loads(VECTORS.read_text(encoding="utf-8"))
    documents = {d["name"]: d["values"] for d in vectors["documents"]}
    for vector in (v for v in vectors["bands"] if "document" in v):
        prefix = f"mh-{uuid.uuid4().hex[:12]}"
        options = {"bands": vector["bands"], "rows": vector["rows"], "value_bits": vector["value_bits"]}
        with open_index(f"{server.url}?prefix={prefix}", kind="minhash", buckets=buckets, **options) as index:
            index.add("doc", np.array(documents[vector["document"]], dtype=np.uint32))
            client = server.client()
            try:
                epoch = client.hget(f"simhash:{{{prefix}}}:config", "epoch").decode()
                base = f"simhash:{{{prefix}}}:m:{epoch}:"
                if buckets == "set":
                    names = {name.decode() for name in client.scan_iter(match=f"{base}b:*", count=1000)}
                    assert names == {f"{base}b:{t}:{key}" for t, key in enumerate(vector["keys"])}
                else:
                    fields = {
                        (name.decode(), field.hex())
                        for name in client.scan_iter(match=f"{base}h:*", count=1000)
                        for field in client.hkeys(name)
                    }
                    assert fields == {(f"{base}h:{t}", key) for t, key in enumerate(vector["keys"])}
            finally:
                client.close()
            index.clear(reopen=False)


def test_a_bad_item_stores_nothing(uri: str) -> None:
    good = np.zeros(NV, np.uint32)
    with open_small(uri) as index:
        for bad in [("", good, None), ("x", np.zeros(NV + 1, np.uint32), None), ("x", good, {"a": {1, 2}})]:
            with pytest.raises((ValueError, TypeError)):
                index.add_many([("ok", good, None), bad])
        assert len(index) == 0 and index.keys() == []
        index.clear(reopen=False)


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_retried_write_is_not_applied_twice(uri: str, buckets: str) -> None:
    """A check_and_add whose reply was lost is sent again with the same request id: same answer,
    one insert, and not its own match."""
    sketch = np.arange(NV, dtype=np.uint32)
    with open_small(uri, buckets=buckets) as index:
        index.add("original", sketch)
        ((key, record),) = index._records([("copy", sketch, None)])
        args = index._args(b"c", key, record)
        first = index._answer(sketch, index._redis.run(args, "test"))
        again = index._answer(sketch, index._redis.run(args, "test"))
        assert [m.key for m in first] == [m.key for m in again] == ["original"]
        assert index.keys() == ["original", "copy"]
        index.clear(reopen=False)


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_many_documents_across_chunks(uri: str, buckets: str) -> None:
    """add_many and query_many over several script calls and round trips; keys() over 1,000-seq chunks."""
    rng = np.random.default_rng(5)
    data = rng.integers(0, 2**32, size=(1300, 128), dtype=np.uint32)
    model = MinHashLSH(0.8, 128)
    with open_index(f"{uri}&buckets={buckets}", kind="minhash") as index:
        assert index.add_many((f"d{i}", data[i], {"i": i}) for i in range(1300)) == 1300
        model.add_many((f"d{i}", data[i]) for i in range(1300))
        near = data[::7].copy()
        near[:, ::9] += 1  # ~11% of positions changed: still above 0.8 with most bands equal
        probes = np.concatenate([near, rng.integers(0, 2**32, size=(20, 128), dtype=np.uint32)])
        got = [[(m.key, m.similarity) for m in r] for r in index.query_many(probes)]
        assert got == model.query_many(probes)
        assert sum(map(bool, got)) == near.shape[0]
        assert index.remove("d3") and not index.remove("d3")
        index.add("d5", data[5], {"i": "again"})  # replaced: now the newest
        assert index.keys() == [f"d{i}" for i in range(1300) if i not in (3, 5)] + ["d5"]
        assert index.meta("d5") == {"i": "again"} and "d3" not in index and len(index) == 1299
        index.clear(reopen=False)


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_all_keys_share_one_cluster_slot_and_clear_deletes_them(
    uri: str, server: RedisServer, buckets: str
) -> None:
    with open_small(uri, buckets=buckets) as index:
        index.add_many((f"k{i}", np.full(NV, i, np.uint32), None) for i in range(30))
        client = server.client()
        names = list(client.scan_iter(match=f"simhash:{{{index.prefix}}}:*"))
        assert len(names) >= 4 + BANDS  # config, seq, keys, docs and band buckets (or one hash per band)
        assert {key_slot(name) for name in names} == {key_slot(f"{{{index.prefix}}}".encode())}
        assert index.clear() == len(names) - 1  # everything but the config (re-created)
        assert len(index) == 0 and index.check_and_add("a", np.zeros(NV, np.uint32)) == []
        index.clear(reopen=False)
        assert list(client.scan_iter(match=f"simhash:{{{index.prefix}}}:*")) == []
        client.close()


# -- settings -----------------------------------------------------------------------------------


def test_settings_mismatch_is_a_clear_error(uri: str) -> None:
    first = open_small(uri)
    first.add("a", np.zeros(NV, np.uint32))
    try:
        for options, word in [
            ({"num_values": 16}, "num_values=16"),
            ({"threshold": 0.9}, "threshold=0.9"),
            ({"bands": 2}, "bands=2"),
            ({"rows": 4}, "rows=4"),
        ]:
            with pytest.raises(IndexSettingsError, match=word):
                open_index(uri, kind="minhash", **options)
        with pytest.raises(IndexSettingsError, match="num_values=16"):
            open_index(f"{uri}&num_values=16", kind="minhash")  # in the URI too
        with pytest.raises(IndexSettingsError, match="buckets='hash'"):
            open_index(f"{uri}&buckets=hash", kind="minhash")
        with open_index(uri, kind="minhash") as again:  # nothing given: the stored settings
            assert (again.threshold, again.num_values, again.bands, again.rows) == (
                THRESHOLD,
                NV,
                BANDS,
                ROWS,
            )
            assert [m.key for m in again.query(np.zeros(NV, np.uint32))] == ["a"]
        with pytest.raises(TypeError, match="tables"):
            open_index(uri, kind="minhash", tables="hash")
    finally:
        first.clear(reopen=False)
        first.close()


def test_simhash_and_minhash_namespaces_are_told_apart(server: RedisServer) -> None:
    simhash_uri = f"{server.url}?prefix=sh-{uuid.uuid4().hex[:12]}"
    with open_index(simhash_uri) as simhash_index:
        simhash_index.add(0xABC, "a")
        with pytest.raises(IndexSettingsError, match="simhash index"):
            open_index(simhash_uri, kind="minhash")
        simhash_index.clear()
    minhash_uri = f"{server.url}?prefix=mh-{uuid.uuid4().hex[:12]}"
    with open_small(minhash_uri) as index:
        with pytest.raises(SimhashIndexError, match="not a scrapy-simhash-redis/1 index"):
            open_index(minhash_uri)
        index.clear(reopen=False)


# -- several processes --------------------------------------------------------------------------


def planted_clusters(n: int, seed: int) -> list[list[np.ndarray]]:
    """n clusters of 6 sketches of 128 values: within a cluster at most 8 positions differ (estimated
    Jaccard >= 0.93, most bands equal); across clusters the values are independent random."""
    rng = np.random.default_rng(seed)
    clusters = []
    for _ in range(n):
        base = rng.integers(0, 2**32, size=128, dtype=np.uint32)
        members = []
        for _ in range(6):
            member = base.copy()
            member[rng.choice(128, size=4, replace=False)] = rng.integers(0, 2**32, size=4, dtype=np.uint32)
            members.append(member)
        clusters.append(members)
    return clusters


def insert_worker(uri: str, worker: int, workers: int, clusters, barrier, results) -> None:
    idx = open_index(uri, kind="minhash")  # the namespace's bucket kind, adopted
    barrier.wait()
    originals = []
    for c, members in enumerate(clusters):
        for m, sketch in enumerate(members):
            if (c + m) % workers == worker and not idx.check_and_add(f"c{c}-m{m}", sketch, {"w": worker}):
                originals.append(c)
    idx.close()
    results.put((worker, originals))


@pytest.mark.parametrize(("workers", "buckets"), [(2, "set"), (4, "set"), (3, "hash")])
def test_concurrent_processes_record_one_original_per_cluster(uri: str, workers: int, buckets: str) -> None:
    clusters = planted_clusters(40, seed=workers)
    open_index(uri, kind="minhash", buckets=buckets).close()  # the namespace exists before the workers race
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=insert_worker, args=(uri, w, workers, clusters, barrier, results))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    outcome = dict(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    originals = sorted(c for found in outcome.values() for c in found)
    assert originals == list(range(len(clusters)))  # exactly one original per cluster
    with open_index(uri, kind="minhash") as idx:
        assert len(idx) == 6 * len(clusters)
        assert {m.key for m in idx.query(clusters[0][0])} == {f"c0-m{m}" for m in range(6)}
        idx.clear(reopen=False)


# -- failures -----------------------------------------------------------------------------------


def _namespace_keys(srv: RedisServer, prefix: str) -> list[bytes]:
    client = srv.client()
    try:
        return client.keys(f"simhash:{{{prefix}}}:*")
    finally:
        client.close()


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_redis_restarted_empty_is_detected_not_reinitialised(tmp_path: Path, buckets: str) -> None:
    srv = RedisServer(tmp_path / "amnesia").start()
    try:
        idx = open_index(
            f"{srv.url}?prefix=amnesia&retries=3&retry_cap=0.1&buckets={buckets}", kind="minhash"
        )
        rng = np.random.default_rng(1)
        data = rng.integers(0, 2**32, size=(40, 128), dtype=np.uint32)
        idx.add_many((f"k{i}", data[i], None) for i in range(40))
        assert [m.key for m in idx.check_and_add("a", data[0])] == ["k0"]
        srv.kill()
        srv.start(persistent=False)  # comes back empty: the namespace is gone, the client does not know
        lost = f"127.0.0.1:{srv.port}/0 lost the index namespace 'amnesia'"
        calls = {
            "check_and_add": lambda: idx.check_and_add("b", data[1]),
            "add": lambda: idx.add("b", data[1]),
            "add_many": lambda: idx.add_many([("b", data[1], None)]),
            "query": lambda: idx.query(data[0]),
            "query_many": lambda: idx.query_many(data[:2]),
            "get": lambda: idx.get("a"),
            "meta": lambda: idx.meta("a"),
            "remove": lambda: idx.remove("a"),
            "len": lambda: len(idx),
            "keys": lambda: idx.keys(),
        }
        for name, call in calls.items():
            with pytest.raises(IndexLostError, match=lost):
                call()
            assert _namespace_keys(srv, "amnesia") == [], f"{name} re-created part of the namespace"
        # Another process opening it now starts a new namespace (it cannot know); the first client
        # still refuses, because the namespace it knew was replaced, not found again.
        with open_index(f"{srv.url}?prefix=amnesia", kind="minhash") as other:
            assert other.check_and_add("c", data[0]) == []
        with pytest.raises(IndexLostError, match="deleted and created again"):
            idx.check_and_add("b", data[1])
        # Starting afresh on purpose: the client adopts the new namespace.
        idx.clear()
        assert idx.check_and_add("d", data[0]) == [] and len(idx) == 1
        idx.close()
    finally:
        srv.stop()


def test_unreachable_redis_raises_index_unavailable_naming_the_host(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "outage").start()
    idx = open_index(f"{srv.url}?prefix=outage&retries=3&retry_cap=0.1", kind="minhash")
    sketch = np.arange(128, dtype=np.uint32)
    idx.add("a", sketch)
    srv.kill()
    with pytest.raises(IndexUnavailableError, match=f"127.0.0.1:{srv.port}"):
        idx.check_and_add("b", sketch)
    with pytest.raises(IndexUnavailableError, match=f"127.0.0.1:{srv.port}"):
        idx.query_many([sketch])
    idx.close()
    port = free_port()
    with pytest.raises(IndexUnavailableError, match=f"127.0.0.1:{port}.*opening the index"):
        open_index(f"redis://127.0.0.1:{port}/0?prefix=x&retries=1", kind="minhash")


def test_closed_index_refuses_calls(uri: str) -> None:
    index = open_small(uri)
    index.clear(reopen=False)
    index.close()
    with pytest.raises(SimhashIndexError, match="closed"):
        index.query(np.zeros(NV, np.uint32))


@pytest.mark.parametrize("buckets", BUCKET_KINDS)
def test_restart_with_persistence_loses_no_acknowledged_insert(tmp_path: Path, buckets: str) -> None:
    """Writes ride out a SIGKILL and restart of Redis (retries; a replayed write is applied once)."""
    import threading
    import time

    srv = RedisServer(tmp_path / "restart").start()
    rng = np.random.default_rng(3)
    data = rng.integers(0, 2**32, size=(20_000, 128), dtype=np.uint32)
    acknowledged: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        idx = open_index(
            f"{srv.url}?prefix=restart&retries=12&retry_cap=0.5&buckets={buckets}", kind="minhash"
        )
        i = 0
        try:
            while not stop.is_set() and i < 19_000:
                if i % 3:
                    idx.check_and_add(f"k{i}", data[i])
                    acknowledged.append(f"k{i}")
                    i += 1
                else:
                    keys = [f"k{j}" for j in range(i, i + 20)]
                    idx.add_many((key, data[i + j], None) for j, key in enumerate(keys))
                    acknowledged.extend(keys)
                    i += 20
        except BaseException as exc:
            errors.append(exc)
        finally:
            idx.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        time.sleep(0.5)
        before = len(acknowledged)
        srv.kill()  # SIGKILL: only fsynced writes survive
        time.sleep(0.5)
        srv.start()
        time.sleep(0.5)
        stop.set()
        thread.join(60)
        assert not errors, errors
        assert before > 0 and len(acknowledged) > before  # writes went on after the restart
        with open_index(f"{srv.url}?prefix=restart", kind="minhash") as idx:
            assert len(idx) == len(acknowledged) == len(set(acknowledged))
            assert idx.keys() == acknowledged
            for key in acknowledged[:: max(1, len(acknowledged) // 200)]:
                assert [m.key for m in idx.query(data[int(key[1:])])] == [key]
    finally:
        stop.set()
        srv.stop()


def test_redis_cluster_three_primaries(tmp_path: Path) -> None:
    """Band buckets are named inside the script; the hash tag keeps them in the namespace's slot."""
    from redis_server import RedisClusterServers

    cluster = RedisClusterServers(tmp_path, size=3).start()
    try:
        rng = np.random.default_rng(4)
        data = rng.integers(0, 2**32, size=(700, 128), dtype=np.uint32)
        for i, buckets in enumerate(BUCKET_KINDS * 2):
            uri = f"{cluster.url}?cluster=1&prefix=crawl{i}&buckets={buckets}"
            with open_index(uri, kind="minhash") as idx:
                assert idx.check_and_add("a", data[0]) == []
                assert [m.key for m in idx.check_and_add("b", data[0])] == ["a"]
                idx.add_many((f"d{j}", data[j], None) for j in range(1, 700))
                got = [[m.key for m in r] for r in idx.query_many(data[:3])]
                assert got == [["a", "b"], ["d1"], ["d2"]]
                assert len(idx) == 701 and idx.remove("a") and "a" not in idx
                assert idx.stats()["size"] == 700
                idx.clear(reopen=False)
    finally:
        cluster.stop()
