"""The verified index on a real redis-server writes both stores in one atomic script (issue #13):
one EVALSHA per write (counted with MONITOR), no sketch ever left without its simhash row by a
SIGKILL, no acknowledged insert lost, a lost or dead Redis reported as before, and many sketches
read in one round trip.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import redis
from crash_support import VERIFIED_CHILD, acknowledged, run_and_kill
from redis_server import RedisServer, age_writes

from scrapy_simhash.decision import DEFAULT_RULE
from scrapy_simhash.fingerprint.minhash import MinHash
from scrapy_simhash.index import IndexLostError, IndexUnavailableError, open_index
from scrapy_simhash.index.verified.sketch_stores import SKETCH_PREFIX_SUFFIX
from scrapy_simhash.index.verified.verified import VerifiedIndex

NV = 128


@pytest.fixture(scope="module")
def server(redis_server: RedisServer) -> RedisServer:
    """The module's redis-server (conftest's), by the name these tests use."""
    return redis_server


@pytest.fixture
def index(server: RedisServer) -> Iterator[VerifiedIndex]:
    opened = open_index(f"{server.url}?prefix=one-{uuid.uuid4().hex[:12]}")
    assert isinstance(opened, VerifiedIndex)
    yield opened
    opened.clear()
    opened.close()


def kept(values: np.ndarray) -> np.ndarray:
    """What a verified index keeps of a sketch: the low 8 bits of each value (the default rule's)."""
    return DEFAULT_RULE.bits.reduce(np.asarray(values, dtype=np.uint32))


def sketch_of(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, NV, dtype=np.uint32)


def near(sketch: np.ndarray, seed: int, changed: int = 10) -> np.ndarray:
    """``sketch`` with ``changed`` of its last positions changed: the first bands stay whole."""
    out = sketch.copy()
    rng = np.random.default_rng(seed)
    spots = rng.choice(np.arange(64, NV), size=changed, replace=False)
    out[spots] ^= rng.integers(1, 2**32, size=changed, dtype=np.uint32)
    return out


def sent(server: RedisServer, action: Callable[[], object]) -> list[str]:
    """The commands clients sent to ``server`` while ``action`` ran, by MONITOR (the commands that
    scripts ran inside Redis left out): what the round trips were made of."""
    watcher, other, marker = server.client(), server.client(), f"done-{uuid.uuid4().hex}"
    other.ping()  # its connection's handshake before watching
    try:
        with watcher.monitor() as monitor:
            action()
            other.echo(marker)
            names = []
            while True:
                command = monitor.next_command()
                if marker in command["command"]:
                    return names
                if command["client_type"] != "lua":
                    names.append(command["command"].split()[0].upper())
    finally:
        watcher.close()
        other.close()


# -- one script per write ------------------------------------------------------------------------


def test_verified_check_and_add_is_one_evalsha(server: RedisServer, index: VerifiedIndex) -> None:
    base = sketch_of(1)
    index.check_and_add(0xF0F0, "warm", sketch=sketch_of(99))  # loads the script once
    index.add(0xF0F0, "original", {"n": 1}, sketch=base)
    found: list = []
    commands = sent(
        server, lambda: found.extend(index.check_and_add(0x0F0F, "copy", {"n": 2}, sketch=near(base, 2)))
    )
    assert commands == ["EVALSHA"]
    # the reply held everything: the match found by sketch, with the simhash store's fingerprint and meta
    assert [(m.key, m.simhash, m.meta, m.similarity is not None) for m in found] == [
        ("original", 0xF0F0, {"n": 1}, True)
    ]
    assert sent(server, lambda: index.check_and_add(0x1234, "plain", {"n": 3})) == ["EVALSHA"]  # no sketch
    assert sent(server, lambda: index.check_and_add(0x1234, "copy", {"n": 4})) == [
        "EVALSHA"
    ]  # drops a sketch
    assert index.sketch("copy") is None and index.get("copy").meta == {"n": 4}


def test_a_lookup_is_one_evalsha_and_a_batch_one_per_50_pages(
    server: RedisServer, index: VerifiedIndex
) -> None:
    """Reads too: the sketch store's candidates, their simhash rows, the simhash store's matches and
    which of those have a sketch come from one script (they were 3 round trips and one more per
    simhash match: sketch query, simhash query, rows, sketch membership)."""
    base = sketch_of(5)
    index.add(0xF0F0, "original", {"n": 1}, sketch=base)
    index.add(0xF0F1, "plain", {"n": 2})  # no sketch: judged by simhash
    index.add(0xF0F3, "other", {"n": 3}, sketch=sketch_of(55))  # near by simhash, not by sketch
    found: list = []
    assert sent(server, lambda: found.extend(index.query(0xF0F0, sketch=near(base, 6)))) == ["EVALSHA"]
    assert [(m.key, m.meta, m.similarity is not None) for m in found] == [
        ("original", {"n": 1}, True),
        ("plain", {"n": 2}, False),
    ]
    assert [m.key for m in index.query(0xF0F0)] == ["original", "plain", "other"]  # by simhash alone
    pages = [near(base, 7 + i) if i % 3 else None for i in range(120)]
    answers: list = []
    commands = sent(server, lambda: answers.extend(index.query_many([0xF0F0] * 120, sketches=pages)))
    assert commands == ["EVALSHA"] * 3  # 120 pages: 50 + 50 + 20
    assert answers == [index.query(0xF0F0, sketch=p) for p in pages]
    copy: list = []
    assert sent(server, lambda: copy.extend(index.check_and_add(0xF0F0, "copy", sketch=near(base, 8)))) == [
        "EVALSHA"
    ]
    assert [m.key for m in copy] == ["original", "plain"]


def test_add_remove_and_batches_are_one_evalsha_each(server: RedisServer, index: VerifiedIndex) -> None:
    index.add(1, "warm", sketch=sketch_of(5))
    assert sent(server, lambda: index.add(7, "a", {"x": 1}, sketch=sketch_of(6))) == ["EVALSHA"]
    assert sent(server, lambda: index.remove("a")) == ["EVALSHA"]
    assert "a" not in index and index.sketch("a") is None
    rows = [(i + 1, f"k{i}", {"i": i}, sketch_of(100 + i) if i % 3 else None) for i in range(120)]
    assert sent(server, lambda: index.add_many(rows)) == ["EVALSHA"] * 3  # 50 rows per script, one pipeline
    assert len(index) == 121 and index.stats()["without_sketch"] == 40
    got = index.sketch_many(f"k{i}" for i in range(120))
    assert sorted(got) == sorted(f"k{i}" for i in range(120) if i % 3)
    assert all(np.array_equal(got[f"k{i}"].values, kept(sketch_of(100 + i))) for i in range(120) if i % 3)


def test_add_many_keys_given_twice_end_as_their_last_row(index: VerifiedIndex) -> None:
    index.add(5, "old", sketch=sketch_of(50))
    rows: list = [(i + 1, f"f{i}", None, sketch_of(200 + i)) for i in range(130)]
    planted = {10: ("dup", 1), 60: ("dup", None), 120: ("dup", 2), 5: ("gone", 3), 70: ("gone", None)}
    planted |= {
        80: ("twice", None),
        90: ("twice", 4),
        95: ("old", None),
        100: ("flip", 5),
        101: ("flip", None),
    }
    for at, (key, seed) in planted.items():
        rows[at] = (1000 + at, key, {"at": at}, None if seed is None else sketch_of(seed))
    assert index.add_many(rows) == 130
    last = {row[1]: row for row in rows}
    got = index.sketch_many(last)
    for key, (h, _, meta, sketch) in last.items():
        assert index.get(key).simhash == h and index.get(key).meta == (meta or {})
        assert (key in got) == (sketch is not None), key
        assert sketch is None or np.array_equal(got[key].values, kept(sketch))
    assert set(index.sketches.keys()) == set(got)


def test_sketch_many_reads_a_batch_per_round_trip(server: RedisServer, index: VerifiedIndex) -> None:
    index.add_many([(i + 1, f"p{i}", None, sketch_of(i)) for i in range(30)])
    keys = [f"p{i}" for i in range(30)] + ["absent"]
    commands = sent(server, lambda: index.sketch_many(keys))
    assert commands == ["EVALSHA"]  # one script call for the batch, not one per key
    found = index.sketch_many(keys)
    assert "absent" not in found and all(
        np.array_equal(found[f"p{i}"].values, kept(sketch_of(i))) for i in range(30)
    )
    assert {k: v.values.tolist() for k, v in found.items()} == {
        k: index.sketch(k).values.tolist() for k in keys[:-1]
    }


def test_sketch_store_get_many_in_calls_of_1000(server: RedisServer, index: VerifiedIndex) -> None:
    store = index.sketches
    values = np.random.default_rng(7).integers(0, 2**32, (2500, NV), dtype=np.uint32)
    store.add_many([(f"s{i}", values[i], None) for i in range(2500)])
    keys = [f"s{i}" for i in range(2500)] + ["nope"]
    assert sent(server, lambda: store.get_many(keys)) == ["EVALSHA"] * 3  # one round trip
    got = store.get_many(keys)
    assert len(got) == 2500 and all(np.array_equal(got[f"s{i}"], kept(values[i])) for i in range(0, 2500, 97))
    assert sent(server, lambda: store.get_many([])) == [] and store.get_many([]) == {}
    with pytest.raises(ValueError):
        store.get_many(["ok", ""])


def test_export_and_report_read_sketches_in_batches(
    server: RedisServer, index: VerifiedIndex, capsys: pytest.CaptureFixture[str]
) -> None:
    from scrapy_simhash.cli import main
    from scrapy_simhash.report.indexes import load_index

    index.add_many(
        [(i + 1, f"e{i}", {"url": f"http://e/{i}"}, sketch_of(i) if i % 4 else None) for i in range(60)]
    )
    uri = f"{server.url}?prefix={index.simhashes.prefix}"
    capsys.readouterr()
    status: list[int] = []
    commands = sent(server, lambda: status.append(main(["index", "export", uri])))
    assert status == [0]
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["key"] for r in records] == [f"e{i}" for i in range(60)]
    assert all(("minhash" in r) == (i % 4 != 0) for i, r in enumerate(records))
    assert MinHash.from_text(records[1]["minhash"]) == MinHash(kept(sketch_of(1)))
    assert commands.count("EVALSHA") < 10  # opening, counting, iterating, one sketch batch: not one per page
    report: list = []
    commands = sent(server, lambda: report.append(load_index(uri)))
    assert commands.count("EVALSHA") < 10
    assert sum(len(c.members) for c in report[0].clusters) <= 60


