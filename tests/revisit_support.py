"""Shared by the revisit tests: a local site with byte-identical pages, a crawl in a child process, and
the records of its WARCs as warcio and FastWARC read them."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
BINARY = bytes(range(256)) * 16

SPIDER_SCRIPT = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

start, warc_dir, index, out, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]

class Site(scrapy.Spider):
    name = "site"
    start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "record_id": response.meta.get("warc_record_id"),
               "date": response.meta.get("warc_date"), "revisit_of": response.meta.get("warc_revisit_of")}
        if response.url == start:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)

settings = {
    "ADDONS": {"scrapy_simhash.Addon": 500},
    "SIMHASH_WARC_ENABLED": True,
    "SIMHASH_WARC_DIR": warc_dir,
    "SIMHASH_WARC_PREFIX": "rv",
    "SIMHASH_INDEX": index,
    "SIMHASH_WORKERS": 0,
    "CONCURRENT_REQUESTS": 1,
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
    "FEEDS": {out + "/items.jl": {"format": "jsonlines"}},
}
settings.update(json.loads(extra))
process = CrawlerProcess(settings)
crawler = process.create_crawler(Site)
process.crawl(crawler)
process.start()
with open(out + "/stats.json", "w") as fh:
    json.dump({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simhash/")}, fh)
"""


def _pages(corpus: Path) -> list[bytes]:
    files = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:3]
    return [gzip.decompress(f.read_bytes()) for f in files]


@pytest.fixture(scope="module")
def site(corpus: Path) -> Iterator[dict[str, object]]:
    a, b, c = _pages(corpus)
    links = ["/a", "/a-again", "/b", "/c", "/bin", "/bin-again", "/empty", "/empty-again"]
    routes: dict[str, tuple[str, bytes]] = {
        "/": (
            "text/html",
            b"<html><body>" + b"".join(f'<a href="{p}">x</a>'.encode() for p in links) + b"</body>",
        ),
        "/a": ("text/html; charset=utf-8", a),
        "/a-again": ("text/html; charset=utf-8", a),
        "/b": ("text/html", b),
        "/c": ("text/html", c),
        "/bin": ("application/octet-stream", BINARY),
        "/bin-again": ("application/octet-stream", BINARY),
        "/empty": ("text/plain", b""),
        "/empty-again": ("text/plain", b""),
    }

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            content_type, body = routes.get(self.path, ("text/plain", b"not found"))
            self.send_response(200 if self.path in routes else 404)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"url": f"http://127.0.0.1:{server.server_port}/", "routes": routes}
    finally:
        server.shutdown()
        server.server_close()


def run_crawl(
    site: dict[str, object], out: Path, index: str, warc_dir: Path | None = None, **settings: object
) -> dict[str, object]:
    """One crawl in a child process: its WARCs, items, simhash stats and log."""
    out.mkdir(parents=True, exist_ok=True)
    script = out / "crawl.py"
    script.write_text(SPIDER_SCRIPT)
    warc_dir = warc_dir or out / "warcs"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMHASH", "SCRAPY"))}
    proc = subprocess.run(
        [sys.executable, str(script), str(site["url"]), str(warc_dir), index, str(out), json.dumps(settings)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=out,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {
        "warcs": sorted(warc_dir.glob("*.warc.gz")),
        "items": [json.loads(line) for line in (out / "items.jl").read_text().splitlines()],
        "stats": json.loads((out / "stats.json").read_text()),
        "log": proc.stderr,
    }


def warcio_records(warcs: list[Path]) -> list[dict[str, object]]:
    """Every record, read by warcio with digest checking on."""
    found = []
    for path in warcs:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                payload = rec.content_stream().read() if rec.rec_type in ("response", "revisit") else None
                found.append(
                    {
                        "type": rec.rec_type,
                        "headers": dict(rec.rec_headers.headers),
                        "status": rec.http_headers.get_statuscode() if rec.http_headers else None,
                        "payload": payload,
                        "digest_ok": rec.digest_checker.passed,
                        "problems": list(rec.digest_checker.problems),
                        "file": path,
                    }
                )
    return found


def fastwarc_records(warcs: list[Path]) -> list[dict[str, object]]:
    """Every record, read by FastWARC with its block digests verified."""
    from fastwarc.warc import ArchiveIterator as FastIterator
    from fastwarc.warc import WarcRecordType

    found = []
    for path in warcs:
        with open(path, "rb") as fh:  # the block digest covers the HTTP head too: verified unparsed
            digests = [
                rec.verify_block_digest()
                for rec in FastIterator(fh, record_types=WarcRecordType.any_type, parse_http=False)
            ]
        with open(path, "rb") as fh:
            for rec, block_ok in zip(
                FastIterator(fh, record_types=WarcRecordType.any_type, parse_http=True), digests, strict=True
            ):
                found.append(
                    {
                        "type": rec.headers.get("WARC-Type"),
                        "headers": dict(rec.headers.items()),
                        "block_ok": block_ok,
                        "status": rec.http_headers.status_code if rec.http_headers else None,
                    }
                )
    return found


def by_type(records: list[dict[str, object]], kind: str) -> list[dict[str, object]]:
    return [r for r in records if r["type"] == kind]


class Stats:
    """The two calls of Scrapy's stats collector that the revisit writer makes (a Scrapy collector
    needs a running crawler)."""

    def __init__(self) -> None:
        self.values: dict[str, int] = {}

    def inc_value(self, key: str, count: int = 1) -> None:
        self.values[key] = self.values.get(key, 0) + count

    def get_value(self, key: str) -> int | None:
        return self.values.get(key)
