"""Shared by the change-kind tests: a local site whose pages change between crawls in known ways, and a
crawl of it in a child process.

Each version of the site has the same four article pages:

- ``/same.html``: byte-identical in every version (``unchanged``);
- ``/ad.html``: the article is the same, the advert and the "generated at" line around it differ
  (``same-text``);
- ``/edit.html``: one sentence of the article is edited per version (``minor``);
- ``/rewrite.html``: a new article in version 2 (``changed``); version 3 repeats version 2's page,
  so a crawl of version 3 finds it ``unchanged`` only if it compares with the *last* capture.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

_SUBJECTS = [
    "The harbour authority",
    "A group of volunteers",
    "The county council",
    "Local fishermen",
    "The school board",
    "Shop owners on the quay",
    "The rowing club",
    "Residents of the old town",
    "The lifeboat crew",
    "A retired engineer",
    "The museum curator",
    "Two students from the college",
]
_ACTIONS = [
    "agreed on a plan to repair the northern breakwater before the winter storms arrive",
    "collected more than four hundred kilos of plastic from the beaches in a single weekend",
    "published a report on the condition of the bridges that cross the estuary",
    "asked for a pedestrian crossing near the primary school on Station Road",
    "restored the wooden pilot boat that had been left to rot behind the boatyard",
    "opened the old customs house to visitors for the first time in thirty years",
    "raised money for a new defibrillator outside the community hall",
    "measured the water quality at nine places along the river every month",
    "proposed a weekly market for growers from the surrounding villages",
    "rebuilt the dry stone wall along the coastal path above the cove",
    "catalogued the photographs that a local family donated last spring",
    "designed a small ferry that runs on batteries charged by the tide",
]


def article(topic: int, sentences: int = 12, edits: dict[int, str] | None = None) -> list[str]:
    """The sentences of an article: ``topic`` chooses which; ``edits`` replaces some by index."""
    text = [
        f"{_SUBJECTS[(topic + i) % len(_SUBJECTS)]} {_ACTIONS[(topic * 5 + i) % len(_ACTIONS)]}, "
        f"according to notes kept since {1990 + topic * 3 + i}."
        for i in range(sentences)
    ]
    for position, sentence in (edits or {}).items():
        text[position] = sentence
    return text


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body>
<header><nav><a href="/">Home</a> | <a href="/news/">News</a> | <a href="/about/">About</a></nav></header>
<aside class="advert">{advert}</aside>
<main><article>
<h1>{title}</h1>
{paragraphs}
</article></main>
<footer><p>Page generated at {generated}. Copyright Harbour Gazette.</p></footer>
</body></html>
"""


def page(title: str, sentences: list[str], advert: str = "Buy a boat", generated: str = "09:00") -> bytes:
    paragraphs = "\n".join(
        "<p>" + " ".join(sentences[i : i + 3]) + "</p>" for i in range(0, len(sentences), 3)
    )
    return _PAGE.format(title=title, paragraphs=paragraphs, advert=advert, generated=generated).encode()


REWRITTEN = [
    "Tickets for the autumn concert series go on sale at the library desk on Monday morning.",
    "This year the orchestra brings three premieres by composers who grew up in the valley.",
    "Children under twelve are admitted free when they come with an adult holding a ticket.",
    "The opening night features a cello sonata that was found in an attic only last year.",
    "Rehearsals are open to the public every Thursday evening in the chapel on Mill Street.",
    "Parking near the chapel is limited, so the organisers recommend the number six bus.",
    "A new lighting rig, paid for by a crowdfunding campaign, will be used for the first time.",
    "The conductor promised shorter speeches and longer encores than in previous seasons.",
    "Season subscribers receive a printed programme with notes written by the musicians.",
    "Wheelchair spaces can be booked by telephone or at the box office during opening hours.",
]

EDIT_2 = "The harbour master said the new pontoon will be finished in the spring, a year late."
EDIT_3 = "A spokesman for the ferry company declined to comment on the timetable for next year."


def version(number: int) -> dict[str, bytes]:
    """The site's pages in version 1, 2 or 3 (see the module docstring)."""
    edits: dict[int, str] = {}
    if number >= 2:
        edits[4] = EDIT_2
    if number >= 3:
        edits[9] = EDIT_3
    rewrite = article(0) if number == 1 else REWRITTEN
    articles = {
        "/same.html": page("Harbour works", article(3)),
        "/ad.html": page(
            "Rowing club",
            article(5),
            advert=f"Sale number {number}: sails half price",
            generated=f"0{number}:15",
        ),
        "/edit.html": page("Council plans", article(9, edits=edits)),
        "/rewrite.html": page("Old town", rewrite),
    }
    links = "".join(f'<li><a href="{path}">{path}</a></li>' for path in articles)
    return {"/": f"<html><body><ul>{links}</ul></body></html>".encode(), **articles}