def test_a_replaced_key_reports_its_old_entry_as_before(index: VerifiedIndex) -> None:
    base = sketch_of(3)
    index.add(0xAAAA, "page", {"v": 1}, sketch=base)
    found = index.check_and_add(0xAAAB, "page", {"v": 2}, sketch=near(base, 4))
    assert [(m.key, m.simhash, m.meta) for m in found] == [("page", 0xAAAA, {"v": 1})]  # its row before
    assert index.get("page").meta == {"v": 2} and index.get("page").simhash == 0xAAAB
    assert np.array_equal(index.sketch("page").values, kept(near(base, 4)))


def race_worker(uri: str, worker: int, clusters: list, barrier: object, results: object) -> None:
    index = open_index(uri)
    barrier.wait()  # type: ignore[attr-defined]
    originals, seqs = [], []
    for c, members in enumerate(clusters):
        for m, (h, sketch) in enumerate(members):
            if m % 4 == worker:
                found = index.check_and_add(h, f"c{c}-m{m}", {"w": worker}, sketch=sketch)
                originals += [] if found else [c]
                seqs += [match.seq for match in found]
    index.close()
    results.put((worker, originals, seqs))  # type: ignore[attr-defined]


def test_four_processes_racing_see_only_whole_pages(server: RedisServer) -> None:
    """4 writers on planted clusters (members 16 bits apart: found by sketch only): one original per
    cluster, and no answer ever holds half a page (a sketch whose simhash row is not written yet,
    reported with seq 0 from the sketch store's meta): each check_and_add saw both stores at once."""
    import multiprocessing

    rng = np.random.default_rng(44)
    clusters = []
    for _ in range(200):
        base, h = sketch_of(int(rng.integers(1 << 30))), int(rng.integers(1, 2**63))
        clusters.append(
            [(h ^ (0xFF << (8 * m)), near(base, int(rng.integers(1 << 30)), 20)) for m in range(4)]
        )
    uri = f"{server.url}?prefix=race-{uuid.uuid4().hex[:12]}"
    open_index(uri).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=race_worker, args=(uri, w, clusters, barrier, results)) for w in range(4)]
    for p in procs:
        p.start()
    outcome = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    assert sorted(c for _, originals, _ in outcome for c in originals) == list(range(len(clusters)))
    seqs = [seq for _, _, found in outcome for seq in found]
    assert len(seqs) >= 3 * len(clusters) and all(seq > 0 for seq in seqs)
    with open_index(uri) as index:
        assert len(index) == 4 * len(clusters) and index.stats()["without_sketch"] == 0
        index.clear()


