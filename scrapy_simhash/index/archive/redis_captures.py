"""Each URL's last capture in Redis, beside the index under the same prefix.

``simhash:{<prefix>}:capture:<sha1 of the URL>`` holds the JSON of the URL's last capture (the URL
itself inside). A capture simply replaces the previous one: when two crawlers capture one URL at the
same moment, the one written last is the last capture, as it would be for one crawler.
"""

from __future__ import annotations

import hashlib
import json

from .captures import Capture, CaptureStoreError
from .redis_side import RedisSideStore


class RedisCaptures(RedisSideStore):
    """The capture store of a Redis index."""

    error = CaptureStoreError
    kind = "capture"

    def key(self, name: str) -> str:
        """The key of URL ``name``'s capture (the sha1 of the URL: URLs can be long)."""
        return self._key_prefix() + hashlib.sha1(name.encode("utf-8", "surrogatepass")).hexdigest()

    def last(self, url: str) -> Capture | None:
        key = self.key(url)
        value = self._get(key, "reading a capture")
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
        self._set(key, value, "recording a capture")