EXPECTED = {
    2: {
        "/same.html": "unchanged",
        "/ad.html": "same-text",
        "/edit.html": "minor",
        "/rewrite.html": "changed",
    },
    3: {
        "/same.html": "unchanged",
        "/ad.html": "same-text",
        "/edit.html": "minor",
        "/rewrite.html": "unchanged",
    },
}
"""What a crawl of version N finds, against the crawl of version N - 1 through the same index."""


@contextmanager
def changing_site() -> Iterator[dict[str, object]]:
    """The site on 127.0.0.1, serving ``state["pages"]`` (a test sets it to another version), each page
    gzip-compressed (``Content-Encoding: gzip``, the same bytes every time) when ``state["gzip"]``."""
    state: dict[str, object] = {"pages": version(1), "gzip": False}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            pages = state["pages"]
            assert isinstance(pages, dict)
            body = pages.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            body = body if body is not None else b"not found"
            if state["gzip"]:
                body = gzip.compress(body, mtime=0)
                self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        state["url"] = f"http://127.0.0.1:{server.server_port}/"
        yield state
    finally:
        server.shutdown()
        server.server_close()


SPIDER_SCRIPT = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

start, warc_dir, index, out, extra = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]

class Site(scrapy.Spider):
    name = "site"
    start_urls = [start]

    def parse(self, response):
        yield {"url": response.url, "result": response.meta.get("simhash"),
               "record_id": response.meta.get("warc_record_id")}
        if response.url == start:
            for href in response.css("a::attr(href)").getall():
                yield response.follow(href, self.parse)
            for path in self.settings.getlist("TEST_FETCH_AGAIN"):  # the same URL twice in one crawl
                yield response.follow(path, self.parse, dont_filter=True)

settings = {
    "ADDONS": {"scrapy_simhash.Addon": 500},
    "SIMHASH_WARC_ENABLED": True,
    "SIMHASH_WARC_DIR": warc_dir,
    "SIMHASH_WARC_PREFIX": "ch",
    "SIMHASH_INDEX": index,
    "SIMHASH_WORKERS": 0,
    "SIMHASH_MIN_TOKENS": 1,
    "CONCURRENT_REQUESTS": 1,
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "DEBUG",
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


def run_crawl(site: dict[str, object], out: Path, index: str, **settings: object) -> dict[str, object]:
    """One crawl in a child process, from a clean environment: its WARC records, items, stats and log."""
    out.mkdir(parents=True, exist_ok=True)
    script = out / "crawl.py"
    script.write_text(SPIDER_SCRIPT)
    warc_dir = out / "warcs"
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
    items_file = out / "items.jl"
    return {
        "records": records(sorted(warc_dir.glob("*.warc.gz"))),
        "items": [json.loads(line) for line in items_file.read_text().splitlines()]
        if items_file.exists()
        else [],
        "stats": json.loads((out / "stats.json").read_text()),
        "log": proc.stderr,
    }


def records(warcs: list[Path]) -> list[dict[str, object]]:
    """Every record's type, WARC headers, HTTP headers and (metadata records) fields, as warcio reads them."""
    found = []
    for path in warcs:
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh, check_digests=True):
                fields: dict[str, str] = {}
                if rec.rec_type == "metadata":
                    for line in rec.content_stream().read().decode().splitlines():
                        name, _, value = line.partition(": ")
                        fields[name] = value
                http = dict(rec.http_headers.headers) if rec.http_headers is not None else {}
                found.append(
                    {
                        "type": rec.rec_type,
                        "headers": dict(rec.rec_headers.headers),
                        "http": http,
                        "fields": fields,
                    }
                )
    return found


def metadata_by_path(crawl: dict[str, object]) -> dict[str, dict[str, str]]:
    """The metadata record fields of each page, by the URL's path."""
    from urllib.parse import urlsplit

    return {
        urlsplit(str(r["headers"]["WARC-Target-URI"])).path: r["fields"]  # type: ignore[index]
        for r in crawl["records"]  # type: ignore[union-attr]
        if r["type"] == "metadata"
    }
