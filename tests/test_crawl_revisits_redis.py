"""Revisit records with a Redis index: several crawlers share the payload digests, atomically."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from revisit_support import Stats, by_type, run_crawl, site, warcio_records

from scrapy_simhash.index.archive.payload_digests import Claim, Original
from scrapy_simhash.index.archive.redis_payload_digests import RedisPayloadDigests
from scrapy_simhash.warc.records import response_record, sha1_digest
from scrapy_simhash.warc.write.crawl_revisits import BUSY, ERRORS, CrawlRevisits, revisit_record
from scrapy_simhash.warc.write.writer import RollingWarcWriter

__all__ = ["site"]


# -- Redis: several crawlers share the digests --------------------------------------------------------


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def _prefix() -> str:
    return f"rv-{uuid.uuid4().hex[:12]}"


def _index_namespace(url: str) -> str:
    """The URI of a new index's namespace, created as a crawl's index opening creates it: the stores
    beside an index write only while it exists."""
    from scrapy_simhash.index import open_index

    uri = f"{url}{'&' if '?' in url else '?'}prefix={_prefix()}"
    open_index(uri).close()
    return uri


def test_redis_second_crawl_writes_revisits_only(redis_server: object, site: dict, tmp_path: Path) -> None:
    uri = f"{redis_server.url}?prefix={_prefix()}"
    first = run_crawl(site, tmp_path / "one", uri)
    second = run_crawl(site, tmp_path / "two", uri)
    assert first["stats"]["simhash/warc/revisits"] == 2
    originals = {r["headers"]["WARC-Record-ID"] for r in by_type(warcio_records(first["warcs"]), "response")}
    records = warcio_records(second["warcs"])
    assert [r for r in by_type(records, "response") if r["payload"]] == []
    assert {r["headers"]["WARC-Refers-To"] for r in by_type(records, "revisit")} <= originals


def test_redis_two_concurrent_crawls_write_each_payload_once(
    redis_server: object, site: dict, tmp_path: Path
) -> None:
    """Both crawls fetch every page at the same time: across their WARCs, each payload has exactly one
    response record, and every other capture of it is a revisit referring to that response. (A crawl
    that finds the other's claim still pending after its wait writes a full response and counts it in
    ``simhash/warc/revisit_busy``: on a loaded machine that may happen, and is accounted for.)"""
    uri = f"{redis_server.url}?prefix={_prefix()}"
    with ThreadPoolExecutor(2) as pool:
        crawls = list(pool.map(lambda name: run_crawl(site, tmp_path / name, uri), ["one", "two"]))
    records = warcio_records([w for crawl in crawls for w in crawl["warcs"]])
    responses = {r["headers"]["WARC-Record-ID"]: r for r in by_type(records, "response") if r["payload"]}
    by_digest: dict[str, list[str]] = {}
    for r in responses.values():
        by_digest.setdefault(r["headers"]["WARC-Payload-Digest"], []).append(r["headers"]["WARC-Target-URI"])
    non_empty = {body for _, body in site["routes"].values() if body}
    busy = sum(crawl["stats"].get("simhash/warc/revisit_busy", 0) for crawl in crawls)
    assert sorted(by_digest) == sorted(sha1_digest(body) for body in non_empty)
    assert sum(len(uris) for uris in by_digest.values()) == len(non_empty) + busy, by_digest
    revisits = by_type(records, "revisit")
    captures = sum(2 for _, body in site["routes"].values() if body)  # every non-empty page, by both
    assert len(revisits) == captures - len(non_empty) - busy
    for r in revisits:
        original = responses[r["headers"]["WARC-Refers-To"]]
        assert original["headers"]["WARC-Payload-Digest"] == r["headers"]["WARC-Payload-Digest"]
    assert sum(crawl["stats"].get("simhash/warc/revisits", 0) for crawl in crawls) == len(revisits)


def test_redis_writers_racing_on_one_payload_write_one_response_and_one_revisit(
    redis_server: object, tmp_path: Path
) -> None:
    """The loser of the claim waits for the winner's confirmation and then writes a revisit."""
    uri = _index_namespace(redis_server.url)
    payload = b"<html>the same payload</html>"
    digest = sha1_digest(payload)
    winner_store = RedisPayloadDigests.from_uri(uri)
    claimed = threading.Event()
    loser_waiting = threading.Event()

    def loser_sleep(seconds: float) -> None:
        loser_waiting.set()
        time.sleep(seconds)

    loser_store = RedisPayloadDigests.from_uri(uri, sleep=loser_sleep, wait=30.0)
    writers = {name: RollingWarcWriter(tmp_path / name, name) for name in ("winner", "loser")}
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"

    winner = Original("<urn:uuid:winner>", "http://example.com/one", "2026-01-01T00:00:00.000000Z")
    assert winner_store.claim(digest, winner).claimed
    claimed.set()
    loser = Original("<urn:uuid:loser>", "http://example.com/two", "2026-01-01T00:00:00.500000Z")
    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(loser_store.claim, digest, loser)
        assert loser_waiting.wait(30)  # the loser found the pending claim and waits
        record = response_record(winner.uri, winner.date, head, payload)
        record.record_id = winner.record_id
        writers["winner"].write(record)
        winner_store.confirm(digest, winner)
        claim = answer.result(30)
    assert claim.original == winner and not claim.claimed
    writers["loser"].write(revisit_record(loser.uri, loser.date, head, digest, claim.original))
    files = [path for writer in writers.values() for path in writer.close()]
    records = warcio_records(files)
    assert [r["type"] for r in records if r["type"] != "warcinfo"] == ["response", "revisit"]
    assert records[-1]["headers"]["WARC-Refers-To"] == winner.record_id
    winner_store.close()
    loser_store.close()


