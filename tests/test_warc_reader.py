"""Reading real and damaged WARC/ARC files: both backends agree, damage is reported and survived."""

from __future__ import annotations

import gzip
import hashlib
import re
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash.warc.read.payload import (
    HttpMessage,
    dechunk,
    decode_content,
    decoded_body,
    html_page,
    parse_http_response,
)
from scrapy_simhash.warc.read.reader import (
    ArchiveReader,
    ArchiveRecord,
    ReadProblem,
    fastwarc_available,
    sniff,
)
from scrapy_simhash.warc.records import http_head, response_record, warc_date
from scrapy_simhash.warc.write.writer import gzip_member

needs_fastwarc = pytest.mark.skipif(not fastwarc_available(), reason="FastWARC not installed")

WELL_FORMED = [
    "warcio/example.warc.gz",
    "warcio/example.warc",
    "resiliparse/warcfile.warc",
    "resiliparse/warcfile.warc.gz",
    "dolma/sample-0000.warc.gz",
    "aut/warc/issue-514.warc",
    "aut/warc/issue-493.warc",
    "ukwa-webarchive-test-suite/small-arcs-and-warcs/IAH-20080430204825-00000-blackbook-truncated.warc.gz",
    "commoncrawl-whirlwind/whirlwind.warc.gz",
    "webarchive-commons/warc/mutliple-headers.warc",
    "gowarc/good.warc.gz.open",  # one gzip stream for the whole file
]

# file -> what must be reported (by either reader): the damage is named, with an offset
MALFORMED = {
    "aut/arc/badexample.arc.gz": "not followed by blank lines",
    "copycat/cc-arc-sample__small-sample-1213893279526_0.arc": "not followed by blank lines",
    "gowarc/corrupted-mid-record.warc.gz.open": "non-gzip data after the last member",
    "gowarc/corrupted-trailing-bytes.warc.gz.open": "non-gzip data after the last member",
    "webarchive-commons/arc/IAH-20080430204825-00000-blackbook-truncated.arc": "not followed by blank lines",
    "resiliparse/clipped.warc.gz": "record clipped",
    "warcio/example-trunc.warc": "not followed by blank lines",
    "copycat/cc-arc-sample__small-sample-1262850551027_8.arc": "not followed by blank lines",
}


def _summary(items: list) -> list[tuple]:
    return [
        (
            r.offset,
            r.record_type,
            r.record_id,
            r.target_uri,
            r.date,
            r.content_type,
            hashlib.sha1(r.block).hexdigest(),
        )
        for r in items
        if isinstance(r, ArchiveRecord)
    ]


@needs_fastwarc
@pytest.mark.parametrize("name", WELL_FORMED)
def test_warcio_and_fastwarc_read_the_same_records(corpus: Path, name: str) -> None:
    path = corpus / "warcs" / name
    via_warcio = list(ArchiveReader("warcio").read(path))
    via_fastwarc = list(ArchiveReader("fastwarc").read(path))
    assert _summary(via_warcio) == _summary(via_fastwarc)
    assert [p for p in via_warcio if isinstance(p, ReadProblem) and p.skipped] == []
    assert [p for p in via_fastwarc if isinstance(p, ReadProblem) and p.skipped] == []
    pages_w = [html_page(r) for r in via_warcio if isinstance(r, ArchiveRecord)]
    pages_f = [html_page(r) for r in via_fastwarc if isinstance(r, ArchiveRecord)]
    assert pages_w == pages_f


@pytest.mark.parametrize("backend", ["warcio", pytest.param("fastwarc", marks=needs_fastwarc)])
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_each_malformed_file_is_reported_with_offset_and_reading_goes_on(
    corpus: Path, name: str, backend: str
) -> None:
    items = list(ArchiveReader(backend).read(corpus / "warcs" / name))
    problems = [i for i in items if isinstance(i, ReadProblem)]
    assert problems, f"{name}: nothing reported"
    assert all(p.file.endswith(name) and p.reason for p in problems)
    named = [p for p in problems if MALFORMED[name] in p.reason]
    assert named and all(p.offset is not None for p in named)
    assert any(isinstance(i, ArchiveRecord) for i in items), "records around the damage must still be read"


def test_the_whole_corpus_reads_without_an_exception(corpus: Path) -> None:
    files = sorted(
        p for p in (corpus / "warcs").rglob("*") if p.is_file() and (".warc" in p.name or ".arc" in p.name)
    )
    assert len(files) > 60
    for backend in ["warcio", "fastwarc"] if fastwarc_available() else ["warcio"]:
        reader = ArchiveReader(backend)
        for path in files:
            for item in reader.read(path):
                assert isinstance(item, ArchiveRecord | ReadProblem)


def test_copycat_arc_with_a_wrong_filedesc_length_still_yields_every_record(corpus: Path) -> None:
    # warcio alone stops after the first record (the filedesc header declares a wrong length)
    path = corpus / "warcs/copycat/cc-arc-sample__small-sample-1213893279526_0.arc"
    header_lines = re.findall(rb"\n(\S+) \d+\.\d+\.\d+\.\d+ \d{14} \S+ \d+\n", path.read_bytes())
    records = [i for i in ArchiveReader("warcio").read(path) if isinstance(i, ArchiveRecord)]
    assert len(records) > 100
    assert [r.target_uri for r in records] == [u.decode() for u in header_lines]
    assert all(r.record_id is None and r.archive_format == "arc" for r in records)


