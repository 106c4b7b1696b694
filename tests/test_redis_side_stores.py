"""The Redis stores beside an index (payload digests, last captures) work in their namespace's epoch only.

A namespace that was lost (Redis restarted empty, flushed, evicted) and created again by another
crawler is that crawler's: a store that worked in the old one must neither write into it nor take its
data for its own (a revisit referring to the other crawl's record, a change kind against its capture).
"""

from __future__ import annotations

import uuid

import pytest
from revisit_support import Stats

from scrapy_simhash.index import open_index
from scrapy_simhash.index.archive.captures import Capture, CaptureStoreError
from scrapy_simhash.index.archive.payload_digests import Claim, Original, PayloadDigestError
from scrapy_simhash.index.archive.redis_captures import RedisCaptures
from scrapy_simhash.index.archive.redis_payload_digests import RedisPayloadDigests
from scrapy_simhash.warc.records import sha1_digest
from scrapy_simhash.warc.write.crawl_revisits import ERRORS, CrawlRevisits

RECREATED = r"namespace .* was lost and created again \(its epoch is no longer"
DIGEST = sha1_digest(b"<html>one payload</html>")
URL = "http://example.com/page"


@pytest.fixture
def uri(redis_server: object) -> str:
    return f"{redis_server.url}?prefix=side-{uuid.uuid4().hex[:12]}"


def _prefix(uri: str) -> str:
    return uri.rsplit("prefix=", 1)[1]


def _config(uri: str) -> str:
    return f"simhash:{{{_prefix(uri)}}}:config"


def _lose_and_recreate(redis_server: object, uri: str) -> None:
    """Redis loses every key of the namespace, then another crawler opens its index under the same
    prefix: a new namespace, with a new epoch."""
    client = redis_server.client()
    try:
        client.unlink(*client.keys(f"simhash:{{{_prefix(uri)}}}:*"))
    finally:
        client.close()
    open_index(uri).close()


def _capture(record_id: str) -> Capture:
    return Capture(URL, record_id, "2026-01-01T00:00:00Z", "sha1:P", "sha1:T", 7, None)


def _others_data(uri: str) -> tuple[Original, Capture]:
    """The second crawler records its original of ``DIGEST`` and its capture of ``URL``."""
    theirs = Original("<urn:uuid:theirs>", URL, "2026-01-02T00:00:00Z")
    digests, captures = RedisPayloadDigests.from_uri(uri), RedisCaptures.from_uri(uri)
    try:
        assert digests.claim(DIGEST, theirs).claimed
        digests.confirm(DIGEST, theirs)
        captures.put(_capture("<urn:uuid:theirs>"))
    finally:
        digests.close()
        captures.close()
    return theirs, _capture("<urn:uuid:theirs>")


def test_stores_refuse_to_write_or_read_a_namespace_created_again(redis_server: object, uri: str) -> None:
    open_index(uri).close()
    digests, captures = RedisPayloadDigests.from_uri(uri), RedisCaptures.from_uri(uri)
    ours = Original("<urn:uuid:ours>", URL, "2026-01-01T00:00:00Z")
    assert digests.claim(DIGEST, ours).claimed
    digests.confirm(DIGEST, ours)
    captures.put(_capture("<urn:uuid:ours>"))
    _lose_and_recreate(redis_server, uri)
    theirs, their_capture = _others_data(uri)
    try:
        with pytest.raises(PayloadDigestError, match=RECREATED):  # would refer to their record
            digests.claim(DIGEST, Original("<urn:uuid:later>", URL, "2026-01-03T00:00:00Z"))
        with pytest.raises(PayloadDigestError, match=RECREATED):
            digests.claim(sha1_digest(b"new payload"), ours)
        with pytest.raises(PayloadDigestError, match=RECREATED):
            digests.confirm(sha1_digest(b"new payload"), ours)
        with pytest.raises(CaptureStoreError, match=RECREATED):  # would compare with their capture
            captures.last(URL)
        with pytest.raises(CaptureStoreError, match=RECREATED):
            captures.put(_capture("<urn:uuid:ours-later>"))
    finally:
        digests.close()
        captures.close()
    theirs_now = RedisPayloadDigests.from_uri(uri), RedisCaptures.from_uri(uri)
    try:  # the other crawler's data is as it wrote it, and nothing of ours was added
        assert theirs_now[0].claim(DIGEST, ours) == Claim(original=theirs)
        assert theirs_now[0].claim(sha1_digest(b"new payload"), ours).claimed
        assert theirs_now[1].last(URL) == their_capture
    finally:
        for store in theirs_now:
            store.close()


def test_a_claim_waiting_for_a_confirmation_does_not_take_the_next_namespaces_original(
    redis_server: object, uri: str
) -> None:
    """The namespace is lost and created again while a claim waits for another crawler's pending claim:
    the original confirmed afterwards is the new namespace's, not one this crawl may refer to."""
    open_index(uri).close()
    pending = RedisPayloadDigests.from_uri(uri)
    assert pending.claim(DIGEST, Original("<urn:uuid:pending>", URL, "d1")).claimed
    recreated: list[Original] = []

    def sleep(seconds: float) -> None:
        if not recreated:
            _lose_and_recreate(redis_server, uri)
            recreated.append(_others_data(uri)[0])

    waiting = RedisPayloadDigests.from_uri(uri, sleep=sleep, wait=30.0)
    try:
        with pytest.raises(PayloadDigestError, match=RECREATED):
            waiting.claim(DIGEST, Original("<urn:uuid:waiting>", URL, "d2"))
        assert recreated  # it did poll once the namespace was the other crawler's
    finally:
        waiting.close()
        pending.close()