# -- a lost or dead Redis --------------------------------------------------------------------------


def test_lost_sketch_namespace_writes_nothing(server: RedisServer) -> None:
    prefix = f"lost-{uuid.uuid4().hex[:12]}"
    index = open_index(f"{server.url}?prefix={prefix}&retries=2&retry_cap=0.1")
    try:
        index.add(0xABC, "a", sketch=sketch_of(10))
        client = server.client()
        try:
            client.delete(*client.keys(f"simhash:{{{prefix}{SKETCH_PREFIX_SUFFIX}}}:*"))
        finally:
            client.close()
        for call in (
            lambda: index.check_and_add(0xABC, "b", sketch=sketch_of(10)),
            lambda: index.add_many([(0xABD, "c", None, sketch_of(11)), (0xABE, "d", None, None)]),
            lambda: index.remove("a"),
        ):
            with pytest.raises(IndexLostError, match="lost the index namespace"):
                call()
        # nothing reached the simhash store either: the epochs are checked before any write
        assert [m.key for m in index.simhashes] == ["a"]
    finally:
        index.close()
        with open_index(f"{server.url}?prefix={prefix}", mode="simhash") as simhashes:
            simhashes.clear()


def test_dead_redis_gives_the_clear_error(tmp_path: Path) -> None:
    srv = RedisServer(tmp_path / "dead").start()
    index = open_index(f"{srv.url}?prefix=dead&retries=1&retry_cap=0.05")
    try:
        index.add(1, "a", sketch=sketch_of(1))
        srv.kill()
        for call in (
            lambda: index.check_and_add(1, "b", sketch=sketch_of(1)),
            lambda: index.check_and_add(1, "c"),
            lambda: index.add_many([(2, "d", None, sketch_of(2))]),
            lambda: index.remove("a"),
        ):
            with pytest.raises(
                IndexUnavailableError, match=r"Redis index at redis://127\.0\.0\.1:\d+/0 is unavailable"
            ):
                call()
    finally:
        index.close()
        srv.stop()


