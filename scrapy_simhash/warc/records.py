"""WARC/1.1 records as values: the simhash metadata fields (names defined once, here) and record builders.

A record is a list of WARC headers and a block; :meth:`WarcRecord.to_bytes`
serialises it with ``Content-Length`` and a ``WARC-Block-Digest`` (every
record). ``WARC-Payload-Digest`` is set only where a payload exists (response
and request records; WARC 1.1 §5.9): never on ``metadata`` or ``warcinfo``.
"""

from __future__ import annotations

import base64
import hashlib
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..fingerprint import SCHEME, from_base32, to_base32
from ..fingerprint.minhash import SCHEME as MINHASH_SCHEME
from ..fingerprint.minhash import MinHash

WARC_VERSION = "WARC/1.1"
WARC_FIELDS = "application/warc-fields"
HTTP_RESPONSE = "application/http;msgtype=response"
HTTP_REQUEST = "application/http;msgtype=request"

# -- the simhash metadata fields (application/warc-fields) ------------------------------------------

SIMHASH = "simhash"
SIMHASH_SCHEME = "simhash-scheme"
TEXT_EXTRACTOR = "text-extractor"
TOKENS = "simhash-tokens"
NEAR_DUPLICATE_OF = "near-duplicate-of"
NEAR_DUPLICATE_OF_URI = "near-duplicate-of-uri"
NEAR_DUPLICATE_OF_DATE = "near-duplicate-of-date"
NEAR_DUPLICATE_DISTANCE = "near-duplicate-distance"
NEAR_DUPLICATE_OF_FILE = "near-duplicate-of-file"
"""Written by ``tag``: the original's file, relative to the directory of the sidecar holding the field."""
NEAR_DUPLICATE_OF_OFFSET = "near-duplicate-of-offset"
NEAR_DUPLICATE_SIMILARITY = "near-duplicate-similarity"
"""Estimated Jaccard similarity (0..1, 4 decimals) of the page's and the original's sketches; absent
when the pair was judged by simhash alone (one of them has no sketch)."""
MINHASH = "minhash"
"""The page's minhash-doc/1 sketch in its text form (base64url of the byte form, docs/minhash-doc-1.md)."""
MINHASH_SCHEME_FIELD = "minhash-scheme"
SOURCE_FILE = "source-file"
"""Sidecars only: the file holding the described record; with ``source-offset``, a CDX-style locator."""
SOURCE_OFFSET = "source-offset"
REPLACES_ORIGINAL = "replaces-original"
"""Crawls with ``SIMHASH_KEEP = "preferred"``: this page, a more preferred copy (its canonical URL, or one
without tracking parameters), replaces as its cluster's original the record named here (its id), with
``replaces-original-uri`` and ``replaces-original-date``; later copies name this page as their original."""
REPLACES_ORIGINAL_URI = "replaces-original-uri"
REPLACES_ORIGINAL_DATE = "replaces-original-date"
PREVIOUS_CAPTURE = "previous-capture"
"""The record id of this URL's previous capture, which ``text-change`` compares with (crawls: its last
capture; ``tag``: :mod:`.timeline`); with ``previous-capture-date`` (its ``WARC-Date``). Absent for a
URL's first capture."""
PREVIOUS_CAPTURE_DATE = "previous-capture-date"
TEXT_CHANGE = "text-change"
"""How the main text changed since the previous capture: ``unchanged``, ``same-text``, ``minor`` or
``changed`` (:mod:`scrapy_simhash.change`)."""
TEXT_SIMILARITY = "text-similarity"
"""Estimated Jaccard similarity (0..1, 4 decimals) of the two captures' sketches; absent without sketches."""


