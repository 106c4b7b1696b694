"""Stale ``.warc.gz.open`` files of killed crawls are finished on the next start.

A real crawl is SIGKILLed while it waits for a page, a cut record is appended
to what it left (a kill in the middle of a write), and a second crawl in the
same directory must leave no ``.open`` file behind, with every complete record
kept and the file readable end to end by warcio and FastWARC. Around that, the
recovery on real files: any cut point, zero bytes, damage in the middle, a
live writer in another process, files that are not crawl files.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.warc.read.reader import fastwarc_available
from scrapy_simhash.warc.records import http_head, response_record, warc_date, warcinfo_record
from scrapy_simhash.warc.write.crawl import is_crawl_file
from scrapy_simhash.warc.write.recover import recover_stale
from scrapy_simhash.warc.write.writer import WarcFileWriter, base_warcinfo_fields, gzip_member

CRAWL_INFO = base_warcinfo_fields([("isPartOf", "t"), ("operator-software", "Scrapy/2.13 test")])


def _response(i: int, size: int = 3000) -> object:
    body = (f"<html><body>page {i} " + "word " * size + "</body></html>").encode()
    return response_record(f"http://e/{i}", warc_date(), http_head("HTTP/1.1 200 OK", []), body)


def _killed_file(directory: Path, records: int, info: list[tuple[str, str]] = CRAWL_INFO) -> Path:
    """An ``.open`` file as a killed writer leaves it: its records written, never closed."""
    name = "t-20260101000000000-00000-host.warc.gz"
    writer = WarcFileWriter(directory / name)
    writer.write(warcinfo_record(name, info))
    for i in range(records):
        writer.write(_response(i))
    writer.abandon()  # closes the file (the lock goes with it) and leaves the .open suffix
    return writer.open_path


def _record_ids(path: Path) -> list[str]:
    """Every record read back by warcio with digest checking on (raises on a damaged file)."""
    ids = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests="raise"):
            rec.content_stream().read()
            ids.append(rec.rec_headers.get_header("WARC-Record-ID"))
    return ids


def _fastwarc_ids(path: Path) -> list[str]:
    from fastwarc.warc import ArchiveIterator as FastIterator

    ids = []
    with open(path, "rb") as fh:
        for rec in FastIterator(fh, parse_http=False):
            assert rec.verify_block_digest(consume=False)
            ids.append(rec.headers["WARC-Record-ID"])
    return ids


def test_a_cut_last_record_is_dropped_and_the_file_finished(tmp_path: Path) -> None:
    open_path = _killed_file(tmp_path, 3)
    complete = open_path.read_bytes()
    partial = gzip_member(_response(99).to_bytes())
    open_path.write_bytes(complete + partial[: len(partial) // 2])

    [result] = recover_stale(tmp_path, is_crawl_file)

    final = tmp_path / open_path.name.removesuffix(".open")
    assert (result.action, result.path, result.records) == ("recovered", final, 4)
    assert result.dropped_bytes == len(partial) // 2
    assert not list(tmp_path.glob("*.open"))
    assert final.read_bytes() == complete  # every complete record kept, byte for byte
    assert len(_record_ids(final)) == 4
    if fastwarc_available():
        assert _fastwarc_ids(final) == _record_ids(final)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=1, max_value=10**6), records=st.integers(min_value=0, max_value=3))
def test_any_cut_of_the_record_being_written_keeps_exactly_the_complete_ones(cut: int, records: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        open_path = _killed_file(directory, records)
        complete = open_path.read_bytes()
        member = gzip_member(_response(7).to_bytes())
        cut %= len(member)  # 0 < cut < len: a strict prefix of the member
        cut = cut or 1
        open_path.write_bytes(complete + member[:cut])
        [result] = recover_stale(directory, is_crawl_file)
        assert result.action == "recovered" and result.records == records + 1
        assert result.path is not None and result.path.read_bytes() == complete
        assert len(_record_ids(result.path)) == records + 1


def test_members_across_read_chunks_are_walked_whole(tmp_path: Path) -> None:
    """Incompressible records of 400 kB: members straddle the 1 MB reads of the scan."""
    rng = random.Random(3)
    name = "t-20260101000000000-00000-host.warc.gz"
    writer = WarcFileWriter(tmp_path / name)
    writer.write(warcinfo_record(name, CRAWL_INFO))
    for i in range(6):
        body = rng.randbytes(400_000)
        writer.write(response_record(f"http://e/{i}", warc_date(), http_head("HTTP/1.1 200 OK", []), body))
    writer.abandon()
    complete = writer.open_path.read_bytes()
    assert len(complete) > 2 * (1 << 20)
    last = gzip_member(
        response_record(
            "http://e/cut", warc_date(), http_head("HTTP/1.1 200 OK", []), rng.randbytes(400_000)
        ).to_bytes()
    )
    writer.open_path.write_bytes(complete + last[:300_000])
    [result] = recover_stale(tmp_path, is_crawl_file)
    assert (result.action, result.records, result.dropped_bytes) == ("recovered", 7, 300_000)
    assert result.path.read_bytes() == complete
    assert len(_record_ids(result.path)) == 7


def test_zero_bytes_after_the_last_record_are_cut(tmp_path: Path) -> None:
    open_path = _killed_file(tmp_path, 2)
    complete = open_path.read_bytes()
    open_path.write_bytes(complete + bytes(4096))  # what a machine crash can leave
    [result] = recover_stale(tmp_path, is_crawl_file)
    assert result.action == "recovered" and result.path.read_bytes() == complete


def test_a_file_damaged_in_the_middle_is_left_alone_with_the_reason(tmp_path: Path) -> None:
    open_path = _killed_file(tmp_path, 3)
    data = bytearray(open_path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"x" * 64
    open_path.write_bytes(bytes(data))
    [result] = recover_stale(tmp_path, is_crawl_file)
    assert result.action == "left" and "damaged" in result.reason
    assert open_path.read_bytes() == bytes(data)  # nothing lost by cutting


def test_files_that_are_not_crawl_files_are_not_touched(tmp_path: Path) -> None:
    sidecar = _killed_file(tmp_path, 1, base_warcinfo_fields([("source-file", "x.warc.gz")]))
    sidecar = sidecar.rename(tmp_path / "x.warc.gz.simhash.warc.gz.open")
    other = tmp_path / "heritrix-1.warc.gz.open"
    other.write_bytes(gzip_member(warcinfo_record("h", [("software", "Heritrix/3")]).to_bytes()))
    before = {p: p.read_bytes() for p in (sidecar, other)}
    assert recover_stale(tmp_path, is_crawl_file) == []
    assert {p: p.read_bytes() for p in (sidecar, other)} == before


HOLDER = r"""
import sys
from scrapy_simhash.warc.write.writer import WarcFileWriter
from scrapy_simhash.warc.records import warcinfo_record
from scrapy_simhash.warc.write.writer import base_warcinfo_fields
path = sys.argv[1]
writer = WarcFileWriter(path)
writer.write(warcinfo_record("live", base_warcinfo_fields([("operator-software", "Scrapy/2.13 live")])))
print("ready", flush=True)
sys.stdin.readline()
writer.close()
print("closed", flush=True)
"""


def test_a_file_a_live_writer_holds_in_another_process_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "live-20260101000000000-00000-host.warc.gz"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        open_path = path.with_name(path.name + ".open")
        before = open_path.read_bytes()
        assert recover_stale(tmp_path, is_crawl_file) == []
        assert open_path.read_bytes() == before
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.stdout.readline().strip() == "closed"
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    assert path.exists() and not open_path.exists()


def test_an_old_empty_open_file_is_removed_and_a_new_one_kept(tmp_path: Path) -> None:
    old = tmp_path / "t-20260101000000000-00001-host.warc.gz.open"
    old.touch()
    os.utime(old, (time.time() - 3600, time.time() - 3600))
    new = tmp_path / "t-20260101000000000-00002-host.warc.gz.open"
    new.touch()  # could be a writer between its open() and its lock
    [result] = recover_stale(tmp_path, is_crawl_file)
    assert (result.open_path, result.action) == (old, "removed")
    assert not old.exists() and new.exists()


# -- a real crawl, killed ------------------------------------------------------------------------

SPIDER_SCRIPT = r"""
import json, sys
import scrapy
from scrapy.crawler import CrawlerProcess

