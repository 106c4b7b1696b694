"""Payload digests in Redis, beside the index under the same prefix: one key per payload.

``simhash:{<prefix>}:payload:<digest>`` holds either a *pending* claim (``P <record id>``, with a
short expiry) or the *confirmed* original (``C`` and the JSON ``[record id, target URI, date]``, kept
for good). Several crawlers may share one index, so a claim is atomic: one script, one round trip,
``GET`` and, when the key is absent, ``SET ... NX PX``. Exactly one crawler wins a new payload and
writes its response; the others wait briefly for the winner's confirmation and then write a
revisit. A winner that dies before confirming leaves only its pending claim, which expires:
meanwhile the others write full responses (never a revisit pointing to a record that may not
exist), and afterwards the next fetch claims the payload afresh.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .payload_digests import Claim, Original, PayloadDigestError
from .redis_side import RedisSideStore, guarded

PENDING_TTL = 30.0
"""Seconds a claim stays pending before it expires (its claimant died before confirming)."""
WAIT = 0.2
"""Seconds a claim waits for another crawler's pending claim to be confirmed."""
POLL = 0.01

_CLAIM = guarded("""
local v = redis.call('GET', KEYS[2])
if v then return v end
redis.call('SET', KEYS[2], ARGV[2], 'NX', 'PX', ARGV[3])
return false
""")
_CONFIRM = guarded("""
local v = redis.call('GET', KEYS[2])
if (not v) or v == ARGV[2] then
  redis.call('SET', KEYS[2], ARGV[3])
  return 1
end
return 0
""")
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def _pending(candidate: Original) -> bytes:
    return b"P " + candidate.record_id.encode()


def _confirmed(candidate: Original) -> bytes:
    return b"C " + json.dumps([candidate.record_id, candidate.uri, candidate.date]).encode()


def _original(value: bytes) -> Original | None:
    """The confirmed original a key's value names; None for a pending claim."""
    if not value.startswith(b"C "):
        return None
    record_id, uri, date = json.loads(value[2:])
    return Original(record_id, uri, date)


class RedisPayloadDigests(RedisSideStore):
    """The digest store of a Redis index (see the module's docstring for the protocol)."""

    error = PayloadDigestError
    kind = "payload"

    def __init__(
        self,
        client: Any,
        *,
        pending_ttl: float = PENDING_TTL,
        wait: float = WAIT,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        **connection: Any,
    ) -> None:
        """``connection``: the prefix, location, retries and retry budget (:class:`.RedisSideStore`)."""
        super().__init__(client, **connection)
        self._claim = client.register_script(_CLAIM)
        self._confirm = client.register_script(_CONFIRM)
        self._release = client.register_script(_RELEASE)
        self.pending_ttl = pending_ttl
        self.wait = wait
        self._sleep = sleep
        self._clock = clock

    def claim(self, digest: str, candidate: Original) -> Claim:
        key = self.key(digest)
        ttl = str(max(1, int(self.pending_ttl * 1000)))
        found = self._guarded(self._claim, [key], [_pending(candidate), ttl], "claiming a payload")
        if found is None:
            return Claim(claimed=True)
        deadline = self._clock() + self.wait
        while True:
            original = _original(found)
            if original is not None:
                return Claim(original=original)
            if self._clock() >= deadline:
                return Claim()  # still pending: its claimant is writing (or died); store this one in full
            self._sleep(POLL)
            found = self._get(key, "reading a payload claim")
            if found is None:  # the claim expired or was released: claim it ourselves
                return self.claim(digest, candidate)

    def confirm(self, digest: str, candidate: Original) -> None:
        key = self.key(digest)
        self._guarded(
            self._confirm, [key], [_pending(candidate), _confirmed(candidate)], "confirming a payload"
        )

    def release(self, digest: str, candidate: Original) -> None:
        """Not checked against the epoch: it deletes only this store's own pending claim (its record id)."""
        key = self.key(digest)
        self._run(lambda: self._release(keys=[key], args=[_pending(candidate)]), "releasing a payload claim")
