"""The Redis index against real redis-server processes started by this module on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import random
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import index_contract as contract
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot
from redis_server import RedisClusterServers, RedisServer, age_writes, free_port

from scrapy_simhash import hamming
from scrapy_simhash.index import (
    IndexCorruptError,
    IndexLostError,
    IndexUnavailableError,
    LayoutError,
    SimhashIndexError,
    open_index,
)
from scrapy_simhash.index.redis.redis_store import TABLE_KINDS, RedisIndex

MAX64 = (1 << 64) - 1


@pytest.fixture(scope="module")
def server(redis_server: RedisServer) -> RedisServer:
    """The module's redis-server (conftest's), by the name these tests use."""
    return redis_server


@pytest.fixture
def uri(server: RedisServer) -> str:
    """A fresh namespace per test on the shared server."""
    return f"{server.url}?prefix=test-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def index(uri: str) -> RedisIndex:
    idx = open_index(uri)
    yield idx
    idx.clear()
    idx.close()


# -- the backend contract (the same checks as the embedded index) -------------------------------

SETTINGS = settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(params=["zset", "hash"])
def factory(server: RedisServer, request: pytest.FixtureRequest) -> contract.Factory:
    """Fresh namespaces, with the tables as sorted sets and as hash buckets."""
    opened: list[RedisIndex] = []

    def make(k: int = 3, **options: Any) -> RedisIndex:
        options.setdefault("tables", request.param)
        idx = open_index(f"{server.url}?prefix=contract-{uuid.uuid4().hex}", k=k, **options)
        opened.append(idx)
        return idx

    yield make
    for idx in opened:  # drop the namespaces (through a fresh connection: the test closed its own)
        with open_index(f"{server.url}?prefix={idx.prefix}", k=idx.k) as again:
            again.clear()


def reopen(index: RedisIndex) -> RedisIndex:  # type: ignore[override]
    """Another connection to the same namespace, as a second crawler process would open it."""
    index.close()
    return open_index(f"{index.location}?prefix={index.prefix}", k=index.k)


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
@given(st.data(), st.sampled_from(["manku", "blocks:5", "tiered:5:2:4:1", "blocks:6"]))
def test_random_programs_other_layouts(factory: contract.Factory, data: st.DataObject, layout: str) -> None:
    contract.run_program(factory, reopen, 3, data.draw(contract.programs(3)), layout=layout)


@SETTINGS
@given(st.data(), st.sampled_from([0, 1, 2, 5, 8]))
def test_random_programs_other_k(factory: contract.Factory, data: st.DataObject, k: int) -> None:
    contract.run_program(factory, reopen, k, data.draw(contract.programs(k, max_ops=25)))


def test_crowded_buckets(factory: contract.Factory) -> None:
    """200 fingerprints in one bucket of two tables: inserts, removals, replacements inside the bucket."""
    rng = random.Random(7)
    top = 0xABCD << 48  # one table key for the first table; few values for the others
    hashes = [top | (rng.getrandbits(8) << 40) | rng.getrandbits(16) for _ in range(200)]
    ops: list[tuple[Any, ...]] = [("add", h or 1, f"k{i}") for i, h in enumerate(hashes)]
    ops += [("remove", f"k{i}") for i in range(0, 200, 3)]
    ops += [("add", hashes[i] ^ 0b11, f"k{i}") for i in range(1, 200, 7)]
    ops += [("query", h ^ (1 << rng.randrange(64))) for h in hashes[::10]]
    contract.run_program(factory, reopen, 3, ops)


# -- Redis specifics ----------------------------------------------------------------------------


def test_low_bits_survive_no_float_scores(index: RedisIndex, server: RedisServer) -> None:
    """Fingerprints that a double would merge (they differ below bit 11) stay distinct and exact."""
    high = (1 << 63) | (1 << 40)
    index.add_many([(high | 1, "a", None), (high | 2, "b", None), (high | 0x7FF, "c", None)])
    assert index.get("a").simhash == high | 1
    assert index.get("c").simhash == high | 0x7FF
    assert [(m.key, m.distance) for m in index.query(high | 1, 0)] == [("a", 0)]
    assert [(m.key, m.distance) for m in index.query(high | 3, 1)] == [("a", 1), ("b", 1)]
    client = server.client()
    tables = list(client.scan_iter(match=f"simhash:{{{index.prefix}}}:z*"))
    assert len(tables) == len(index.layout.tables)
    for table in tables:
        assert {score for _, score in client.zrange(table, 0, -1, withscores=True)} == {0.0}
    client.close()


def test_iteration_and_stats(index: RedisIndex) -> None:
    index.add_many((i * 0x9E3779B97F4A7C15 & MAX64 or 1, f"k{i}", {"i": i}) for i in range(1, 1201))
    index.remove("k7")
    index.add(0x99, "k3", {"i": "again"})  # replaced: now the newest
    assert len(index) == 1199
    listed = list(index)  # oldest first, across several 1,000-seq chunks
    assert [m.key for m in listed] == [f"k{i}" for i in range(1, 1201) if i not in (3, 7)] + ["k3"]
    assert [m.seq for m in listed] == sorted(m.seq for m in listed)
    assert listed[-1].meta == {"i": "again"} and listed[-1].simhash == 0x99
    stats = index.stats()
    assert stats["size"] == 1199 and stats["backend"] == "redis" and stats["redis_used_memory"] > 0


# -- namespaces, configuration, cluster slots -----------------------------------------------------


def test_prefixes_are_separate_namespaces(server: RedisServer) -> None:
    one = open_index(f"{server.url}?prefix=crawl-one-{uuid.uuid4().hex}")
    two = open_index(f"{server.url}?prefix=crawl-two-{uuid.uuid4().hex}")
    try:
        one.add(0xABCDEF, "a")
        assert two.query(0xABCDEF) == [] and len(two) == 0
        assert two.check_and_add(0xABCDEF, "b") == []
        assert [m.key for m in one.query(0xABCDEF)] == ["a"]
    finally:
        for idx in (one, two):
            idx.clear()
            idx.close()


def test_all_keys_of_an_index_share_one_cluster_slot(index: RedisIndex, server: RedisServer) -> None:
    index.add_many((h, f"k{h}", None) for h in range(1, 50))
    client = server.client()
    keys = list(client.scan_iter(match=f"simhash:{{{index.prefix}}}:*"))
    client.close()
    assert len(keys) >= 4 + len(index.layout.tables)  # config, seq, keys, docs and every table
    assert {key_slot(key) for key in keys} == {key_slot(f"{{{index.prefix}}}".encode())}


def test_openers_must_agree_on_k_and_retention(uri: str) -> None:
    first = open_index(uri, layout="blocks:5")
    try:
        first.add(0xFF, "a")
        with pytest.raises(LayoutError, match="k=3"):
            open_index(uri, k=2)
        with pytest.raises(LayoutError, match="layout"):
            open_index(uri, layout="manku")
        with pytest.raises(ValueError, match="retention"):
            open_index(uri, retention=60)
        with pytest.raises(LayoutError, match="hash tables"):
            open_index(uri, tables="hash")
        with pytest.raises(ValueError, match="tables must be"):
            open_index(uri, tables="list")
        with open_index(uri) as second:  # no layout asked: the stored one is adopted
            assert second.layout.spec == "blocks:5:2" and second.tables == "zset"
            assert [m.key for m in second.query(0xFE)] == ["a"]
    finally:
        first.clear()
        first.close()


def test_uri_options_are_validated(server: RedisServer) -> None:
    with pytest.raises(TypeError, match="bogus"):
        open_index(f"{server.url}?prefix=x&bogus=1")
    with pytest.raises(ValueError, match="braces"):
        open_index(f"{server.url}?prefix=a{{b}}")


def table_entries(client, idx: RedisIndex) -> int:
    """Entries stored in the index's Manku tables, read straight from Redis."""
    keys = [f"simhash:{{{idx.prefix}}}:{idx.tables[0]}{i}" for i in range(len(idx.layout.tables))]
    if idx.tables == "zset":
        return sum(client.zcard(key) for key in keys)
    return sum(len(bucket) // 16 for key in keys for bucket in client.hvals(key))


@pytest.mark.parametrize("tables", TABLE_KINDS)
def test_retention_forgets_old_fingerprints(server: RedisServer, tables: str) -> None:
    """An hour's window: the write is aged past it (age_writes), no test waits on a short one."""
    idx = open_index(f"{server.url}?prefix=ret-{uuid.uuid4().hex}&retention=3600&tables={tables}")
    client = server.client()
    try:
        assert idx.retention == 3600
        idx.add(0xAAAA, "old")
        assert age_writes(client, idx.prefix, 3000) == 1  # 50 minutes old: inside the window
        assert [m.key for m in idx.query(0xAAAA)] == ["old"] and len(idx) == 1
        age_writes(client, idx.prefix, 700)  # past it
        assert idx.query(0xAAAA) == [] and idx.get("old") is None and len(idx) == 0 and list(idx) == []
        assert idx.check_and_add(0xAAAB, "new") == []  # expired: not an original any more
        assert client.hlen(f"simhash:{{{idx.prefix}}}:docs") == 1  # the write trimmed "old" away
        assert table_entries(client, idx) == len(idx.layout.tables)  # from every table too
        assert [m.key for m in idx.query(0xAAAA)] == ["new"]
    finally:
        client.close()
        idx.clear()
        idx.close()


def test_retried_write_is_not_applied_twice(index: RedisIndex) -> None:
    """A write whose reply was lost is sent again with the same request id: same answer, one insert."""
    index.add(0x1000, "original")
    args = index._write_args(b"c", 0x1001, "copy", None)
    first = index._matches(index._run(args, "test"))
    again = index._matches(index._run(args, "test"))
    assert [m.key for m in first] == [m.key for m in again] == ["original"]
    assert len(index) == 2
    assert [m.key for m in index.query(0x1001)] == ["copy", "original"]


# -- several processes --------------------------------------------------------------------------


def planted_clusters(n: int, seed: int) -> list[list[int]]:
    """n clusters of 8 fingerprints, pairwise within 3 bits inside a cluster, > 3 bits across."""
    rng = random.Random(seed)
    bases: list[int] = []
    while len(bases) < n:
        b = rng.getrandbits(64)
        if b and all(hamming(b, o) > 12 for o in bases):
            bases.append(b)
    clusters = []
    for b in bases:
        bits = rng.sample(range(64), 3)
        clusters.append(
            [contract.flip(b, [bit for j, bit in enumerate(bits) if mask >> j & 1]) or 1 for mask in range(8)]
        )
    return clusters


def insert_worker(uri: str, worker: int, workers: int, clusters: list[list[int]], barrier, results) -> None:
    idx = open_index(uri)
    barrier.wait()
    originals = []
    for c, members in enumerate(clusters):
        for m, h in enumerate(members):
            if m % workers == worker and not idx.check_and_add(h, f"c{c}-m{m}", {"worker": worker}):
                originals.append(c)
    idx.close()
    results.put((worker, originals))


@pytest.mark.parametrize("workers", [2, 4])
def test_concurrent_processes_record_one_original_per_cluster(uri: str, workers: int) -> None:
    clusters = planted_clusters(60, seed=workers)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=insert_worker, args=(uri, w, workers, clusters, barrier, results))
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    outcome = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    originals = sorted(c for found in outcome.values() for c in found)
    assert originals == list(range(len(clusters)))  # exactly one original per cluster
    with open_index(uri) as idx:
        assert len(idx) == 8 * len(clusters)
        assert {m.key for m in idx.query(clusters[0][0])} == {f"c0-m{m}" for m in range(8)}
        idx.clear()


