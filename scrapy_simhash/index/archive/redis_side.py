"""What the Redis stores beside an index share: connecting from the index's URI, and errors in their terms.

The payload digests (:mod:`.redis_payload_digests`) and the last captures (:mod:`.redis_captures`)
live under the index's prefix on the index's server. A failure there must never look like a failure of
the index itself: the crawl goes on without revisits or change kinds, so each store raises its own
error class (``error``), which the crawl's :class:`scrapy_simhash.side_store.SideStore` counts.

A store belongs to one *epoch* of the namespace (the random id the index stores in its config when it
creates the namespace, see :mod:`..redis.redis_store`). It learns it the first time it finds the config
and every script checks it (:func:`guarded`): a namespace that is gone, or was deleted and created again
by another crawler (a new epoch), is neither written nor read, so a crawl never records its captures in,
nor takes its revisits' originals from, another crawl's namespace.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ..base import SimhashIndexError
from ..redis.redis_client import ScriptClient, connect, parse_retry_budget

_Store = TypeVar("_Store", bound="RedisSideStore")

NAMESPACE_GONE = -1
"""What a guarded script returns when the index's namespace (its config key, ``KEYS[1]``) is gone."""
NAMESPACE_CHANGED = -2
"""What a guarded script returns when the config holds another epoch than the store's (``ARGV[1]``)."""
_GUARD = f"""
local epoch = redis.call('HGET', KEYS[1], 'epoch')
if epoch ~= ARGV[1] then
  if epoch then return {NAMESPACE_CHANGED} end
  return {NAMESPACE_GONE}
end
"""


def guarded(body: str) -> str:
    """The script ``body`` run only while the namespace holds the store's epoch: ``KEYS[1]`` is the
    index's config, ``ARGV[1]`` the epoch; the body's own keys and arguments follow them."""
    return _GUARD + body


_SET = guarded("""
redis.call('SET', KEYS[2], ARGV[2])
return 1
""")
_GET = guarded("""
return redis.call('GET', KEYS[2])
""")
_LEARN = """
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('HSETNX', KEYS[1], 'epoch', ARGV[1])
return redis.call('HGET', KEYS[1], 'epoch')
"""
"""The namespace's epoch (false: no namespace). A config written before epochs existed gets one now, as
the index's opening gives it (``redis_store.lua``, mode ``i``): the index adopts it when it next opens."""


class RedisSideStore:
    """A store of keys ``simhash:{<prefix>}:<kind>:...`` on the index's Redis server."""

    error: ClassVar[type[Exception]] = SimhashIndexError
    """Raised for every failure (unreachable server, unreadable value)."""
    kind: ClassVar[str] = ""
    """The keys' kind segment."""

    def __init__(
        self,
        client: Any,
        *,
        prefix: str = "simhash",
        location: str = "redis",
        retries: int = 10,
        retry_budget: float | None = None,
    ) -> None:
        self.prefix = prefix
        self.location = location
        self._redis = ScriptClient(
            client, [], location=location, namespace=prefix, retries=retries, retry_budget=retry_budget
        )
        self.config_key = f"simhash:{{{prefix}}}:config"
        """The index's config key: the namespace exists while it does."""
        self.epoch: str | None = None
        """The namespace's epoch this store works in: None until the store first finds the config (or
        until given: :class:`scrapy_simhash.side_store.SideStore` gives a reopened store its
        predecessor's, so that it does not adopt a namespace another crawler created since)."""
        self._learn = client.register_script(_LEARN)
        self._guarded_set = client.register_script(_SET)
        self._guarded_get = client.register_script(_GET)

    @classmethod
    def from_uri(cls: type[_Store], uri: str, **options: Any) -> _Store:
        """The store beside the index at ``uri`` (its ``prefix``, ``timeout``, ``retries`` and
        ``retry_budget`` options; the index's other options do not concern it)."""
        try:
            client, location, ours = connect(uri, {})
        except SimhashIndexError as exc:
            raise cls.error(str(exc)) from exc
        return cls(
            client,
            prefix=str(ours.get("prefix", "simhash")),
            location=location,
            retries=int(ours.get("retries", 10)),
            retry_budget=parse_retry_budget(ours.get("retry_budget")),
            **options,
        )

    def key(self, name: str) -> str:
        return f"{self._key_prefix()}{name}"

    def _key_prefix(self) -> str:
        return f"simhash:{{{self.prefix}}}:{self.kind}:"

    def _run(self, fn: Callable[[], Any], action: str) -> Any:
        try:
            return self._redis.call(fn, action)
        except SimhashIndexError as exc:
            raise self.error(str(exc)) from exc

    def _guarded(self, script: Any, keys: list[str], args: list[Any], action: str) -> Any:
        """Run a :func:`guarded` script over ``keys`` and ``args`` (the config and the epoch go first);
        ``error`` when the namespace is gone or is not the store's epoch any more."""
        epoch = self._epoch()
        reply = self._run(lambda: script(keys=[self.config_key, *keys], args=[epoch, *args]), action)
        if reply == NAMESPACE_GONE:
            raise self._lost("is gone (Redis restarted empty, was flushed or evicted it)")
        if reply == NAMESPACE_CHANGED:
            raise self._lost(
                f"was lost and created again (its epoch is no longer {epoch}: another crawler's now)"
            )
        return reply

    def _epoch(self) -> str:
        """The store's epoch, learned from the config the first time it is there."""
        if self.epoch is None:
            fresh = os.urandom(8).hex()
            found = self._run(lambda: self._learn(keys=[self.config_key], args=[fresh]), "reading the epoch")
            if found is None:
                raise self._lost(
                    "is gone (not created yet, or Redis restarted empty, was flushed or evicted it)"
                )
            self.epoch = found.decode() if isinstance(found, bytes) else str(found)
        return self.epoch

    def _lost(self, why: str) -> Exception:
        return self.error(
            f"{self.location}: the index's namespace {self.prefix!r} {why}: this store neither records "
            "nor reads anything there"
        )

    def _get(self, key: str, action: str) -> Any:
        """``GET key`` while the namespace holds the store's epoch."""
        return self._guarded(self._guarded_get, [key], [], action)

    def _set(self, key: str, value: bytes | str, action: str) -> None:
        """``SET key value`` while the namespace holds the store's epoch."""
        self._guarded(self._guarded_set, [key], [value], action)

    def clear(self) -> None:
        """Forget every key of this store under the prefix (``SIMHASH_RESET``)."""

        def unlink_all() -> None:
            batch: list[bytes] = []
            for key in self._redis.client.scan_iter(match=self._key_prefix() + "*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self._redis.client.unlink(*batch)
                    batch = []
            if batch:
                self._redis.client.unlink(*batch)

        self._run(unlink_all, f"forgetting the {self.kind} keys")

    def close(self) -> None:
        self._redis.close()
