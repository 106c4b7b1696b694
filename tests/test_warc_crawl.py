"""End to end: a real Scrapy crawl of a real HTTP server on 127.0.0.1, written to WARC, read back.

The crawl runs in a child process (a Twisted reactor cannot be restarted) with
the add-on and ``SIMHASH_WARC_ENABLED``; the site serves real corpus pages,
one of them twice under two URLs (a near-duplicate), one gzip-encoded, one
chunked, one with two Set-Cookie headers, one answered as HTTP/1.0, and a
binary body.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.fingerprint import from_base32
from scrapy_simhash.page import fingerprint_page
from scrapy_simhash.warc import records as F
from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord, fastwarc_available
from scrapy_simhash.warc.records import parse_fields
from scrapy_simhash.warc.reprocess import Options, plan_inputs, tag

BINARY = bytes(range(256)) * 8

SPIDER_SCRIPT = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

start, out_dir, items_path = sys.argv[1], sys.argv[2], sys.argv[3]

class Site(scrapy.Spider):
    name = "site"
    start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "status": response.status, "meta": response.meta.get("simhash"),
               "record_id": response.meta.get("warc_record_id")}
        if response.url == start:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)

process = CrawlerProcess({
    "ADDONS": {"scrapy_simhash.Addon": 500},
    "SIMHASH_WARC_ENABLED": True,
    "SIMHASH_WARC_DIR": out_dir + "/warcs",
    "SIMHASH_WARC_PREFIX": "e2e",
    "SIMHASH_WARC_MAX_SIZE": 40000,  # small: the crawl rolls over to several files
    "SIMHASH_INDEX": out_dir + "/index",
    "SIMHASH_WORKERS": 1,
    # the copy's tracking parameter would make /a replace it when it arrives first (the order varies)
    "SIMHASH_KEEP": "first",
    "CONCURRENT_REQUESTS": 1,
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    "FEEDS": {items_path: {"format": "jsonlines"}},
})
process.crawl(Site)
process.start()
"""


def _pages(corpus: Path) -> list[bytes]:
    files = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:5]
    return [gzip.decompress(f.read_bytes()) for f in files]