# -- Redis Cluster ------------------------------------------------------------------------------


def test_redis_cluster_three_primaries(tmp_path: Path) -> None:
    cluster = RedisClusterServers(tmp_path, size=3).start()
    try:
        prefixes = [f"crawl{i}" for i in range(6)]
        for i, prefix in enumerate(prefixes):
            kind = TABLE_KINDS[i % 2]
            with open_index(f"{cluster.url}?cluster=1&prefix={prefix}&tables={kind}") as idx:
                assert idx.check_and_add(0xC0FFEE, "a") == []
                assert [m.key for m in idx.check_and_add(0xC0FFEF, "b")] == ["a"]
                bulk = {f"bulk{i}": i * 0x9E3779B97F4A7C15 & MAX64 for i in range(1, 700)}
                idx.add_many((h, key, None) for key, h in bulk.items())
                probes = [0xC0FFEE, bulk["bulk5"], bulk["bulk6"] ^ 0b101]
                expected = [sorted(key for key, h in bulk.items() if hamming(h, q) <= 3) for q in probes]
                expected[0] = ["a", "b"]
                assert [sorted(m.key for m in r) for r in idx.query_many(probes)] == expected
                assert len(idx) == 701 and idx.remove("a") and idx.get("b").simhash == 0xC0FFEF
                assert idx.stats()["size"] == 700 and idx.stats()["redis_used_memory"] > 0
        # different crawls land on different primaries: the cluster spreads crawls, not one crawl
        owners = set()
        for prefix in prefixes:
            for node in cluster.nodes:
                client = node.client()
                try:
                    if client.execute_command(
                        "CLUSTER", "COUNTKEYSINSLOT", key_slot(f"{{{prefix}}}".encode())
                    ):
                        owners.add(node.port)
                finally:
                    client.close()
        assert len(owners) >= 2
    finally:
        cluster.stop()