@dataclass(frozen=True)
class Duplicate:
    """The earlier record a page is a near-duplicate of."""

    record_id: str | None
    uri: str | None
    date: str | None
    distance: int
    file: str | None = None
    offset: int | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class TextChange:
    """How the page's main text changed since its URL's previous capture (:data:`TEXT_CHANGE`)."""

    kind: str
    previous_record_id: str | None
    previous_date: str | None
    similarity: float | None = None

    def to_pairs(self) -> list[tuple[str, str]]:
        """The ``previous-capture*``, ``text-change`` and ``text-similarity`` fields."""
        described = [
            (PREVIOUS_CAPTURE, self.previous_record_id),
            (PREVIOUS_CAPTURE_DATE, self.previous_date),
            (TEXT_CHANGE, self.kind),
            (TEXT_SIMILARITY, None if self.similarity is None else f"{self.similarity:.4f}"),
        ]
        return [(name, value) for name, value in described if value is not None]


@dataclass(frozen=True)
class SimhashFields:
    """The block of a simhash ``metadata`` record."""

    simhash: int
    tokens: int
    extractor: str
    scheme: str = SCHEME
    duplicate: Duplicate | None = None
    source_file: str | None = None
    source_offset: int | None = None
    minhash: MinHash | None = None
    """Absent in records written before sketches (they are then compared by simhash alone)."""
    replaces: Duplicate | None = None
    """The stored original this page replaced as its cluster's original (:data:`REPLACES_ORIGINAL`)."""
    change: TextChange | None = None
    """How the main text changed since the URL's previous capture (crawls and ``tag``)."""

    def to_pairs(self) -> list[tuple[str, str]]:
        pairs = [
            (SIMHASH, to_base32(self.simhash)),
            (SIMHASH_SCHEME, self.scheme),
            (TEXT_EXTRACTOR, self.extractor),
            (TOKENS, str(self.tokens)),
        ]
        if self.minhash is not None:
            pairs += [(MINHASH, self.minhash.to_text()), (MINHASH_SCHEME_FIELD, self.minhash.scheme)]
        if self.source_file is not None:
            pairs.append((SOURCE_FILE, self.source_file))
        if self.source_offset is not None:
            pairs.append((SOURCE_OFFSET, str(self.source_offset)))
        dup = self.duplicate
        if dup is not None:
            optional = [
                (NEAR_DUPLICATE_OF, dup.record_id),
                (NEAR_DUPLICATE_OF_URI, dup.uri),
                (NEAR_DUPLICATE_OF_DATE, dup.date),
                (NEAR_DUPLICATE_DISTANCE, str(dup.distance)),
                (NEAR_DUPLICATE_OF_FILE, dup.file),
                (NEAR_DUPLICATE_OF_OFFSET, None if dup.offset is None else str(dup.offset)),
                (NEAR_DUPLICATE_SIMILARITY, None if dup.similarity is None else f"{dup.similarity:.4f}"),
            ]
            pairs.extend((name, value) for name, value in optional if value is not None)
        old = self.replaces
        if old is not None:
            replaced = [
                (REPLACES_ORIGINAL, old.record_id),
                (REPLACES_ORIGINAL_URI, old.uri),
                (REPLACES_ORIGINAL_DATE, old.date),
            ]
            pairs.extend((name, value) for name, value in replaced if value is not None)
        if self.change is not None:
            pairs += self.change.to_pairs()
        return pairs

    @classmethod
    def from_pairs(cls, pairs: Iterable[tuple[str, str]]) -> SimhashFields:
        """Parse a metadata block back (raises KeyError/ValueError when it is not a simhash record)."""
        values = dict(pairs)
        duplicate = None
        if NEAR_DUPLICATE_DISTANCE in values:
            offset = values.get(NEAR_DUPLICATE_OF_OFFSET)
            duplicate = Duplicate(
                record_id=values.get(NEAR_DUPLICATE_OF),
                uri=values.get(NEAR_DUPLICATE_OF_URI),
                date=values.get(NEAR_DUPLICATE_OF_DATE),
                distance=int(values[NEAR_DUPLICATE_DISTANCE]),
                file=values.get(NEAR_DUPLICATE_OF_FILE),
                offset=None if offset is None else int(offset),
                similarity=_optional_float(values.get(NEAR_DUPLICATE_SIMILARITY)),
            )
        sketch = values.get(MINHASH)
        if sketch is not None and values.get(MINHASH_SCHEME_FIELD, MINHASH_SCHEME) != MINHASH_SCHEME:
            sketch = None  # another scheme's sketch cannot be compared with ours: judged by simhash alone
        source_offset = values.get(SOURCE_OFFSET)
        replaces = None
        if REPLACES_ORIGINAL_URI in values or REPLACES_ORIGINAL in values:
            replaces = Duplicate(
                record_id=values.get(REPLACES_ORIGINAL),
                uri=values.get(REPLACES_ORIGINAL_URI),
                date=values.get(REPLACES_ORIGINAL_DATE),
                distance=0,
            )
        change = None
        if TEXT_CHANGE in values:
            change = TextChange(
                kind=values[TEXT_CHANGE],
                previous_record_id=values.get(PREVIOUS_CAPTURE),
                previous_date=values.get(PREVIOUS_CAPTURE_DATE),
                similarity=_optional_float(values.get(TEXT_SIMILARITY)),
            )
        return cls(
            simhash=from_base32(values[SIMHASH]),
            tokens=int(values[TOKENS]),
            extractor=values[TEXT_EXTRACTOR],
            scheme=values[SIMHASH_SCHEME],
            duplicate=duplicate,
            source_file=values.get(SOURCE_FILE),
            source_offset=None if source_offset is None else int(source_offset),
            minhash=None if sketch is None else MinHash.from_text(sketch),
            replaces=replaces,
            change=change,
        )


