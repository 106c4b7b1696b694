"""Which payloads a crawl has already archived: payload digest -> the response record that holds it.

A crawl that fetches a payload it has archived before (under another URL, or in an earlier crawl
through the same index) writes a ``revisit`` record pointing to the first response instead of
storing the bytes again. This module remembers those first responses, beside the near-duplicate
index: embedded, a SQLite file of its own in the index directory (:class:`EmbeddedPayloadDigests`);
in Redis, keys under the index's prefix (:mod:`.redis_payload_digests`).

The protocol is claim, write, confirm: :meth:`~PayloadDigests.claim` either names the original
(write a revisit) or lets the caller write a full response, which it :meth:`~PayloadDigests.confirm`\\ s
only once that record is written and flushed to its WARC file. A crawl killed in between has
registered nothing, so no later revisit can point to a record that is not in a WARC.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .sqlite_file import SQLiteSideStore

DATABASE = "payload-digests.sqlite"
"""The embedded store's file, inside the near-duplicate index's directory."""


class PayloadDigestError(Exception):
    """The digest store cannot be used (damaged file, unreachable server): write full responses."""


@dataclass(frozen=True)
class Original:
    """The response record that archived a payload first: what a revisit record refers to."""

    record_id: str
    uri: str
    date: str


@dataclass(frozen=True)
class Claim:
    """The answer to :meth:`PayloadDigests.claim`.

    ``original`` set: the payload is archived already, write a revisit referring to it.
    ``claimed``: write a full response, then :meth:`~PayloadDigests.confirm` it (or
    :meth:`~PayloadDigests.release` it when the write failed).
    Neither: another writer is archiving this payload right now and has not confirmed it in time;
    write a full response and register nothing.
    """

    original: Original | None = None
    claimed: bool = False


class PayloadDigests(Protocol):
    """The digest store of one index location."""

    def claim(self, digest: str, candidate: Original) -> Claim: ...

    def confirm(self, digest: str, candidate: Original) -> None: ...

    def release(self, digest: str, candidate: Original) -> None: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS payload_digests (
    digest TEXT PRIMARY KEY,
    record_id TEXT NOT NULL,
    uri TEXT NOT NULL,
    date TEXT NOT NULL
) WITHOUT ROWID
"""


class EmbeddedPayloadDigests(SQLiteSideStore):
    """Digests in ``<index directory>/payload-digests.sqlite`` (WAL; a commit per confirmed payload,
    which survives a crash of the crawling process).

    One crawl writes an embedded index at a time (its directory lock), and the WARC writer runs in
    the crawl's one reactor thread, so a claim is a plain look-up: nobody else can claim meanwhile.
    """

    DATABASE = DATABASE
    TABLE = "payload_digests"
    SCHEMA = _SCHEMA
    KEY = "digest"
    ERROR = PayloadDigestError
    WHAT = "the payload digests"
    START_ANEW = "the crawl then stores every payload in full once more"

    def claim(self, digest: str, candidate: Original) -> Claim:
        sql = "SELECT record_id, uri, date FROM payload_digests WHERE digest = ?"
        row = self._one("a look-up", sql, (digest,))
        if row is None:
            return Claim(claimed=True)
        return Claim(original=Original(*row))

    def confirm(self, digest: str, candidate: Original) -> None:
        self._execute(
            "registering a payload",
            "INSERT OR IGNORE INTO payload_digests (digest, record_id, uri, date) VALUES (?, ?, ?, ?)",
            (digest, candidate.record_id, candidate.uri, candidate.date),
        )

    def release(self, digest: str, candidate: Original) -> None:
        """Nothing to undo: a claim here writes nothing."""


def open_payload_digests(location: str) -> PayloadDigests:
    """The digest store that lives with the near-duplicate index at ``location`` (a directory or a
    ``redis://`` URI); :class:`PayloadDigestError` when it cannot be opened."""
    from .. import is_server_uri

    if is_server_uri(location):
        from .redis_payload_digests import RedisPayloadDigests

        return RedisPayloadDigests.from_uri(location)
    return EmbeddedPayloadDigests(location.removeprefix("file://"))
