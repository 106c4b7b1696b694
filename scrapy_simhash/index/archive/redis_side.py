"""What the Redis stores beside an index share: connecting from the index's URI, and errors in their terms.

The payload digests (:mod:`.redis_payload_digests`) and the last captures (:mod:`.redis_captures`)
live under the index's prefix on the index's server. A failure there must never look like a failure of
the index itself: the crawl goes on without revisits or change kinds, so each store raises its own
error class (``error``), which the crawl's :class:`scrapy_simhash.side_store.SideStore` counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from ..base import SimhashIndexError
from ..redis.redis_client import ScriptClient, connect, parse_retry_budget

_Store = TypeVar("_Store", bound="RedisSideStore")

NAMESPACE_GONE = -1
"""What a store's script returns when the index's namespace (its config key, ``KEYS[1]``) is gone."""
_GUARDED_SET = f"""
if redis.call('EXISTS', KEYS[1]) == 0 then return {NAMESPACE_GONE} end
redis.call('SET', KEYS[2], ARGV[1])
return 1
"""


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
        self._guarded_set = client.register_script(_GUARDED_SET)

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

    def _checked(self, reply: Any) -> Any:
        """``reply`` of a script that checked the namespace; ``error`` when it was gone."""
        if reply == NAMESPACE_GONE:
            raise self.error(
                f"{self.location}: the index's namespace {self.prefix!r} is gone (Redis restarted empty, "
                "was flushed or evicted it): nothing is recorded beside an index that is not there"
            )
        return reply

    def _set(self, key: str, value: bytes | str, action: str) -> None:
        """``SET key value`` while the index's namespace exists."""
        self._checked(self._run(lambda: self._guarded_set(keys=[self.config_key, key], args=[value]), action))

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
