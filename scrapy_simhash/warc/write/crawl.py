"""The Scrapy extension that writes the crawl to WARC/1.1, with a simhash ``metadata`` record per page.

Enable with ``SIMHASH_WARC_ENABLED = True`` (the add-on then installs it), or
``EXTENSIONS = {"scrapy_simhash.warc.write.crawl.WarcWriterExtension": 500}``.

- ``response_downloaded``: the response exactly as received (before the
  decompression middleware; ``Content-Encoding`` kept, chunked transfer coding
  already removed by Scrapy, so ``Transfer-Encoding`` is not written) and the
  request that fetched it. The response record's id goes into
  ``request.meta["warc_record_id"]`` and its exact ``WARC-Date`` into
  ``request.meta["warc_date"]``; the simhash middleware stores both in the
  index (``record_id``, ``date``), so a later ``near-duplicate-of-date``
  equals the original's ``WARC-Date`` byte for byte.
- ``fingerprint_computed`` (sent by the middleware): a ``metadata`` record,
  ``WARC-Concurrent-To`` that response, with the simhash fields, the page's
  ``minhash`` sketch (verified mode) and, for a near-duplicate, its
  ``near-duplicate-distance`` and ``near-duplicate-similarity`` (absent when the
  decision was made by simhash alone); for a URL captured before, how its main
  text changed since that last capture (``previous-capture``,
  ``previous-capture-date``, ``text-change``, ``text-similarity``; see
  :mod:`scrapy_simhash.crawl_changes`).

- A response whose payload was archived before (this crawl, or an earlier one
  through the same index location) is written as a ``revisit`` record instead
  (``SIMHASH_WARC_REVISITS``, on by default; see :mod:`.crawl_revisits`). Then
  ``request.meta["warc_record_id"]`` and ``warc_date`` name the revisit record,
  and ``request.meta["warc_revisit_of"]`` the original's record id.

Settings: ``SIMHASH_WARC_DIR`` (``warcs``), ``SIMHASH_WARC_PREFIX`` (the spider
name), ``SIMHASH_WARC_MAX_SIZE`` (1 GB: a new file after that size),
``SIMHASH_WARC_REVISITS`` (True).

On start, the ``.warc.gz.open`` files that killed crawls left in the directory
are finished (cut after their last whole record and renamed; see
:mod:`.recover`), counted in ``simhash/warc/recovered``.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import NotConfigured

from ...fingerprint import SCHEME, from_base32
from ...fingerprint.minhash import MinHash
from ...index.archive.payload_digests import Claim, Original
from ...signals import fingerprint_computed
from ..records import (
    Duplicate,
    SimhashFields,
    TextChange,
    http_head,
    metadata_record,
    request_record,
    response_record,
    sha1_digest,
    warc_date,
)
from .crawl_revisits import CrawlRevisits, revisit_record
from .recover import Recovery, recover_stale
from .writer import DEFAULT_MAX_SIZE, SOFTWARE, RollingWarcWriter, base_warcinfo_fields

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

RECORD_ID_META = "warc_record_id"
"""``request.meta`` key: the WARC-Record-ID of the response record written for this request."""
DATE_META = "warc_date"
"""``request.meta`` key: the WARC-Date string of that response record, exactly as written."""
PAYLOAD_DIGEST_META = "warc_payload_digest"
"""``request.meta`` key: the payload digest of that record (``sha1:<base32>`` of the body as received,
before any content coding is removed), which the middleware keeps as the capture's payload digest, so
that a crawl's captures and the same records read from its WARCs later (``tag --index``) agree."""
REVISIT_OF_META = "warc_revisit_of"
"""``request.meta`` key, set when a revisit record was written: the record id of the response holding
the payload (``warc_record_id`` and ``warc_date`` then name the revisit record)."""

_NOT_WRITTEN_HEADERS = frozenset(
    {b"transfer-encoding"}
)  # Scrapy has removed the chunked coding from the body


_HTTP2 = frozenset({"h2", "HTTP/2", "HTTP/2.0"})