def test_redis_a_claimant_that_dies_never_leaves_others_pointing_to_nothing(
    redis_server: object,
) -> None:
    """A pending claim is never taken for an original: while it lasts others store the payload in full
    (and register nothing); once it expires, the next fetch claims the payload afresh."""
    uri = _index_namespace(redis_server.url)
    digest = sha1_digest(b"payload")
    now = [0.0]

    def tick(seconds: float) -> None:
        now[0] += seconds

    dead = RedisPayloadDigests.from_uri(uri, pending_ttl=0.3)
    assert dead.claim(digest, Original("<urn:uuid:dead>", "http://x/1", "d1")).claimed
    dead.close()  # killed before its response was written: never confirms
    other = RedisPayloadDigests.from_uri(uri, sleep=tick, clock=lambda: now[0], wait=0.2)
    assert other.claim(digest, Original("<urn:uuid:other>", "http://x/2", "d2")) == Claim()
    assert now[0] >= 0.2  # it waited for a confirmation (on its injected clock), then gave up
    stats = Stats()  # as the crawl sees it: a full response, counted as busy
    assert (
        CrawlRevisits(lambda: other, stats, location="x").claim(digest, Original("<urn:uuid:o2>", "u", "d"))
        == Claim()
    )
    assert stats.get_value(BUSY) == 1 and stats.get_value(ERRORS) is None
    client = redis_server.client()
    try:
        for _ in range(200):  # the pending claim expires on the server
            if not client.exists(other.key(digest)):
                break
            time.sleep(0.05)
        assert not client.exists(other.key(digest))
    finally:
        client.close()
    third = Original("<urn:uuid:third>", "http://x/3", "d3")
    assert other.claim(digest, third).claimed
    other.confirm(digest, third)
    assert other.claim(digest, Original("<urn:uuid:4>", "http://x/4", "d4")).original == third
    other.close()


def test_redis_a_released_claim_is_claimed_again_at_once(redis_server: object) -> None:
    """A claimant that could not write its response (disk full) releases its claim: the next fetch
    claims the payload without waiting."""
    uri = _index_namespace(redis_server.url)
    digest = sha1_digest(b"payload")
    slept: list[float] = []
    first = RedisPayloadDigests.from_uri(uri)
    second = RedisPayloadDigests.from_uri(uri, sleep=slept.append)
    failed = Original("<urn:uuid:failed>", "http://x/1", "d1")
    assert first.claim(digest, failed).claimed
    first.release(digest, failed)
    assert second.claim(digest, Original("<urn:uuid:next>", "http://x/2", "d2")).claimed
    assert slept == []
    first.close()
    second.close()


def test_redis_cluster_claims_confirms_and_forgets(tmp_path: Path) -> None:
    """On a real Redis Cluster: the scripts run on the index's slot, and a reset finds every key."""
    from redis_server import RedisClusterServers

    cluster = RedisClusterServers(tmp_path, size=3).start()
    try:
        stores = [
            RedisPayloadDigests.from_uri(_index_namespace(f"{cluster.url}?cluster=1")) for _ in range(3)
        ]
        for i, store in enumerate(stores):
            for n in range(20):
                digest = sha1_digest(f"{i}-{n}".encode())
                original = Original(f"<urn:uuid:{i}-{n}>", f"http://x/{n}", "d")
                assert store.claim(digest, original).claimed
                store.confirm(digest, original)
                assert (
                    store.claim(digest, Original("<urn:uuid:later>", "http://y/", "d2")).original == original
                )
        stores[0].clear()
        assert stores[0].claim(sha1_digest(b"0-0"), Original("<urn:uuid:new>", "http://x/0", "d")).claimed
        assert stores[1].claim(sha1_digest(b"1-0"), Original("<urn:uuid:new>", "http://x/0", "d")).original
        for store in stores:
            store.close()
    finally:
        cluster.stop()


def test_redis_stores_beside_a_lost_index_write_nothing(redis_server: object) -> None:
    """Redis restarted empty (here: the namespace flushed) between the index's write and the stores':
    the index refuses to re-create its namespace, and the payload digests and captures beside it do not
    re-create it key by key either; each says why, in its own error."""
    from scrapy_simhash.index.archive.captures import Capture, CaptureStoreError
    from scrapy_simhash.index.archive.payload_digests import PayloadDigestError
    from scrapy_simhash.index.archive.redis_captures import RedisCaptures

    uri = _index_namespace(redis_server.url)
    digests, captures = RedisPayloadDigests.from_uri(uri), RedisCaptures.from_uri(uri)
    original = Original("<urn:uuid:1>", "http://x/1", "d1")
    assert digests.claim(sha1_digest(b"before"), original).claimed  # while the namespace exists
    client = redis_server.client()
    client.flushall()
    try:
        with pytest.raises(PayloadDigestError, match=r"namespace .* is gone"):
            digests.claim(sha1_digest(b"after"), original)
        with pytest.raises(PayloadDigestError, match=r"namespace .* is gone"):
            digests.confirm(sha1_digest(b"before"), original)
        with pytest.raises(CaptureStoreError, match=r"namespace .* is gone"):
            captures.put(Capture("http://x/1", "<urn:uuid:1>", "d1", "p", "t", 1, None))
        assert client.keys("*") == []
    finally:
        client.close()
        digests.close()
        captures.close()