def test_one_stream_gzip_is_read_with_a_notice_naming_the_fix(corpus: Path) -> None:
    path = corpus / "warcs/warcio/example-bad-non-chunked.warc.gz"
    assert sniff(str(path)).single_stream
    items = list(ArchiveReader("warcio").read(path))
    notices = [i for i in items if isinstance(i, ReadProblem)]
    assert len(notices) == 1 and not notices[0].skipped and "recompress" in notices[0].reason
    plain = [
        r
        for r in ArchiveReader("warcio").read(corpus / "warcs/warcio/example.warc")
        if isinstance(r, ArchiveRecord)
    ]
    got = [r for r in items if isinstance(r, ArchiveRecord)]
    assert [(r.record_id, r.block) for r in got] == [(r.record_id, r.block) for r in plain]


def test_an_empty_gzip_is_a_notice_not_an_error(corpus: Path) -> None:
    [notice] = list(ArchiveReader("warcio").read(corpus / "warcs/gowarc/empty.warc.gz.open"))
    assert isinstance(notice, ReadProblem) and not notice.skipped and "empty archive" in notice.reason


def test_lz4_without_fastwarc_is_refused_with_the_fix(corpus: Path) -> None:
    [problem] = list(ArchiveReader("warcio").read(corpus / "warcs/resiliparse/warcfile.warc.lz4"))
    assert "warc-fast" in problem.reason and problem.skipped


def _three_records(uris: list[str]) -> list[bytes]:
    head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
    return [response_record(u, warc_date(), head, f"<html>{u}</html>".encode()).to_bytes() for u in uris]


@pytest.mark.parametrize("backend", ["warcio", pytest.param("fastwarc", marks=needs_fastwarc)])
def test_reading_resumes_at_the_next_gzip_member_after_damage(tmp_path: Path, backend: str) -> None:
    members = [gzip_member(r) for r in _three_records(["http://a/", "http://b/", "http://c/"])]
    damaged = bytearray(members[1])
    damaged[20:40] = b"\x00" * 20  # the deflate data of the middle record
    path = tmp_path / "damaged.warc.gz"
    path.write_bytes(members[0] + bytes(damaged) + members[2])
    items = list(ArchiveReader(backend).read(path))
    uris = [i.target_uri for i in items if isinstance(i, ArchiveRecord)]
    assert uris[0] == "http://a/" and uris[-1] == "http://c/" and "http://b/" not in uris
    problems = [i for i in items if isinstance(i, ReadProblem) and i.skipped]
    assert problems and problems[0].offset == len(members[0])
    offsets = [i.offset for i in items if isinstance(i, ArchiveRecord)]
    assert offsets[-1] == len(members[0]) + len(members[1])


@pytest.mark.parametrize("backend", ["warcio", pytest.param("fastwarc", marks=needs_fastwarc)])
def test_garbage_between_uncompressed_records_is_skipped(tmp_path: Path, backend: str) -> None:
    a, b = _three_records(["http://a/", "http://b/"])
    path = tmp_path / "garbage.warc"
    path.write_bytes(a + b"this is not a record\r\n\r\n" + b)
    items = list(ArchiveReader(backend).read(path))
    assert [i.target_uri for i in items if isinstance(i, ArchiveRecord)] == ["http://a/", "http://b/"]
    assert any(isinstance(i, ReadProblem) and i.skipped for i in items)


def test_offsets_point_at_the_records(corpus: Path) -> None:
    path = corpus / "warcs/warcio/example.warc.gz"
    data = path.read_bytes()
    for record in ArchiveReader("warcio").read(path):
        assert isinstance(record, ArchiveRecord)
        assert zlib.decompressobj(wbits=31).decompress(data[record.offset :]).startswith(b"WARC/1.0")


# -- payload ---------------------------------------------------------------------------------------


def test_http_parsing_is_lenient_about_old_header_syntax() -> None:
    msg = parse_http_response(
        b"HTTP/1.1 200 OK\nServer:nginx\nContent-Type:text/html\nX-A: 1\n  folded\n\n<p>"
    )
    assert msg == HttpMessage(
        200, [("Server", "nginx"), ("Content-Type", "text/html"), ("X-A", "1 folded")], b"<p>"
    )
    assert parse_http_response(b"<html>no status line") is None


@given(st.binary(max_size=3000), st.integers(1, 500))
def test_dechunk_inverts_chunked_coding(body: bytes, size: int) -> None:
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    encoded = b"".join(f"{len(c):x}\r\n".encode() + c + b"\r\n" for c in chunks) + b"0\r\n\r\n"
    assert dechunk(encoded) == body


def test_content_decoding_and_its_fallback() -> None:
    html = b"<html><body>" + b"word " * 50 + b"</body></html>"
    assert decode_content(gzip.compress(html), "gzip") == html
    assert decode_content(zlib.compress(html), "deflate") == html
    assert decode_content(html, "gzip") == html  # header lies: bytes passed on unchanged
    message = HttpMessage(
        200,
        [("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")],
        b"not-chunked-" + gzip.compress(html),
    )
    assert decoded_body(message).startswith(b"not-chunked-")


def _record(
    record_type: str, block: bytes, content_type: str = "application/http;msgtype=response"
) -> ArchiveRecord:
    return ArchiveRecord("f", 0, record_type, "<urn:x>", "http://x/", None, content_type, block)


def test_html_page_selects_2xx_html_responses_and_html_resources() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=ISO-8859-1\r\n\r\n<html>x</html>"
    page = html_page(_record("response", ok))
    assert page is not None and page.body == b"<html>x</html>" and page.encoding == "cp1252"
    assert html_page(_record("response", ok.replace(b"200 OK", b"404 Not Found"))) is None
    assert html_page(_record("response", ok.replace(b"text/html", b"image/png"))) is None
    assert html_page(_record("revisit", ok)) is None
    assert html_page(_record("resource", b"<html>r</html>", "text/html")).body == b"<html>r</html>"
    # non-standard writers: a response record without HTTP headers, typed by the record
    assert html_page(_record("response", b"<html>w</html>", "text/html")).body == b"<html>w</html>"