def test_stores_keep_working_while_the_epoch_is_unchanged(redis_server: object, uri: str) -> None:
    """Other crawlers opening the same index, and their stores, share the namespace: same epoch."""
    open_index(uri).close()
    digests, captures = RedisPayloadDigests.from_uri(uri), RedisCaptures.from_uri(uri)
    other_digests, other_captures = RedisPayloadDigests.from_uri(uri), RedisCaptures.from_uri(uri)
    ours = Original("<urn:uuid:ours>", URL, "d1")
    try:
        assert digests.claim(DIGEST, ours).claimed
        index = open_index(uri)  # a second crawler joins: it adopts the namespace's epoch
        index.add(1, "http://example.com/other")
        index.close()
        digests.confirm(DIGEST, ours)
        assert other_digests.claim(DIGEST, Original("<urn:uuid:x>", URL, "d3")) == Claim(original=ours)
        other_captures.put(_capture("<urn:uuid:theirs>"))
        assert captures.last(URL) == _capture("<urn:uuid:theirs>")
        captures.put(_capture("<urn:uuid:ours>"))
        assert other_captures.last(URL) == _capture("<urn:uuid:ours>")
        client = redis_server.client()
        try:
            stored = client.hget(_config(uri), "epoch").decode()
        finally:
            client.close()
        assert digests.epoch == captures.epoch == other_digests.epoch == other_captures.epoch == stored
    finally:
        for store in (digests, captures, other_digests, other_captures):
            store.close()


def test_a_store_opened_before_the_namespace_exists_picks_up_its_epoch(
    redis_server: object, uri: str
) -> None:
    captures = RedisCaptures.from_uri(uri)
    try:
        with pytest.raises(CaptureStoreError, match=r"namespace .* is gone"):
            captures.put(_capture("<urn:uuid:early>"))
        with pytest.raises(CaptureStoreError, match=r"namespace .* is gone"):
            captures.last(URL)
        open_index(uri).close()
        captures.put(_capture("<urn:uuid:ours>"))
        assert captures.last(URL) == _capture("<urn:uuid:ours>")
        _lose_and_recreate(redis_server, uri)
        with pytest.raises(CaptureStoreError, match=RECREATED):
            captures.put(_capture("<urn:uuid:ours-later>"))
        with pytest.raises(CaptureStoreError, match=RECREATED):
            captures.last(URL)
    finally:
        captures.close()


def test_a_namespace_without_an_epoch_gets_one_that_the_index_then_keeps(
    redis_server: object, uri: str
) -> None:
    """A config written by a version before epochs: the store gives it one, as the index's opening
    would, and an index opened afterwards works in that epoch, beside the store."""
    open_index(uri).close()
    client = redis_server.client()
    try:
        client.hdel(_config(uri), "epoch")
        captures = RedisCaptures.from_uri(uri)
        captures.put(_capture("<urn:uuid:ours>"))
        stored = client.hget(_config(uri), "epoch")
        assert stored is not None and captures.epoch == stored.decode()
        index = open_index(uri)
        index.add(1, "http://example.com/other")
        index.close()
        assert client.hget(_config(uri), "epoch") == stored
        assert captures.last(URL) == _capture("<urn:uuid:ours>")
        captures.close()
    finally:
        client.close()


def test_a_crawls_store_reopened_after_the_namespace_was_created_again_still_refuses(
    redis_server: object, uri: str
) -> None:
    """The crawl tries a failed store again 30 s later with a new store from the URI: it stays in the
    crawl's epoch, so the other crawler's namespace is never adopted."""
    open_index(uri).close()
    now = [0.0]
    stats = Stats()
    revisits = CrawlRevisits(
        lambda: RedisPayloadDigests.from_uri(uri), stats, location="x", clock=lambda: now[0]
    )
    ours = Original("<urn:uuid:ours>", URL, "d1")
    assert revisits.claim(DIGEST, ours).claimed
    _lose_and_recreate(redis_server, uri)
    theirs, _ = _others_data(uri)
    later = Original("<urn:uuid:later>", URL, "d2")
    assert revisits.claim(DIGEST, later) == Claim()  # written in full, counted
    assert stats.get_value(ERRORS) == 1
    now[0] += 3600  # long past the pause: the crawl opens a new store
    assert revisits.claim(DIGEST, later) == Claim()
    now[0] += 3600
    assert revisits.claim(sha1_digest(b"new payload"), later) == Claim()
    assert stats.get_value(ERRORS) == 3
    revisits.close()
    other = RedisPayloadDigests.from_uri(uri)
    try:
        assert other.claim(sha1_digest(b"new payload"), theirs).claimed  # nothing of ours there
    finally:
        other.close()