@pytest.fixture(scope="module")
def site(corpus: Path) -> Iterator[dict[str, object]]:
    a, b, c, d, e = _pages(corpus)
    request_versions: dict[str, str] = {}  # path -> the HTTP version of the request line the server got
    routes: dict[str, tuple[int, list[tuple[str, str]], bytes, str]] = {
        "/": (
            200,
            [("Content-Type", "text/html")],
            b"<html><body>"
            + b"".join(
                f'<a href="{p}">x</a>'.encode()
                for p in ["/a", "/a-copy?utm_source=feed&x=1", "/b", "/gz", "/chunked", "/http10", "/bin"]
            )
            + b"</body></html>",
            "plain",
        ),
        "/a": (
            200,
            [("Content-Type", "text/html; charset=utf-8"), ("Set-Cookie", "s=1"), ("Set-Cookie", "t=2")],
            a,
            "plain",
        ),
        "/a-copy": (
            200,
            [("Content-Type", "text/html; charset=utf-8")],
            a.replace(b"</body>", b"<div>ad</div></body>"),
            "plain",
        ),
        "/b": (200, [("Content-Type", "text/html")], b, "plain"),
        "/gz": (
            200,
            [("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
            gzip.compress(c),
            "plain",
        ),
        "/chunked": (200, [("Content-Type", "text/html")], d, "chunked"),
        "/http10": (200, [("Content-Type", "text/html")], e, "http/1.0"),
        "/bin": (200, [("Content-Type", "application/octet-stream")], BINARY, "plain"),
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            status, headers, body, mode = routes.get(path, (404, [], b"", "plain"))
            request_versions[path] = self.request_version
            if mode == "http/1.0":  # an old server: answers HTTP/1.0 whatever the request said
                self.protocol_version = "HTTP/1.0"
                self.close_connection = True
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            if mode == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i in range(0, len(body), 1000):
                    piece = body[i : i + 1000]
                    self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            else:
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {
            "url": f"http://127.0.0.1:{server.server_port}/",
            "routes": routes,
            "request_versions": request_versions,
        }
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def crawl(site: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = tmp_path_factory.mktemp("crawl")
    script = out / "crawl.py"
    script.write_text(SPIDER_SCRIPT)
    items_path = out / "items.jl"
    proc = subprocess.run(
        [sys.executable, str(script), str(site["url"]), str(out), str(items_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    items = [json.loads(line) for line in items_path.read_text().splitlines()]
    warcs = sorted((out / "warcs").glob("*.warc.gz"))
    assert warcs, f"no WARC written: {list((out / 'warcs').iterdir())}"
    assert not list((out / "warcs").glob("*.open")), "the WARC was not closed at the end of the crawl"
    return {"items": items, "warcs": warcs, "out": out}


def _records(warcs: list[Path]) -> list[dict[str, object]]:
    """Every record read back by warcio with digest checking on."""
    found = []
    for path in warcs:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                raw = rec.content_stream().read() if rec.rec_type in ("response", "request") else None
                block = rec.raw_stream.read() if raw is None else None
                found.append(
                    {
                        "type": rec.rec_type,
                        "headers": rec.rec_headers,
                        "http": rec.http_headers,
                        "payload": raw,
                        "block": block,
                        "digest_ok": rec.digest_checker.passed,
                        "problems": list(rec.digest_checker.problems),
                    }
                )
    return found


def test_every_record_has_a_valid_block_digest_and_warcinfo_comes_first(crawl: dict) -> None:
    assert len(crawl["warcs"]) > 1, "SIMHASH_WARC_MAX_SIZE should have rolled the crawl over"
    for path in crawl["warcs"]:
        types = [r["type"] for r in _records([path])]
        assert types[0] == "warcinfo" and "warcinfo" not in types[1:]
    for path in crawl["warcs"][:-1]:  # each full file: closed by the record that crossed the limit
        offsets = [r.offset for r in ArchiveReader("warcio").read(path) if isinstance(r, ArchiveRecord)]
        assert offsets[-1] < 40000 <= path.stat().st_size
    records = _records(crawl["warcs"])
    assert all(r["headers"].protocol == "WARC/1.1" for r in records)
    for r in records:
        assert r["headers"].get_header("WARC-Block-Digest"), r["type"]
        assert r["digest_ok"] is not False, (r["type"], r["problems"])
    for r in records:
        if r["type"] == "metadata":
            assert r["headers"].get_header("WARC-Payload-Digest") is None
            assert r["headers"].get_header("Content-Type") == "application/warc-fields"


def test_response_records_keep_the_body_as_received(crawl: dict, site: dict) -> None:
    records = _records(crawl["warcs"])
    by_uri = {r["headers"].get_header("WARC-Target-URI"): r for r in records if r["type"] == "response"}
    base = site["url"]
    gz = by_uri[base + "gz"]
    assert gz["http"].get_header("Content-Encoding") == "gzip"
    # warcio decodes content-encoding in content_stream: the raw bytes must be the gzip stream
    raw = ArchiveReader("warcio")
    stored = {
        rec.target_uri: rec.block
        for path in crawl["warcs"]
        for rec in raw.read(path)
        if isinstance(rec, ArchiveRecord) and rec.record_type == "response"
    }
    assert stored[base + "gz"].split(b"\r\n\r\n", 1)[1] == site["routes"]["/gz"][2]
    assert stored[base + "bin"].split(b"\r\n\r\n", 1)[1] == BINARY
    chunked = by_uri[base + "chunked"]
    assert chunked["http"].get_header("Transfer-Encoding") is None
    assert chunked["payload"] == site["routes"]["/chunked"][2]
    cookies = [v for k, v in by_uri[base + "a"]["http"].headers if k.lower() == "set-cookie"]
    assert cookies == ["s=1", "t=2"]
    assert by_uri[base + "a"]["http"].get_statuscode() == "200"
    assert by_uri[base + "a"]["headers"].get_header("WARC-IP-Address") == "127.0.0.1"


def test_request_records_have_method_path_query_and_point_at_their_response(crawl: dict) -> None:
    records = _records(crawl["warcs"])
    response_ids = {r["headers"].get_header("WARC-Record-ID") for r in records if r["type"] == "response"}
    requests = [r for r in records if r["type"] == "request"]
    assert len(requests) == len(response_ids)
    for r in requests:
        assert r["headers"].get_header("WARC-Concurrent-To") in response_ids
        assert r["http"].protocol == "GET"
        assert r["http"].get_header("Host", "").startswith("127.0.0.1:")
    copy = next(r for r in requests if "a-copy" in r["headers"].get_header("WARC-Target-URI"))
    assert copy["http"].statusline.split()[0] == "/a-copy?utm_source=feed&x=1"


def test_request_records_carry_the_http_version_scrapy_sent_not_the_responses(
    crawl: dict, site: dict
) -> None:
    assert site["request_versions"]["/http10"] == "HTTP/1.1"  # what Scrapy actually sent
    records = _records(crawl["warcs"])
    old = site["url"] + "http10"
    [response] = [
        r for r in records if r["type"] == "response" and r["headers"].get_header("WARC-Target-URI") == old
    ]
    assert response["http"].protocol == "HTTP/1.0"  # the server's answer, kept as received
    requests = [r for r in records if r["type"] == "request"]
    assert requests
    for r in requests:
        path = r["http"].statusline.split()[0].split("?")[0]
        version = r["http"].statusline.split()[-1]
        assert version == site["request_versions"][path] == "HTTP/1.1", r["http"].statusline


def test_near_duplicate_of_date_is_the_originals_warc_date_byte_for_byte(crawl: dict) -> None:
    records = _records(crawl["warcs"])
    responses = {r["headers"].get_header("WARC-Record-ID"): r for r in records if r["type"] == "response"}
    duplicates = [
        fields.duplicate
        for r in records
        if r["type"] == "metadata"
        for fields in [F.SimhashFields.from_pairs(parse_fields(r["block"]))]
        if fields.duplicate is not None
    ]
    assert duplicates, "the copy of /a was not tagged"
    for duplicate in duplicates:
        original_date = responses[duplicate.record_id]["headers"].get_header("WARC-Date")
        assert "." in original_date  # the writer's dates carry fractions of a second
        assert duplicate.date == original_date


def test_metadata_records_match_the_live_fingerprints_and_link_to_existing_records(crawl: dict) -> None:
    records = _records(crawl["warcs"])
    responses = {r["headers"].get_header("WARC-Record-ID"): r for r in records if r["type"] == "response"}
    metadata = [r for r in records if r["type"] == "metadata"]
    live = {item["url"]: item for item in crawl["items"] if item["meta"]}
    assert len(live) >= 4 and len(metadata) == len(live)
    for m in metadata:
        target = responses[m["headers"].get_header("WARC-Concurrent-To")]
        uri = m["headers"].get_header("WARC-Target-URI")
        assert uri == target["headers"].get_header("WARC-Target-URI")
        fields = F.SimhashFields.from_pairs(parse_fields(m["block"]))
        result = live[uri]["meta"]
        assert fields.simhash == from_base32(result["simhash"])
        assert (fields.tokens, fields.extractor, fields.scheme) == (
            result["tokens"],
            result["extractor"],
            result["scheme"],
        )
        assert live[uri]["record_id"] == m["headers"].get_header("WARC-Concurrent-To")
        assert result["mode"] == "verified"  # the default
        assert fields.minhash is not None and fields.minhash.to_text() == result["minhash"]
        if result["duplicate_of"]:
            assert fields.duplicate is not None
            assert fields.duplicate.record_id in responses  # the original's response record
            original = responses[fields.duplicate.record_id]
            assert original["headers"].get_header("WARC-Target-URI") == fields.duplicate.uri
            assert fields.duplicate.distance == result["duplicate_of"]["distance"]
            assert fields.duplicate.similarity == result["duplicate_of"]["similarity"]
        else:
            assert fields.duplicate is None
    assert any(item["meta"]["near_duplicate"] for item in live.values()), "the copy of /a was not found"


def test_metadata_records_carry_the_sketch_and_the_duplicates_similarity(crawl: dict, site: dict) -> None:
    """Read back with warcio: each metadata record has the page's minhash-doc/1 sketch (computed in a
    worker process and sent back, equal to the sketch of the bytes received), and the later of /a and
    its copy says how similar it is to the other, beside its distance."""
    records = _records(crawl["warcs"])
    metadata = {r["headers"].get_header("WARC-Target-URI"): r for r in records if r["type"] == "metadata"}
    base = site["url"]
    for path in ("a", "a-copy?utm_source=feed&x=1", "b"):
        pairs = parse_fields(metadata[base + path]["block"])
        names = [name for name, _ in pairs]
        assert names.count("minhash") == 1 and ("minhash-scheme", "minhash-doc/1") in pairs
        body = site["routes"]["/" + path.split("?")[0]][2]
        expected = fingerprint_page(body, base + path, "utf-8").minhash
        assert dict(pairs)["minhash"] == expected.to_text()
    pair = [base + "a", base + "a-copy?utm_source=feed&x=1"]
    found = [dict(parse_fields(metadata[uri]["block"])) for uri in pair]
    [copy] = [fields for fields in found if "near-duplicate-of-uri" in fields]  # the later of the two
    assert copy["near-duplicate-of-uri"] in pair
    assert float(copy["near-duplicate-similarity"]) >= 0.5 and int(copy["near-duplicate-distance"]) <= 64
    assert len(copy["near-duplicate-similarity"].split(".")[1]) == 4
    assert "near-duplicate-similarity" not in dict(parse_fields(metadata[base + "b"]["block"]))


@pytest.mark.parametrize("reader", ["warcio", "fastwarc"])
def test_reprocessing_the_crawl_reproduces_the_live_fingerprints(
    crawl: dict, reader: str, tmp_path: Path
) -> None:
    if reader == "fastwarc" and not fastwarc_available():
        pytest.skip("FastWARC not installed")
    inputs = plan_inputs([str(p) for p in crawl["warcs"]], tmp_path)
    summary = tag(inputs, Options(workers=1, reader=reader))
    assert summary.exit_status == 0
    tagged: dict[str, int] = {}
    for entry in inputs:
        for rec in ArchiveReader("warcio").read(entry.sidecar):
            if isinstance(rec, ArchiveRecord) and rec.record_type == "metadata":
                tagged[rec.target_uri] = F.SimhashFields.from_pairs(parse_fields(rec.block)).simhash
    live = {item["url"]: from_base32(item["meta"]["simhash"]) for item in crawl["items"] if item["meta"]}
    assert tagged == live
