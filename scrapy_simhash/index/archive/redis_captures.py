"""Each URL's last capture in Redis, beside the index under the same prefix.

``simhash:{<prefix>}:capture:<sha1 of the URL>`` holds the JSON of the URL's last capture (the URL
itself inside). A capture simply replaces the previous one: when two crawlers capture one URL at the
same moment, the one written last is the last capture, as it would be for one crawler.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

from ..base import SimhashIndexError
from ..redis.redis_client import ScriptClient, connect, parse_retry_budget
from .captures import Capture, CaptureStoreError


class RedisCaptures:
    """The capture store of a Redis index."""

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

    @classmethod
    def from_uri(cls, uri: str) -> RedisCaptures:
        """The store beside the index at ``uri`` (its ``prefix``, ``timeout``, ``retries`` and
        ``retry_budget`` options; the index's other options do not concern it)."""
        try:
            client, location, ours = connect(uri, {})
        except SimhashIndexError as exc:
            raise CaptureStoreError(str(exc)) from exc
        return cls(
            client,
            prefix=str(ours.get("prefix", "simhash")),
            location=location,
            retries=int(ours.get("retries", 10)),
            retry_budget=parse_retry_budget(ours.get("retry_budget")),
        )

    def key(self, url: str) -> str:
        digest = hashlib.sha1(url.encode("utf-8", "surrogatepass")).hexdigest()
        return f"simhash:{{{self.prefix}}}:capture:{digest}"

    def _run(self, fn: Callable[[], Any], action: str) -> Any:
        try:
            return self._redis.call(fn, action)
        except SimhashIndexError as exc:
            raise CaptureStoreError(str(exc)) from exc

    def last(self, url: str) -> Capture | None:
        key = self.key(url)
        value = self._run(lambda: self._redis.client.get(key), "reading a capture")
        if value is None:
            return None
        try:
            fields = json.loads(value)
            capture = Capture(**{**fields, "simhash": int(fields["simhash"], 16)})
        except (ValueError, TypeError, KeyError) as exc:
            raise CaptureStoreError(f"{self.location}: the capture of {url} cannot be read: {exc}") from exc
        return capture if capture.url == url else None  # a sha1 collision: not this URL's

    def put(self, capture: Capture) -> None:
        key = self.key(capture.url)
        value = json.dumps(
            {
                "url": capture.url,
                "record_id": capture.record_id,
                "date": capture.date,
                "payload_digest": capture.payload_digest,
                "text_digest": capture.text_digest,
                "simhash": f"{capture.simhash:016x}",
                "sketch": capture.sketch,
            }
        )
        self._run(lambda: self._redis.client.set(key, value), "recording a capture")

    def clear(self) -> None:
        """Forget every capture under this prefix (``SIMHASH_RESET``)."""

        def unlink_all() -> None:
            batch: list[bytes] = []
            for key in self._redis.client.scan_iter(match=f"simhash:{{{self.prefix}}}:capture:*", count=1000):
                batch.append(key)
                if len(batch) >= 1000:
                    self._redis.client.unlink(*batch)
                    batch = []
            if batch:
                self._redis.client.unlink(*batch)

        self._run(unlink_all, "forgetting the captures")

    def close(self) -> None:
        self._redis.close()