# -- failures -----------------------------------------------------------------------------------
def wait_until(condition: Callable[[], bool], limit: float = 120.0) -> None:
    """Poll until ``condition`` holds; ``limit`` seconds only turn a hang into a failure (no speed is
    asserted: under load the wait is longer, never wrong)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "the awaited event never came"
        time.sleep(0.01)


@pytest.mark.parametrize("tables", TABLE_KINDS)
def test_restart_with_persistence_loses_no_acknowledged_insert(tmp_path: Path, caplog, tables: str) -> None:
    srv = RedisServer(tmp_path / "restart").start()
    acknowledged: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer() -> None:
        idx = open_index(f"{srv.url}?prefix=restart&retries=12&retry_cap=0.5&tables={tables}")
        i = 0
        try:
            while not stop.is_set():
                i += 1
                if i % 3:
                    idx.check_and_add(i * 0x9E3779B97F4A7C15 & MAX64 or 1, f"k{i}")
                    acknowledged.append(f"k{i}")
                else:
                    keys = [f"b{i}-{j}" for j in range(20)]
                    idx.add_many((hash(key) & MAX64 or 1, key, None) for key in keys)
                    acknowledged.extend(keys)
        except BaseException as exc:
            errors.append(exc)
        finally:
            idx.close()

    def retried() -> bool:
        return any("retry" in r.getMessage() and str(srv.port) in r.getMessage() for r in caplog.records)

    thread = threading.Thread(target=writer)
    thread.start()
    wait_until(lambda: len(acknowledged) >= 50 or bool(errors))  # events, not a pause, set the pace
    before = len(acknowledged)
    srv.kill()  # SIGKILL: only fsynced writes survive
    wait_until(lambda: retried() or bool(errors))  # the writer met the outage
    srv.start()
    wait_until(lambda: len(acknowledged) >= before + 50 or bool(errors))
    stop.set()
    thread.join(30)
    assert not errors, errors
    assert before > 0 and len(acknowledged) > before  # writes went on after the restart
    assert retried()
    with open_index(f"{srv.url}?prefix=restart") as idx:
        assert len(idx) == len(set(acknowledged))
        missing = [key for key in acknowledged if idx.get(key) is None]
        assert missing == []
    srv.stop()


def _namespace_keys(srv: RedisServer, prefix: str) -> list[bytes]:
    client = srv.client()
    try:
        return client.keys(f"simhash:{{{prefix}}}:*")
    finally:
        client.close()


@pytest.mark.parametrize("tables", TABLE_KINDS)
def test_redis_restarted_empty_is_detected_not_reinitialised(tmp_path: Path, tables: str) -> None:
    srv = RedisServer(tmp_path / "amnesia").start()
    try:
        idx = open_index(f"{srv.url}?prefix=amnesia&retries=3&retry_cap=0.1&tables={tables}", mode="simhash")
        idx.add_many((i * 0x9E3779B97F4A7C15 & MAX64, f"k{i}", None) for i in range(1, 40))
        assert [m.key for m in idx.check_and_add(0xF00D, "a")] == []
        srv.kill()
        srv.start(persistent=False)  # comes back empty: the namespace is gone, the client does not know
        lost = f"127.0.0.1:{srv.port}/0 lost the index namespace 'amnesia'"
        calls = {
            "check_and_add": lambda: idx.check_and_add(0xF00C, "b"),
            "add": lambda: idx.add(0xF00C, "b"),
            "add_many": lambda: idx.add_many([(0xF00C, "b", None)]),
            "query": lambda: idx.query(0xF00D),
            "query_many": lambda: idx.query_many([0xF00D]),
            "get": lambda: idx.get("a"),
            "remove": lambda: idx.remove("a"),
            "len": lambda: len(idx),
        }
        for name, call in calls.items():
            with pytest.raises(IndexLostError, match=lost):
                call()
            assert _namespace_keys(srv, "amnesia") == [], f"{name} re-created part of the namespace"
        assert issubclass(IndexLostError, IndexCorruptError)
        # Another process opening it now starts a new namespace (it cannot know); the first client
        # still refuses, because the namespace it knew was replaced, not found again.
        with open_index(f"{srv.url}?prefix=amnesia&tables={tables}") as other:
            assert other.check_and_add(0xF00D, "c") == []
        with pytest.raises(IndexLostError, match="deleted and created again"):
            idx.check_and_add(0xF00C, "b")
        # Starting afresh on purpose (SIMHASH_RESET clears the namespace): the client adopts it.
        idx.clear()
        assert idx.check_and_add(0xF00D, "d") == [] and len(idx) == 1
        idx.close()
    finally:
        srv.stop()


def test_namespace_without_an_epoch_gets_one(uri: str, server: RedisServer) -> None:
    """A namespace created before epochs existed is adopted, not reported lost."""
    index = open_index(uri)
    index.add(0xABC, "a")
    client = server.client()
    client.hdel(f"simhash:{{{index.prefix}}}:config", "epoch")
    client.close()
    again = reopen(index)
    assert [m.key for m in again.check_and_add(0xABD, "b")] == ["a"]
    again.clear()
    again.close()


def test_unreachable_redis_raises_index_unavailable_naming_the_host(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "outage").start()
    idx = open_index(f"{srv.url}?prefix=outage&retries=3&retry_cap=0.1")
    idx.add(0xBEEF, "a")
    srv.kill()
    # bounded retries, not a hang: the first try and 3 retries (counted, not timed)
    with pytest.raises(IndexUnavailableError, match=f"127.0.0.1:{srv.port}.* 4 attempts in "):
        idx.check_and_add(0xBEEE, "b")
    with pytest.raises(IndexUnavailableError, match=" 4 attempts in "):
        idx.add_many([(0xBEED, "c", None)])
    assert issubclass(IndexUnavailableError, SimhashIndexError)
    idx.close()


class _FakeClock:
    """time.monotonic and time.sleep for redis_client: sleeping advances the clock, nothing waits."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.mark.parametrize(
    ("budget", "attempts"),
    [(None, 11), (1.0, 5), (0.0, 1)],  # pauses 0.05, 0.1, 0.2, 0.4 = 0.75 s; the next (0.8 s) would pass 1 s
)
def test_retry_budget_bounds_a_failing_call_by_time_as_retries_bound_it_by_count(
    monkeypatch: pytest.MonkeyPatch, budget: float | None, attempts: int
) -> None:
    from scrapy_simhash.index.redis import redis_client

    clock = _FakeClock()
    monkeypatch.setattr(redis_client, "time", clock)
    script = redis_client.ScriptClient(
        redis.Redis(), [], location="redis://nowhere", namespace="x", retry_budget=budget
    )
    tries = []

    def refused() -> None:
        tries.append(clock.now)
        raise redis.ConnectionError("connection refused")

    with pytest.raises(IndexUnavailableError, match=f"{attempts} attempts? in"):
        script.call(refused, "testing")
    assert len(tries) == attempts
    assert clock.now <= (budget if budget is not None else 12)