def _optional_float(value: str | None) -> float | None:
    return None if value is None else float(value)


def encode_fields(pairs: Iterable[tuple[str, str]]) -> bytes:
    """``name: value`` lines (application/warc-fields); line breaks in values become spaces."""
    lines = []
    for name, value in pairs:
        clean = " ".join(str(value).split())
        lines.append(f"{name}: {clean}\r\n")
    return "".join(lines).encode("utf-8")


def parse_fields(block: bytes) -> list[tuple[str, str]]:
    pairs = []
    for line in block.decode("utf-8", errors="replace").splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip():
            pairs.append((name.strip(), value.strip()))
    return pairs


# -- records ---------------------------------------------------------------------------------------


def new_record_id() -> str:
    return f"<urn:uuid:{uuid.uuid4()}>"


def warc_date(moment: datetime | None = None) -> str:
    """WARC 1.1 date with microseconds (§5.4 allows fractions), always UTC."""
    moment = (moment or datetime.now(timezone.utc)).astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


_W3C_DATE = re.compile(
    r"(?P<y>\d{4})(?:-(?P<m>\d{2})(?:-(?P<d>\d{2})"
    r"(?:T(?P<H>\d{2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:\.\d+)?)?(?P<tz>Z|[+-]\d{2}:?\d{2}))?)?)?"
)
_ARC_DATE = re.compile(r"\d{14}")


def valid_date(value: str | None, archive_format: str = "warc") -> bool:
    """Whether ``value`` is a W3C-DTF (ISO 8601 profile) date, as WARC requires, with real calendar
    values; ARC dates may also be their 14 digits. ``+hhmm`` offsets are accepted (lenient)."""
    if not value:
        return False
    if archive_format == "arc" and _ARC_DATE.fullmatch(value):
        try:
            datetime.strptime(value, "%Y%m%d%H%M%S")
        except ValueError:
            return False
        return True
    match = _W3C_DATE.fullmatch(value)
    if match is None:
        return False
    parts = match.groupdict()
    try:
        datetime(int(parts["y"]), int(parts["m"] or 1), int(parts["d"] or 1))
    except ValueError:
        return False
    if parts["H"] is not None:
        hour, minute, second = int(parts["H"]), int(parts["M"]), int(parts["S"] or 0)
        if hour > 23 or minute > 59 or second > 60:  # 60: a leap second
            return False
        tz = parts["tz"]
        if tz != "Z" and (int(tz[1:3]) > 23 or int(tz[-2:]) > 59):
            return False
    return True


def sha1_digest(data: bytes) -> str:
    """``sha1:<BASE32>``, the labelled digest form every WARC tool reads."""
    return "sha1:" + base64.b32encode(hashlib.sha1(data).digest()).decode("ascii")