# -- SIGKILL during a busy insert loop --------------------------------------------------------------


def test_sigkill_leaves_no_sketch_without_row_and_loses_no_insert(server: RedisServer) -> None:
    rng = random.Random(18)
    uri = f"{server.url}?prefix=kill-{uuid.uuid4().hex[:12]}"
    present: dict[str, tuple[int, np.ndarray | None]] = {}
    try:
        for round_ in range(10):
            lines = run_and_kill(VERIFIED_CHILD, uri, round_, rng, "")  # type: ignore[arg-type]
            present, removing = acknowledged(lines, present)
            present = check_both_stores(uri, round_, present, removing)
        assert len(present) > 50
    finally:
        with open_index(uri) as index:
            index.clear()


def check_both_stores(
    uri: str, round_: int, present: dict[str, tuple[int, np.ndarray | None]], removing: str | None
) -> dict[str, tuple[int, np.ndarray | None]]:
    """No sketch without its simhash row; every acknowledged page there with its sketch. Returns
    what is stored now (the unacknowledged tail is part of the index from here on)."""
    with open_index(uri) as index:
        stored = {m.key: m.simhash for m in index}
        sketch_keys = set(index.sketches.keys())
        orphans = sketch_keys - stored.keys()
        assert not orphans, f"round {round_}: sketches without their simhash row: {sorted(orphans)[:5]}"
        sketches = index.sketch_many(stored)
        assert set(sketches) == sketch_keys
        if removing is not None:  # cut during remove: either state, both stores agreeing
            present.pop(removing, None)
        for key, (h, want) in present.items():
            assert stored.get(key) == h, f"round {round_}: acknowledged insert {key} lost"
            got = sketches.get(key)
            assert (got is None) == (want is None), f"round {round_}: {key}'s sketch"
            assert got is None or np.array_equal(got.values, kept(want))
        return {key: (h, None if key not in sketches else sketches[key].values) for key, h in stored.items()}