def response_protocol(response: Response) -> str:
    """The HTTP version the server answered with (Scrapy's HTTP/2 handler says ``h2``)."""
    protocol = getattr(response, "protocol", None) or "HTTP/1.1"
    return "HTTP/2" if protocol in _HTTP2 else protocol


def request_protocol(response: Response) -> str:
    """The HTTP version the request was sent with: ``HTTP/2`` over HTTP/2, else ``HTTP/1.1``.

    Not the response's version: Scrapy's HTTP/1.x clients (Twisted, httpx, aiohttp) always send
    ``HTTP/1.1``, and a server may still answer ``HTTP/1.0``.
    """
    return "HTTP/2" if response_protocol(response) == "HTTP/2" else "HTTP/1.1"


def status_line(response: Response) -> str:
    """``HTTP/1.1 200 OK``; Scrapy does not keep the reason phrase, so the standard one is used."""
    protocol = response_protocol(response)
    try:
        phrase = HTTPStatus(response.status).phrase
    except ValueError:
        phrase = ""
    return f"{protocol} {response.status} {phrase}".rstrip()


def request_line(request: Request, protocol: str) -> str:
    parts = urlsplit(request.url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return f"{request.method} {target} {protocol}"


def is_crawl_file(first_record: bytes) -> bool:
    """The first record is the warcinfo this extension writes (``operator-software: Scrapy/...``)."""
    head, _, block = first_record.partition(b"\r\n\r\n")
    return b"\r\nWARC-Type: warcinfo\r\n" in head + b"\r\n" and b"operator-software: Scrapy/" in block


def _header_pairs(headers: Any, skip: frozenset[bytes] = frozenset()) -> list[tuple[bytes, bytes]]:
    pairs: list[tuple[bytes, bytes]] = []
    for name, values in headers.items():
        if name.lower() in skip:
            continue
        pairs.extend((name, value) for value in values)
    return pairs


def _truncation(response: Response) -> str | None:
    flags = set(response.flags or ())
    if "dataloss" in flags:
        return "disconnect"
    if "download_stopped" in flags:
        return "unspecified"
    return None


@dataclass(frozen=True)
class _Payload:
    """A response's payload as looked up in the digest store: its digest and what to write."""

    revisits: CrawlRevisits
    digest: str
    claim: Claim


class WarcWriterExtension:
    """Writes request, response and simhash metadata records for every HTTP(S) download."""

    def __init__(self, crawler: Crawler, writer: RollingWarcWriter, *, revisits: bool = True) -> None:
        self.crawler = crawler
        self.stats = crawler.stats
        self.writer = writer
        self.revisits_enabled = revisits
        self.revisits: CrawlRevisits | None = None

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        settings = crawler.settings
        if not settings.getbool("SIMHASH_WARC_ENABLED", False):
            raise NotConfigured("SIMHASH_WARC_ENABLED is off")
        max_size = settings.getint("SIMHASH_WARC_MAX_SIZE", DEFAULT_MAX_SIZE)
        if max_size <= 0:
            raise ValueError(f"SIMHASH_WARC_MAX_SIZE must be a positive number of bytes; got {max_size!r}")
        spider_name = getattr(crawler.spidercls, "name", None) or "crawl"
        prefix = settings.get("SIMHASH_WARC_PREFIX") or spider_name
        writer = RollingWarcWriter(
            settings.get("SIMHASH_WARC_DIR") or "warcs",
            prefix,
            max_size=max_size,
            warcinfo_fields=cls._warcinfo_fields(crawler, prefix),
        )
        extension = cls(crawler, writer, revisits=settings.getbool("SIMHASH_WARC_REVISITS", True))
        crawler.signals.connect(extension.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(extension.response_downloaded, signal=signals.response_downloaded)
        crawler.signals.connect(extension.fingerprint_computed, signal=fingerprint_computed)
        crawler.signals.connect(extension.spider_closed, signal=signals.spider_closed)
        return extension

    @staticmethod
    def _warcinfo_fields(crawler: Crawler, prefix: str) -> list[tuple[str, str]]:
        import scrapy

        from ...settings import SimhashSettings

        settings = crawler.settings
        fields = [
            ("isPartOf", prefix),
            ("operator-software", f"Scrapy/{scrapy.__version__} {SOFTWARE}"),
            ("robots", "obey" if settings.getbool("ROBOTSTXT_OBEY") else "ignore"),
            ("http-header-user-agent", str(settings.get("USER_AGENT") or "")),
            ("simhash-scheme", SCHEME),
        ]
        with contextlib.suppress(ValueError):  # a bad SIMHASH_* value: the middleware reports it
            fields.append(("text-extractor", SimhashSettings.from_settings(settings).extractor.description))
        return base_warcinfo_fields(fields)

    # -- signals -------------------------------------------------------------------------------------

    def spider_opened(self, spider: Spider | None = None) -> None:
        """Finish what killed crawls left in the directory before writing anything new."""
        for result in recover_stale(self.writer.directory, is_crawl_file):
            self._report_recovery(result)
        if self.revisits_enabled:
            self.revisits = self._crawl_revisits(spider)

    def _crawl_revisits(self, spider: Spider | None) -> CrawlRevisits:
        """The digest store beside the crawl's near-duplicate index (``SIMHASH_INDEX``, else the
        spider's own location), opened on the first payload."""
        from ...crawl_config import spider_name
        from ...crawl_index import default_location, with_crawl_options
        from ...index import is_server_uri
        from ...index.archive.payload_digests import open_payload_digests
        from ...shown import shown_location

        settings = self.crawler.settings
        location = settings.get("SIMHASH_INDEX") or default_location(spider_name(spider, self.crawler))
        opened = with_crawl_options(location) if is_server_uri(location) else location
        return CrawlRevisits(
            lambda: open_payload_digests(opened),
            self.stats,
            location=shown_location(location),
            reset=settings.getbool("SIMHASH_RESET", False),
        )

    def _report_recovery(self, result: Recovery) -> None:
        if result.action == "recovered":
            self.stats.inc_value("simhash/warc/recovered")
            self.stats.inc_value("simhash/warc/recovered_records", result.records)
            cut = (
                f"; dropped {result.dropped_bytes} bytes of a cut last record" if result.dropped_bytes else ""
            )
            logger.warning(
                "simhash: finished %s, left open by a crawl that was killed: %d record(s) kept%s; now %s",
                result.open_path.name,
                result.records,
                cut,
                result.path,
            )
        elif result.action == "removed":
            self.stats.inc_value("simhash/warc/recovered_empty")
            logger.warning("simhash: removed %s, an empty file left by a killed crawl", result.open_path)
        else:
            self.stats.inc_value("simhash/warc/recover_failed")
            logger.warning(
                "simhash: left %s as it is (%s). Its complete records can still be read; to finish it by "
                "hand, cut it after its last good record and drop the .open suffix",
                result.open_path,
                result.reason,
            )

    def response_downloaded(self, response: Response, request: Request, spider: Spider | None = None) -> None:
        if urlsplit(response.url).scheme not in ("http", "https"):
            return
        date = warc_date()
        head = http_head(status_line(response), _header_pairs(response.headers, _NOT_WRITTEN_HEADERS))
        ip = getattr(response, "ip_address", None)
        ip_address = str(ip) if ip is not None else None
        truncated = _truncation(response)
        resp = response_record(
            response.url, date, head, response.body, ip_address=ip_address, truncated=truncated
        )
        candidate = Original(resp.record_id, response.url, date)
        payload = self._claim(response.body, truncated, candidate)
        if payload is not None and payload.claim.original is not None:
            resp = revisit_record(
                response.url, date, head, payload.digest, payload.claim.original, ip_address=ip_address
            )
        request_headers = _header_pairs(request.headers)
        if not any(name.lower() == b"host" for name, _ in request_headers):
            request_headers.insert(0, (b"Host", urlsplit(request.url).netloc.encode("latin-1")))
        req = request_record(
            request.url,
            date,
            http_head(request_line(request, request_protocol(response)), request_headers),
            request.body or b"",
            concurrent_to=resp.record_id,
        )
        try:
            self.writer.write(resp)  # written and flushed before the payload is registered
        except OSError as exc:  # disk full, permissions: the crawl goes on, the loss is counted and logged
            if payload is not None and payload.claim.claimed:
                payload.revisits.release(payload.digest, candidate)
            self.stats.inc_value("simhash/warc/error/write")
            logger.error("simhash: cannot write WARC record for %s: %s", response.url, exc)
            return
        if payload is not None and payload.claim.original is not None:
            payload.revisits.written(len(response.body))
            request.meta[REVISIT_OF_META] = payload.claim.original.record_id
        elif payload is not None and payload.claim.claimed:
            payload.revisits.confirm(payload.digest, candidate)
        request.meta[RECORD_ID_META] = resp.record_id
        request.meta[DATE_META] = date
        request.meta[PAYLOAD_DIGEST_META] = (
            payload.digest if payload is not None else sha1_digest(response.body)
        )
        self.stats.inc_value("simhash/warc/records")
        try:
            self.writer.write(req)
        except OSError as exc:
            self.stats.inc_value("simhash/warc/error/write")
            logger.error("simhash: cannot write WARC request record for %s: %s", response.url, exc)
            return
        self.stats.inc_value("simhash/warc/records")

    def _claim(self, body: bytes, truncated: str | None, candidate: Original) -> _Payload | None:
        """Look the payload up (claiming it when new); None when it is not deduplicated: revisits off,
        an empty body (nothing to save) or a truncated one (its digest is not the payload's)."""
        if self.revisits is None or not body or truncated is not None:
            return None
        digest = sha1_digest(body)
        return _Payload(self.revisits, digest, self.revisits.claim(digest, candidate))

    def fingerprint_computed(
        self, response: Response, request: Request, result: dict[str, Any], spider: Spider | None = None
    ) -> None:
        concurrent_to = request.meta.get(RECORD_ID_META)
        if not concurrent_to:  # e.g. a response from the HTTP cache: nothing downloaded, nothing written
            self.stats.inc_value("simhash/warc/metadata_without_response")
            return
        record = metadata_record(response.url, fields_from_result(result), concurrent_to=concurrent_to)
        try:
            self.writer.write(record)
        except OSError as exc:
            self.stats.inc_value("simhash/warc/error/write")
            logger.error("simhash: cannot write WARC metadata for %s: %s", response.url, exc)
            return
        self.stats.inc_value("simhash/warc/records")
        self.stats.inc_value("simhash/warc/metadata")

    def spider_closed(self, spider: Spider | None = None, reason: str | None = None) -> None:
        if self.revisits is not None:
            self.revisits.close()
        files = self.writer.close()
        self.stats.set_value("simhash/warc/files", len(files))
        if files:
            logger.info("simhash: wrote %d WARC file(s) to %s", len(files), self.writer.directory)


def fields_from_result(result: dict[str, Any]) -> SimhashFields:
    """The middleware's ``response.meta["simhash"]`` dict as metadata record fields."""
    original = result.get("duplicate_of")
    duplicate = None
    if original:
        similarity = original.get("similarity")
        duplicate = Duplicate(
            record_id=original.get("record_id"),
            uri=original.get("url"),
            date=original.get("date"),
            distance=int(original["distance"]),
            similarity=None if similarity is None else float(similarity),
        )
    old = result.get("replaces")
    replaces = None
    if old:
        replaces = Duplicate(
            record_id=old.get("record_id"),
            uri=old.get("url"),
            date=old.get("date"),
            distance=int(old["distance"]),
        )
    sketch = result.get("minhash")
    described = result.get("change")
    change = None
    if described:
        change = TextChange(
            kind=described["kind"],
            previous_record_id=described.get("previous_capture"),
            previous_date=described.get("previous_capture_date"),
            similarity=described.get("similarity"),
        )
    return SimhashFields(
        simhash=from_base32(result["simhash"]),
        tokens=int(result["tokens"]),
        extractor=result["extractor"],
        scheme=result["scheme"],
        duplicate=duplicate,
        minhash=None if sketch is None else MinHash.from_text(sketch),
        replaces=replaces,
        change=change,
    )