def test_retry_budget_must_be_seconds(server: RedisServer) -> None:
    with pytest.raises(ValueError, match="retry_budget"):
        open_index(f"{server.url}?prefix=budget&retry_budget=-1")


def test_a_crawl_gives_its_redis_calls_about_a_second(server: RedisServer) -> None:
    """The crawl's client: 1 s socket and connect timeouts, retries within 1 s, for the simhash store
    and the sketch store; what the URI names itself wins."""
    from scrapy_simhash.crawl_index import open_crawl_index

    def connection(store: Any) -> tuple[float, float, float | None]:
        script = store._redis
        kwargs = script.client.connection_pool.connection_kwargs
        return kwargs["socket_timeout"], kwargs["socket_connect_timeout"], script.retry_budget

    prefix = f"crawl-{uuid.uuid4().hex[:8]}"
    index = open_crawl_index(f"{server.url}?prefix={prefix}", 3)
    try:
        assert connection(index.simhashes) == connection(index.sketches) == (1.0, 1.0, 1.0)
    finally:
        index.clear()
        index.close()
    index = open_crawl_index(f"{server.url}?prefix={prefix}&timeout=4&retry_budget=7", 3)
    try:
        assert connection(index.simhashes) == connection(index.sketches) == (4.0, 2.0, 7.0)
    finally:
        index.clear()
        index.close()
    with open_index(f"{server.url}?prefix={prefix}") as batch:  # outside a crawl: the long default
        assert connection(batch) == (5.0, 2.0, None) and batch._redis.retries == 10
        batch.clear()