def test_redis_killed_during_busy_writes_keeps_both_stores_in_step(tmp_path: Path) -> None:
    """SIGKILL of redis-server itself (AOF, appendfsync always) mid-loop, then a restart from the AOF:
    a script's effects are one unit there, so no sketch is replayed without its simhash row."""
    import signal
    import subprocess
    import sys
    import time

    srv = RedisServer(tmp_path / "redis").start()
    uri = f"{srv.url}?prefix=srvkill&retries=0"
    rng = random.Random(81)
    present: dict[str, tuple[int, np.ndarray | None]] = {}
    try:
        for round_ in range(8):
            child = subprocess.Popen(
                [sys.executable, "-c", VERIFIED_CHILD, uri, str(round_), str(rng.getrandbits(32))],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None and child.stderr is not None
            assert child.stdout.readline().strip() == "OPEN", child.stderr.read()
            time.sleep(rng.uniform(0.02, 0.3))
            srv.kill()  # SIGKILL
            out = child.stdout.read()  # the writer fails on its next call (retries=0) and exits
            child.stderr.read()
            assert child.wait(30) not in (0, -signal.SIGKILL)
            lines = out.splitlines()
            if out and not out.endswith("\n"):
                lines.pop()
            srv.start()
            present, removing = acknowledged(lines, present)
            present = check_both_stores(uri, round_, present, removing)
        assert len(present) > 50
    finally:
        srv.stop()


# -- Redis Cluster: the two stores live in two slots ----------------------------------------------


def test_on_redis_cluster_the_stores_keep_their_own_scripts(tmp_path: Path) -> None:
    from redis_server import RedisClusterServers

    cluster = RedisClusterServers(tmp_path, size=3).start()
    try:
        with open_index(f"{cluster.url}?cluster=1&prefix=crawl") as index:
            assert isinstance(index, VerifiedIndex)
            assert index._pair is None  # {crawl} and {crawl-sketches}: one script may not touch both
            base = sketch_of(21)
            assert index.check_and_add(0xC0FFEE, "a", {"n": 1}, sketch=base) == []
            found = index.check_and_add(0x3F00, "b", sketch=near(base, 22))
            assert [(m.key, m.simhash, m.meta) for m in found] == [("a", 0xC0FFEE, {"n": 1})]
            index.add_many([(i + 1, f"m{i}", None, sketch_of(300 + i) if i % 2 else None) for i in range(70)])
            got = index.sketch_many([f"m{i}" for i in range(70)])
            assert sorted(got) == sorted(f"m{i}" for i in range(1, 70, 2))
            assert index.remove("a") and index.sketch("a") is None and "a" not in index
        with open_index(f"{cluster.url}?cluster=1&prefix=aging&retention=3600") as index:
            # no shared script here: expired pages are still not matched, and compact() sweeps their sketches
            index.add(0xC0FFEE, "a", None, sketch=base)
            assert [m.key for m in index.query(0xC0FFEE, sketch=near(base, 22))] == ["a"]
            client = redis.RedisCluster(host="127.0.0.1", port=cluster.nodes[0].port)
            try:
                assert age_writes(client, index.simhashes.prefix, 3700) == 1  # past the hour's window
            finally:
                client.close()
            assert index.query(0xC0FFEE, sketch=near(base, 22)) == []
            index.add(1, "b", None, sketch=sketch_of(23))
            index.compact()
            assert index.sketches.keys() == ["b"] and len(index) == 1
    finally:
        cluster.stop()


def test_with_retention_expired_pages_are_not_matched_and_lose_their_sketches(server: RedisServer) -> None:
    """Retention forgets a page: its sketch must go too. Before, a page past the window was still
    reported (from its sketch's meta) and its sketch stayed in Redis forever."""
    with open_index(f"{server.url}?prefix=ret-{uuid.uuid4().hex[:12]}&retention=3600") as index:
        assert isinstance(index, VerifiedIndex)
        base = sketch_of(40)
        index.add(0xAAAA, "old", {"n": 1}, sketch=base)
        index.add_many([(i + 1, f"o{i}", None, sketch_of(400 + i)) for i in range(80)])
        assert [m.key for m in index.query(0xAAAA, sketch=near(base, 41))] == ["old"]
        client = server.client()
        try:  # the hour's window passes for these 81 pages, without waiting
            assert age_writes(client, index.simhashes.prefix, 3700) == 81
        finally:
            client.close()
        assert index.query(0xAAAA, sketch=near(base, 41)) == []
        assert index.query_many([0xAAAA], sketches=[near(base, 41)]) == [[]]
        commands = sent(server, lambda: index.check_and_add(0xBBBB, "new", sketch=near(base, 42)))
        assert commands == ["EVALSHA"]  # still one script: it also forgot the oldest expired pages
        assert len(index.sketches) == 81 - 64 + 1  # 64 forgotten per write, sketches with them
        assert len(index) == 1  # the 17 expired pages left are not counted, and their sketches never matched
        index.compact()
        assert index.sketches.keys() == ["new"] and len(index) == 1
        found = index.check_and_add(0xBBBB, "copy", sketch=near(base, 43))
        assert [m.key for m in found] == ["new"]


def test_add_sketch_never_puts_an_older_visits_sketch_on_a_newer_page(index: VerifiedIndex) -> None:
    """add_sketch reads the page, then writes: another process may re-add the key in between. The
    write is one script that checks the key still holds the page it read (before, it wrote anyway)."""
    index.add(0xABC, "p", {"visit": 1})
    stored = index.get("p")
    newer = sketch_of(61)
    index.add(0xABD, "p", {"visit": 2}, sketch=newer)  # another crawler's newer visit, in between
    assert not index._pair.add_sketch("p", stored.seq, sketch_of(60), None)
    assert np.array_equal(index.sketch("p").values, kept(newer))
    index.add(0xABE, "p", {"visit": 3})  # re-added without sketch: a new page again
    assert not index._pair.add_sketch("p", stored.seq, sketch_of(60), None)  # the old read is stale
    assert index.sketch("p") is None
    assert index.add_sketch("p", sketch_of(62))  # read now: added
    assert np.array_equal(index.sketch("p").values, kept(sketch_of(62))) and index.get("p").meta == {
        "visit": 3
    }