start, warc_dir, index_dir, stats_path = sys.argv[1:5]

class Site(scrapy.Spider):
    name = "site"
    start_urls = [start]

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, self.parse)

    def closed(self, reason):
        with open(stats_path, "w") as fh:
            json.dump(self.crawler.stats.get_stats(), fh, default=str)

process = CrawlerProcess({
    "ADDONS": {"scrapy_simhash.Addon": 500},
    "SIMHASH_WARC_ENABLED": True,
    "SIMHASH_WARC_DIR": warc_dir,
    "SIMHASH_WARC_PREFIX": "killed",
    "SIMHASH_INDEX": index_dir,
    "SIMHASH_WORKERS": 0,
    "CONCURRENT_REQUESTS": 1,
    "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",  # /block, linked last, comes last
    "ROBOTSTXT_OBEY": False,
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "WARNING",
})
process.crawl(Site)
process.start()
"""


@pytest.fixture
def site(corpus: Path) -> Iterator[dict[str, object]]:
    files = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:5]
    pages = {f"/p{i}": gzip.decompress(f.read_bytes()) for i, f in enumerate(files)}
    first = "".join(f'<a href="/p{i}">x</a>' for i in range(3)) + '<a href="/block">x</a>'
    pages["/first"] = f"<html><body>{first}</body></html>".encode()
    pages["/second"] = b'<html><body><a href="/p3">x</a><a href="/p4">x</a></body></html>'
    blocked = threading.Event()
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            if self.path == "/block":  # the crawl waits here until the test has killed it
                blocked.set()
                release.wait(60)
                return
            body = pages.get(self.path, b"")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield {"url": f"http://127.0.0.1:{server.server_port}", "blocked": blocked}
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def _crawl_args(tmp_path: Path, start: str, run: str) -> list[str]:
    script = tmp_path / "crawl.py"
    script.write_text(SPIDER_SCRIPT)
    return [
        sys.executable,
        str(script),
        start,
        str(tmp_path / "warcs"),
        str(tmp_path / run),
        str(tmp_path / f"{run}.json"),
    ]


def test_a_crawl_killed_mid_crawl_is_finished_by_the_next_crawl(site: dict, tmp_path: Path) -> None:
    first = subprocess.Popen(
        _crawl_args(tmp_path, site["url"] + "/first", "run1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        # One request at a time: every record of the pages before /block is written by now.
        assert site["blocked"].wait(120), "the crawl never reached /block"
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL
    warcs = tmp_path / "warcs"
    [stale] = list(warcs.glob("*.warc.gz.open"))
    assert not list(warcs.glob("*.warc.gz"))
    complete = stale.read_bytes()
    # and as if the kill had come in the middle of a write: half a record after the last one
    partial = gzip_member(_response(1).to_bytes())
    stale.write_bytes(complete + partial[: len(partial) // 3])

    second = subprocess.run(
        _crawl_args(tmp_path, site["url"] + "/second", "run2"), capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert not list(warcs.glob("*.open")), list(warcs.iterdir())
    recovered = warcs / stale.name.removesuffix(".open")
    assert recovered.read_bytes() == complete
    ids = _record_ids(recovered)
    # warcinfo, then response and request of /first and /p0../p2 (and metadata records of the pages)
    assert len(ids) >= 1 + 2 * 4
    if fastwarc_available():
        assert _fastwarc_ids(recovered) == ids
    for path in warcs.glob("*.warc.gz"):  # and the second crawl's own file
        assert _record_ids(path)
    stats = json.loads((tmp_path / "run2.json").read_text())
    assert stats["simhash/warc/recovered"] == 1
    assert stats["simhash/warc/recovered_records"] == len(ids)
    assert "left open by a crawl that was killed" in second.stderr
