"""What a second crawl of an unchanged site stores, with revisit records and without, side by side.

A local site on 127.0.0.1 serves ``--pages`` distinct pages (the corpus's real pages, each made unique
by a comment when the corpus has fewer), listed 100 to a page. Two crawls run through one index with
``SIMHASH_WARC_REVISITS = True`` (the default), two more through another index with it off. For each
crawl the table gives the bytes its WARC files spend (gzip members as on disk) on response-side
records (``response`` and ``revisit``) and on ``metadata`` records, and what the second crawl stores
as a share of the first crawl's response bytes.

Goal: with revisits, the second crawl stores <= 5 % of the first crawl's response bytes (revisits and
metadata only); without, it stores them all again (about 100 %).

Run: python bench/revisits.py [--pages 300] [--keep DIR]   (``--keep``: leave the WARCs in DIR)
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from _corpus import corpus
from warcio.archiveiterator import ArchiveIterator

GOAL = 0.05
PER_LIST = 100

CRAWL = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

start, warc_dir, index, revisits = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "on"

class Site(scrapy.Spider):
    name = "site"
    start_urls = [start]
    allowed_domains = ["127.0.0.1"]

    def parse(self, response):
        if response.url == start or "/list/" in response.url:  # the pages' own links lead off the site
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)

process = CrawlerProcess({
    "ADDONS": {"scrapy_simhash.Addon": 500},
    "SIMHASH_WARC_ENABLED": True,
    "SIMHASH_WARC_DIR": warc_dir,
    "SIMHASH_WARC_REVISITS": revisits,
    "SIMHASH_INDEX": index,
    "SIMHASH_WORKERS": 1,
    "CONCURRENT_REQUESTS": 8,
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "ERROR",
})
crawler = process.create_crawler(Site)
process.crawl(crawler)
process.start()
print(json.dumps({k: v for k, v in crawler.stats.get_stats().items() if k.startswith("simhash/warc/")}))
"""


def site_pages(count: int) -> dict[str, bytes]:
    """``/p/<i>`` -> a distinct HTML page; ``/`` and ``/list/<n>`` link to them, 100 to a list."""
    files = sorted((corpus() / "pages").glob("*/*.html.gz"))
    if not files:
        sys.exit(f"no pages in {corpus() / 'pages'}")
    pages: dict[str, bytes] = {}
    for i in range(count):
        html = gzip.decompress(files[i % len(files)].read_bytes())
        pages[f"/p/{i}"] = html + f"<!-- page {i} -->".encode()  # distinct (the corpus repeats some)
    lists = [f"/list/{n}" for n in range((count + PER_LIST - 1) // PER_LIST)]
    for n, path in enumerate(lists):
        links = "".join(
            f'<a href="/p/{i}">{i}</a>' for i in range(n * PER_LIST, min(count, (n + 1) * PER_LIST))
        )
        pages[path] = f"<html><body>{links}</body></html>".encode()
    pages["/"] = (
        "<html><body>" + "".join(f'<a href="{p}">{p}</a>' for p in lists) + "</body></html>"
    ).encode()
    return pages


@contextmanager
def serve(pages: dict[str, bytes]) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            body = body if body is not None else b"not found"
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


def stored_bytes(warc_dir: Path) -> dict[str, int]:
    """Per record type, the bytes the WARCs of ``warc_dir`` spend (``<type>_bytes``: gzip members as on
    disk; ``<type>_raw``: uncompressed) and the record count; ``response_with_payload``: response
    records with a non-empty body."""
    found: dict[str, int] = {}

    def add(key: str, value: int) -> None:
        found[key] = found.get(key, 0) + value

    for path in sorted(warc_dir.glob("*.warc.gz")):
        data = path.read_bytes()
        with open(path, "rb") as fh:
            records = ArchiveIterator(fh)
            for rec in records:
                kind = rec.rec_type
                has_payload = kind == "response" and bool(rec.content_stream().read(1))
                records.read_to_end(rec)
                offset, length = records.get_record_offset(), records.get_record_length()
                add(f"{kind}_bytes", length)
                add(f"{kind}_raw", len(gzip.decompress(data[offset : offset + length])))
                add(f"{kind}_records", 1)
                add("response_with_payload", int(has_payload))
    return found


def crawl(start: str, warc_dir: Path, index: Path, revisits: bool) -> dict[str, object]:
    script = warc_dir.parent / "crawl.py"
    script.write_text(CRAWL)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMHASH", "SCRAPY"))}
    done = subprocess.run(
        [sys.executable, str(script), start, str(warc_dir), str(index), "on" if revisits else "off"],
        capture_output=True,
        text=True,
        env=env,
        cwd=warc_dir.parent,
    )
    if done.returncode != 0:
        sys.exit(f"the crawl failed:\n{done.stderr[-3000:]}")
    stats = json.loads(done.stdout.strip().splitlines()[-1])
    return {"stats": stats, **stored_bytes(warc_dir)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument(
        "--keep", type=Path, help="write the crawls' WARCs under this directory and keep them"
    )
    args = parser.parse_args()
    pages = site_pages(args.pages)
    root = args.keep or Path(tempfile.mkdtemp(prefix="bench-revisits-"))
    results: dict[str, list[dict[str, object]]] = {}
    try:
        with serve(pages) as start:
            for mode in ("on", "off"):
                index = root / mode / "index"
                runs = []
                for run in ("first", "second"):
                    warc_dir = root / mode / run / "warcs"
                    warc_dir.mkdir(parents=True)
                    runs.append(crawl(start, warc_dir, index, mode == "on"))
                results[mode] = runs
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(f"site: {len(pages)} URLs ({args.pages} pages), {sum(map(len, pages.values()))} payload bytes")
    print(
        "| revisits | crawl | responses with payload | revisit records | response+revisit bytes "
        "| metadata bytes | share on disk | share uncompressed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    shares = {}
    for mode, runs in results.items():
        for run, found in zip(("first", "second"), runs, strict=True):
            share = {}
            for unit in ("bytes", "raw"):
                first_response = int(runs[0].get(f"response_{unit}", 0))
                response_side = int(found.get(f"response_{unit}", 0)) + int(found.get(f"revisit_{unit}", 0))
                stored = response_side + int(found.get(f"metadata_{unit}", 0))
                share[unit] = stored / first_response if first_response else 0.0
                share[unit + "_without_metadata"] = response_side / first_response if first_response else 0.0
            shares[mode, run] = share
            response_side = int(found.get("response_bytes", 0)) + int(found.get("revisit_bytes", 0))
            counts = f"{found.get('response_with_payload', 0)} | {found.get('revisit_records', 0)}"
            sizes = f"{response_side} | {found.get('metadata_bytes', 0)}"
            print(f"| {mode} | {run} | {counts} | {sizes} | {share['bytes']:.2%} | {share['raw']:.2%} |")
    second, without = shares["on", "second"], shares["off", "second"]
    verdict = "met" if second["bytes"] <= GOAL else "NOT met"
    print(
        f"second crawl with revisits stores {second['bytes']:.2%} of the first crawl's response bytes "
        f"on disk ({second['bytes_without_metadata']:.2%} without the metadata records; {second['raw']:.2%} "
        f"uncompressed); without revisits {without['bytes']:.2%}; goal <= {GOAL:.0%} on disk: {verdict}"
    )


if __name__ == "__main__":
    main()