def test_opening_without_a_server_raises_index_unavailable() -> None:
    port = free_port()
    with pytest.raises(IndexUnavailableError, match=f"127.0.0.1:{port}.*opening the index"):
        open_index(f"redis://127.0.0.1:{port}/0?prefix=x&retries=1")


def test_script_cache_flush_is_recovered(index: RedisIndex, server: RedisServer) -> None:
    index.add(0x77, "a")
    client = server.client()
    client.script_flush()
    assert [m.key for m in index.check_and_add(0x76, "b")] == ["a"]
    client.script_flush()
    assert index.add_many([(0x75, "c", None)]) == 1
    client.script_flush()
    assert [len(r) for r in index.query_many([0x77])] == [3]
    client.close()


def test_closed_index_refuses_calls(uri: str) -> None:
    idx = open_index(uri)
    idx.clear()
    idx.close()
    idx.close()  # idempotent
    with pytest.raises(SimhashIndexError, match="closed"):
        idx.add(1, "a")


def test_redis_error_reply_becomes_index_error(index: RedisIndex, server: RedisServer) -> None:
    client = server.client()
    client.set(f"simhash:{{{index.prefix}}}:docs", b"not a hash")  # someone else's key in our namespace
    client.close()
    with pytest.raises(SimhashIndexError, match="refused"):
        index.add(0x55, "a")


