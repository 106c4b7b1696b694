"""Each URL's last capture, beside the near-duplicate index: what a re-crawl compares a page with.

When a crawl fetches a URL again (in a later crawl through the same index location, or later in the
same crawl), it says how the page's main text changed since that URL's *last* capture
(:mod:`scrapy_simhash.change`). The store keeps, per URL, only that last capture: its record id and
``WARC-Date``, payload digest, main-text digest, simhash and sketch; every capture replaces it.

Embedded, it is a SQLite file of its own in the index directory (``captures.sqlite``), not a table in
the payload digests' file: the two are read and written at different moments by different
components (the digests by the WARC writer, the captures by the middleware's index thread), and a
damaged file then costs one feature, not both. In Redis, one key per URL under the index's prefix
(:mod:`.redis_captures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .sqlite_file import SQLiteSideStore

DATABASE = "captures.sqlite"
"""The embedded store's file, inside the near-duplicate index's directory."""


class CaptureStoreError(Exception):
    """The capture store cannot be used (damaged file, unreachable server): no change kinds."""


@dataclass(frozen=True)
class Capture:
    """One capture of a URL, as a later capture is compared with it."""

    url: str
    record_id: str | None
    """The WARC record written for it (response or revisit); None when the crawl writes no WARC."""
    date: str
    """Its ``WARC-Date`` (or the time it was fingerprinted, without WARC output)."""
    payload_digest: str
    text_digest: str | None
    simhash: int
    sketch: str | None
    """The minhash-doc/1 sketch in its text form; None in simhash mode."""


class CaptureStore(Protocol):
    """The last capture of each URL of one index location."""

    def last(self, url: str) -> Capture | None: ...

    def put(self, capture: Capture) -> None: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS captures (
    url TEXT PRIMARY KEY,
    record_id TEXT,
    date TEXT NOT NULL,
    payload_digest TEXT NOT NULL,
    text_digest TEXT,
    simhash TEXT NOT NULL,
    sketch TEXT
) WITHOUT ROWID
"""
_COLUMNS = "url, record_id, date, payload_digest, text_digest, simhash, sketch"
_PLACES = ", ".join("?" * len(_COLUMNS.split(", ")))


class EmbeddedCaptures(SQLiteSideStore):
    """Captures in ``<index directory>/captures.sqlite`` (WAL, a commit per capture).

    Used from the middleware's one index thread; one crawl writes an embedded index at a time."""

    DATABASE = DATABASE
    TABLE = "captures"
    SCHEMA = _SCHEMA
    KEY = "url"
    ERROR = CaptureStoreError
    WHAT = "the captures"
    START_ANEW = "the next capture of each URL then has no previous capture to compare with"

    def last(self, url: str) -> Capture | None:
        row = self._one("a look-up", f"SELECT {_COLUMNS} FROM captures WHERE url = ?", (url,))
        if row is None:
            return None
        url, record_id, date, payload, text, simhash, sketch = row
        return Capture(url, record_id, date, payload, text, int(simhash, 16), sketch)

    def put(self, capture: Capture) -> None:
        values = (
            capture.url,
            capture.record_id,
            capture.date,
            capture.payload_digest,
            capture.text_digest,
            f"{capture.simhash:016x}",
            capture.sketch,
        )
        sql = f"INSERT OR REPLACE INTO captures ({_COLUMNS}) VALUES ({_PLACES})"
        self._execute("recording a capture", sql, values)


def open_captures(location: str) -> CaptureStore:
    """The capture store that lives with the near-duplicate index at ``location`` (a directory or a
    ``redis://`` URI); :class:`CaptureStoreError` when it cannot be opened."""
    from .. import is_server_uri

    if is_server_uri(location):
        from .redis_captures import RedisCaptures

        return RedisCaptures.from_uri(location)
    return EmbeddedCaptures(location.removeprefix("file://"))