@dataclass
class WarcRecord:
    """Headers (order kept) and block; ``Content-Length`` and ``WARC-Block-Digest`` are added on output."""

    record_type: str
    headers: list[tuple[str, str]]
    block: bytes
    record_id: str = field(default_factory=new_record_id)

    def header(self, name: str) -> str | None:
        lower = name.lower()
        return next((v for k, v in self.headers if k.lower() == lower), None)

    def to_bytes(self) -> bytes:
        head = [
            WARC_VERSION,
            f"WARC-Type: {self.record_type}",
            f"WARC-Record-ID: {self.record_id}",
        ]
        head.extend(f"{name}: {_one_line(value)}" for name, value in self.headers)
        head.append(f"WARC-Block-Digest: {sha1_digest(self.block)}")
        head.append(f"Content-Length: {len(self.block)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode("utf-8") + self.block + b"\r\n\r\n"


def _one_line(value: str) -> str:
    """Header values must not break the header block (a URL with a raw newline would)."""
    return value.replace("\r", " ").replace("\n", " ")


def warcinfo_record(filename: str, fields: Sequence[tuple[str, str]], date: str | None = None) -> WarcRecord:
    return WarcRecord(
        "warcinfo",
        [("WARC-Date", date or warc_date()), ("WARC-Filename", filename), ("Content-Type", WARC_FIELDS)],
        encode_fields(fields),
    )


def http_head(first_line: str, headers: Iterable[tuple[str | bytes, str | bytes]]) -> bytes:
    """An HTTP message head as bytes; header values are kept byte for byte (latin-1 round trip)."""
    lines = [first_line.encode("latin-1")]
    for name, value in headers:
        name_b = name if isinstance(name, bytes) else name.encode("latin-1")
        value_b = value if isinstance(value, bytes) else value.encode("latin-1", errors="replace")
        lines.append(name_b + b": " + value_b)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def response_record(
    uri: str,
    date: str,
    head: bytes,
    body: bytes,
    *,
    ip_address: str | None = None,
    truncated: str | None = None,
) -> WarcRecord:
    headers = [("WARC-Target-URI", uri), ("WARC-Date", date)]
    if ip_address:
        headers.append(("WARC-IP-Address", ip_address))
    if truncated:
        headers.append(("WARC-Truncated", truncated))
    headers += [("Content-Type", HTTP_RESPONSE), ("WARC-Payload-Digest", sha1_digest(body))]
    return WarcRecord("response", headers, head + body)


def request_record(uri: str, date: str, head: bytes, body: bytes, *, concurrent_to: str) -> WarcRecord:
    headers = [
        ("WARC-Target-URI", uri),
        ("WARC-Date", date),
        ("WARC-Concurrent-To", concurrent_to),
        ("Content-Type", HTTP_REQUEST),
        ("WARC-Payload-Digest", sha1_digest(body)),
    ]
    return WarcRecord("request", headers, head + body)


def metadata_record(
    uri: str | None,
    fields: SimhashFields,
    *,
    concurrent_to: str | None = None,
    refers_to: str | None = None,
    refers_to_uri: str | None = None,
    refers_to_date: str | None = None,
    date: str | None = None,
) -> WarcRecord:
    """A simhash ``metadata`` record: about a response written alongside it (``concurrent_to``), or
    about a record of another file (``refers_to``; for ARC records, which have no id, the target URI
    and date of the described capture instead). No WARC-Payload-Digest: a metadata record has no payload."""
    headers: list[tuple[str, str]] = []
    if uri:
        headers.append(("WARC-Target-URI", uri))
    headers.append(("WARC-Date", date or warc_date()))
    if concurrent_to:
        headers.append(("WARC-Concurrent-To", concurrent_to))
    if refers_to:
        headers.append(("WARC-Refers-To", refers_to))
    if refers_to_uri:
        headers.append(("WARC-Refers-To-Target-URI", refers_to_uri))
    if refers_to_date:
        headers.append(("WARC-Refers-To-Date", refers_to_date))
    headers.append(("Content-Type", WARC_FIELDS))
    return WarcRecord("metadata", headers, encode_fields(fields.to_pairs()))