# -- end to end: the example project's spider as two crawler processes ---------------------------


def crawl_outcome(items: list[dict[str, Any]], base: str) -> dict[str, str | None]:
    """path -> path of the original it duplicates (None for an original), pages with a fingerprint."""
    return {
        item["url"][len(base) :]: item["near_duplicate_of"][len(base) :]
        if item["near_duplicate_of"]
        else None
        for item in items
        if item.get("simhash")
    }


def as_clusters(outcome: dict[str, str | None]) -> set[frozenset[str]]:
    """Pages grouped by their cluster's original: a page names its most similar earlier page, which
    may itself be a near-duplicate (a chain), so each chain is followed to its end."""

    def original(path: str) -> str:
        seen = {path}
        while (earlier := outcome.get(path)) and earlier not in seen:
            seen.add(earlier)
            path = earlier
        return path

    groups: dict[str, set[str]] = {}
    for path in outcome:
        groups.setdefault(original(path), set()).add(path)
    return {frozenset(g) for g in groups.values()}


@pytest.mark.slow  # three Scrapy crawls, ~20 s
def test_example_spider_as_two_processes_finds_what_one_process_finds(
    server: RedisServer, tmp_path: Path
) -> None:
    from crawl_partition import share
    from crawl_support import demo_site, run_crawl

    articles = 8
    clusters = demo_site.expected_clusters(articles)
    # the first copy fetched is the original: each cluster is one chain of near_duplicate_of links
    settings = {"SIMHASH_WORKERS": 1, "LOG_LEVEL": "INFO", "SIMHASH_KEEP": "first"}
    with demo_site.serve(demo_site.build_site(articles)) as base:
        split = [{share(base + path, 2) for path in cluster} for cluster in clusters]
        assert any(len(s) == 2 for s in split)  # some clusters are spread over both processes

        single_uri = f"{server.url}?prefix=e2e-one-{uuid.uuid4().hex}"
        single = run_crawl(base + "/", tmp_path / "single", {**settings, "SIMHASH_INDEX": single_uri})
        one = crawl_outcome(single.items, base)

        shared_uri = f"{server.url}?prefix=e2e-two-{uuid.uuid4().hex}"
        results: dict[int, Any] = {}

        def crawl(part: int) -> None:
            results[part] = run_crawl(
                base + "/",
                tmp_path / f"part{part}",
                {
                    **settings,
                    "SIMHASH_INDEX": shared_uri,
                    "PARTITION": f"{part}/2",
                    "DOWNLOADER_MIDDLEWARES": {"crawl_partition.PartitionMiddleware": 50},
                },
            )

        threads = [threading.Thread(target=crawl, args=(part,)) for part in (0, 1)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(200)
    assert set(results) == {0, 1}, "a crawl process failed"
    parts = [crawl_outcome(results[p].items, base) for p in (0, 1)]
    # every page was downloaded by exactly one process, except the start page (by both)
    assert set(parts[0]) & set(parts[1]) <= {"/"}
    two = {**parts[1], **parts[0]}
    assert set(two) == set(one)
    # the same near-duplicates: the same groups, one original each, as many duplicates
    assert as_clusters(two) == as_clusters(one)
    assert {frozenset(c) for c in clusters} <= as_clusters(one)
    assert (
        sum(1 for o in two.values() if o)
        == sum(1 for o in one.values() if o)
        == sum(len(c) - 1 for c in clusters)
    )
    # and some were found against an original that the other process recorded
    owner = {path: p for p in (0, 1) for path in parts[p]}
    assert any(o and o != "/" and owner[o] != owner[path] for path, o in two.items())
    with open_index(shared_uri) as shared, open_index(single_uri) as alone:
        assert len(shared) == len(alone) == len(one)
        shared.clear()
        alone.clear()


# Redis unreachable when the crawl starts: tests/test_scrapy_crawl.py runs `scrapy crawl` for each policy.


# -- the command line -----------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    entry = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", entry, "index", *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("command", [["stats"], ["export"], ["query", "4jkulemdaurgm"]])
def test_read_only_cli_on_unreachable_redis_fails_at_once_with_one_line(command: list[str]) -> None:
    port = free_port()
    uri = f"redis://127.0.0.1:{port}/0?prefix=gone"
    done = _cli(command[0], uri, *command[1:])
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # no retry lines
    assert f"127.0.0.1:{port}" in lines[0] and "unavailable" in lines[0] and "1 attempt in" in lines[0]


def test_cli_stats_on_redis(uri: str) -> None:
    with open_index(uri) as idx:
        idx.add(0xBEEF, "a")
    done = _cli("stats", uri)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["size"] == 1
    with open_index(uri) as idx:
        idx.clear()


def _outage_crawl(
    tmp_path: Path, srv: RedisServer, uri: str, restart_after: int, articles: int, **settings: Any
) -> Any:
    """A crawl of the demo site (``articles`` articles: about 3.4 pages each) through
    ``crawl_outage.OutageDrill``, which stops redis-server after 10 pages and restarts it
    ``restart_after`` pages later; its result. The pages left after the restart only need to show
    that tagging resumed: a few dozen are plenty, and each costs the crawl's download delay."""
    from crawl_support import demo_site, run_crawl

    settings = {
        "SIMHASH_INDEX": uri,
        "SIMHASH_WORKERS": 1,
        "DOWNLOAD_DELAY": 0.05,  # a page every ~50 ms: room for a stop and a restart
        "DOWNLOADER_MIDDLEWARES": {"crawl_outage.OutageDrill": 100},
        "OUTAGE_REDIS_DIR": str(srv.directory),
        "OUTAGE_REDIS_PORT": srv.port,
        "OUTAGE_STOP_AFTER": 10,
        "OUTAGE_RESTART_AFTER": restart_after,
        "LOG_LEVEL": "INFO",
        **settings,
    }
    try:
        with demo_site.serve(demo_site.build_site(articles)) as base:
            return run_crawl(base + "/", tmp_path / "run", settings)
    finally:
        client = srv.client()
        with contextlib.suppress(redis.ConnectionError):
            client.shutdown(nosave=True)  # the server the crawl restarted
        client.close()
        srv.stop()


@pytest.mark.slow  # one Scrapy crawl of ~75 pages, with Redis stopped and restarted in the middle
def test_crawl_rides_out_a_redis_outage_without_blocking_the_reactor(tmp_path: Path) -> None:
    """Redis goes down mid-crawl and comes back: pages pass untagged meanwhile, tagging resumes, and
    the reactor keeps running (a heartbeat keeps ticking) while the index client retries."""
    srv = RedisServer(tmp_path / "redis").start()
    # ~2 s of back-off per failed call, 7 pauses of 0.05-0.4 s (the URI lifts the crawl's 1 s budget): the
    # reactor must not wait it
    retries = "retries=8&retry_cap=0.4&retry_budget=10"
    uri = f"{srv.url}?prefix=outage-crawl&{retries}"
    result = _outage_crawl(tmp_path, srv, uri, 8, 20, SIMHASH_INDEX_RETRY_AFTER=0.3)  # ~75 pages
    assert result.stats["finish_reason"] == "finished"
    assert result.stats["outage/phase"] == "back", result.log[-3000:]
    # while down: pages passed untagged, most without waiting for the index (the breaker)
    assert result.stat("outage/untagged_while_down") >= 8
    assert result.stat("simhash/error/index_unavailable") >= 1
    # back: tagging resumed
    assert result.stat("outage/tagged_after_restart") >= 1
    assert "index is back" in result.log and "tagging resumes" in result.log
    # one ERROR line for the outage, not one per page
    assert result.log.count("pages pass untagged, next try in") == 1
    # the reactor kept running while the index retried: it ticked during the client's pauses between
    # retries of one call (a reactor blocked by the call would tick in none of them)
    assert result.stat("outage/ticks_while_down") >= 5
    assert result.stat("outage/retry_pauses_with_ticks") >= 3  # of ~7 pauses of 0.05-0.4 s; blocked: 0


@pytest.mark.slow  # one Scrapy crawl of ~135 pages, with Redis stopped in the middle
def test_a_redis_outage_holds_pages_back_about_a_second_then_they_pass_untagged(tmp_path: Path) -> None:
    """With the URI's defaults, the first call that finds Redis down gives up within its retry budget
    (about a second; before, 10 retries took 11 s), and pages then pass untagged at once."""
    srv = RedisServer(tmp_path / "redis").start()
    # no retry options in the URI: the crawl's own
    # ~135 pages: they pass untagged for the breaker's default 5 s (SIMHASH_INDEX_RETRY_AFTER) after the
    # failure, and some must be left to be tagged after that
    result = _outage_crawl(tmp_path, srv, f"{srv.url}?prefix=outage-gap", 20, 40)
    assert result.stats["finish_reason"] == "finished"
    assert result.stat("outage/untagged_while_down") >= 20
    assert result.stat("outage/tagged_after_restart") >= 1
    # the first failure: at most ~1 s of retries (5 attempts), not 11 attempts over 11 s. The attempts
    # are the check; the wall time is bounded loosely, as a loaded machine stretches it
    failure = re.search(r"is unavailable \(.*?\): (\d+) attempts? in ([\d.]+) s failed", result.log)
    assert failure is not None, result.log[-3000:]
    assert int(failure.group(1)) <= 5 and float(failure.group(2)) < 4
    # no page waited long for it (generous against a noisy machine: before, the gap was ~11 s)
    assert result.stat("outage/max_page_gap_ms_while_down") < 5000


@pytest.mark.slow  # one Scrapy crawl per mode
@pytest.mark.parametrize("on_error", ["continue", "stop"])
def test_crawl_when_redis_restarts_empty_follows_on_index_error(tmp_path: Path, on_error: str) -> None:
    """Redis restarts without its data mid-crawl: the index is not re-created behind the crawl's back."""
    from crawl_support import demo_site, run_crawl

    srv = RedisServer(tmp_path / "redis").start()
    prefix = f"lost-{on_error}"
    settings = {
        "SIMHASH_INDEX": f"{srv.url}?prefix={prefix}&retries=8&retry_cap=0.5",
        "SIMHASH_ON_INDEX_ERROR": on_error,
        "SIMHASH_WORKERS": 1,
        "SIMHASH_INDEX_RETRY_AFTER": 0.3,
        "DOWNLOAD_DELAY": 0.02,
        "DOWNLOADER_MIDDLEWARES": {"crawl_outage.OutageDrill": 100},
        "OUTAGE_REDIS_DIR": str(srv.directory),
        "OUTAGE_REDIS_PORT": srv.port,
        "OUTAGE_STOP_AFTER": 6,
        "OUTAGE_RESTART_AFTER": 0,
        "OUTAGE_RESTART_EMPTY": True,
        "LOG_LEVEL": "INFO",
    }
    try:
        with demo_site.serve(demo_site.build_site(20)) as base:
            result = run_crawl(base + "/", tmp_path / "run", settings)
        left = _namespace_keys(srv, prefix)
    finally:
        client = srv.client()
        with contextlib.suppress(redis.ConnectionError):
            client.shutdown(nosave=True)  # the server the crawl restarted
        client.close()
        srv.stop()
    assert left == []  # nothing was written into a fresh, empty namespace
    assert result.stat("simhash/error/index_lost") >= 1
    assert result.stat("outage/tagged_after_restart") == 0
    assert f"lost the index namespace '{prefix}'" in result.log
    if on_error == "stop":
        assert result.stats["finish_reason"] == "simhash_index_error"
    else:
        assert result.stats["finish_reason"] == "finished"
        assert result.stat("outage/untagged_after_restart") >= 5
        assert result.log.count(f"lost the index namespace '{prefix}'") == 1  # one line, not one per page


@pytest.mark.slow  # one Scrapy crawl
def test_crawl_started_while_redis_is_down_tags_once_it_is_up(tmp_path: Path) -> None:
    """The index cannot be opened at start: pages pass untagged, and the breaker's probe opens it later."""
    from crawl_support import demo_site, run_crawl

    port = free_port()
    directory = tmp_path / "redis"
    directory.mkdir()
    settings = {
        "SIMHASH_INDEX": f"redis://127.0.0.1:{port}/0?prefix=late&retries=2&retry_cap=0.1",
        "SIMHASH_WORKERS": 1,
        "SIMHASH_INDEX_RETRY_AFTER": 0.3,
        "DOWNLOAD_DELAY": 0.05,
        "DOWNLOADER_MIDDLEWARES": {"crawl_outage.OutageDrill": 100},
        "OUTAGE_REDIS_DIR": str(directory),
        "OUTAGE_REDIS_PORT": port,
        "OUTAGE_START_DOWN": True,
        "OUTAGE_STOP_AFTER": 0,
        "OUTAGE_RESTART_AFTER": 5,
        "LOG_LEVEL": "INFO",
    }
    try:  # ~50 pages: 5 untagged, the restart, then tagged ones (the crawl's time is its page count)
        with demo_site.serve(demo_site.build_site(15)) as base:
            result = run_crawl(base + "/", tmp_path / "run", settings)
    finally:
        client = redis.Redis(host="127.0.0.1", port=port)
        with contextlib.suppress(redis.ConnectionError):
            client.shutdown(nosave=True)  # the server the crawl started
        client.close()
    assert result.stats["finish_reason"] == "finished"
    assert result.stat("simhash/error/index_open") == 1
    assert result.stat("outage/untagged_while_down") >= 5
    assert result.stat("outage/tagged_after_restart") >= 1
    assert "index redis://127.0.0.1" in result.log and "opened" in result.log
