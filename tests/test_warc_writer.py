"""WARC files we write: valid WARC/1.1 read back by warcio and FastWARC, rollover, names, crash safety."""

from __future__ import annotations

import gzip
import random
import re
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord, fastwarc_available
from scrapy_simhash.warc.records import (
    Duplicate,
    SimhashFields,
    encode_fields,
    http_head,
    metadata_record,
    parse_fields,
    request_record,
    response_record,
    sha1_digest,
    warc_date,
)
from scrapy_simhash.warc.write.writer import RollingWarcWriter, WarcFileWriter, annex_c_name

ANNEX_C = re.compile(
    r"^(?P<prefix>[^-]+(-[^-]+)*)-(?P<ts>\d{17})-(?P<serial>\d{5})-(?P<host>[^-]+)\.warc\.gz$"
)


def _exchange(uri: str, body: bytes) -> tuple:
    date = warc_date()
    head = http_head(
        "HTTP/1.1 200 OK", [("Content-Type", "text/html"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")]
    )
    resp = response_record(uri, date, head, body, ip_address="127.0.0.1")
    req = request_record(
        uri, date, http_head("GET /p?q=1 HTTP/1.1", [("Host", "x")]), b"", concurrent_to=resp.record_id
    )
    dup = Duplicate("<urn:uuid:0000>", "http://o/", "2020-01-01T00:00:00Z", 2)
    meta = metadata_record(
        uri, SimhashFields(0x0123456789ABCDEF, 77, "ex/1", duplicate=dup), concurrent_to=resp.record_id
    )
    return resp, req, meta


def test_records_round_trip_through_warcio_with_valid_digests(tmp_path: Path) -> None:
    writer = RollingWarcWriter(tmp_path, "t", warcinfo_fields=[("software", "test")])
    body = bytes(range(256)) * 4  # binary payload must survive byte for byte
    resp, req, meta = _exchange("http://example.org/p?q=1", body)
    for record in (resp, req, meta):
        writer.write(record)
    [path] = writer.close()
    seen = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests=True):
            payload = rec.content_stream().read()
            assert rec.digest_checker.passed is not False, rec.digest_checker.problems
            seen.append((rec.rec_type, rec.rec_headers, rec.http_headers, payload))
    assert [s[0] for s in seen] == ["warcinfo", "response", "request", "metadata"]
    _, rh, http, payload = seen[1]
    assert payload == body
    assert rh.get_header("WARC-Payload-Digest") == sha1_digest(body)
    assert [v for k, v in http.headers if k == "Set-Cookie"] == ["a=1", "b=2"]
    _, mh, _, block = seen[3]
    assert mh.get_header("WARC-Payload-Digest") is None
    assert mh.get_header("WARC-Concurrent-To") == resp.record_id
    assert mh.get_header("Content-Type") == "application/warc-fields"
    fields = SimhashFields.from_pairs(parse_fields(block))
    assert fields.simhash == 0x0123456789ABCDEF and fields.duplicate.distance == 2
    assert seen[2][1].get_header("WARC-Concurrent-To") == resp.record_id


@pytest.mark.skipif(not fastwarc_available(), reason="FastWARC not installed")
def test_fastwarc_verifies_block_and_payload_digests(tmp_path: Path) -> None:
    from fastwarc.warc import ArchiveIterator as FastIterator

    writer = RollingWarcWriter(tmp_path, "t")
    for record in _exchange("http://example.org/", b"<html>x</html>"):
        writer.write(record)
    [path] = writer.close()
    with open(path, "rb") as fh:
        blocks = [r.verify_block_digest(consume=False) for r in FastIterator(fh, parse_http=False)]
    with open(path, "rb") as fh:
        payloads = [
            r.verify_payload_digest(consume=False)
            for r in FastIterator(fh)
            if r.headers.get("WARC-Payload-Digest") is not None
        ]
    assert blocks == [True] * 4 and payloads == [True, True]


def test_one_gzip_member_per_record(tmp_path: Path) -> None:
    writer = RollingWarcWriter(tmp_path, "t")
    offsets = [writer.write(r)[1] for r in _exchange("http://example.org/", b"<html>x</html>")]
    [path] = writer.close()
    data = path.read_bytes()
    for offset in offsets:  # every record starts a gzip member that decompresses to exactly one record
        d = zlib.decompressobj(wbits=31)
        out = d.decompress(data[offset:])
        assert out.startswith(b"WARC/1.1\r\n") and out.count(b"WARC/1.1\r\n") == 1


def test_rollover_by_size_starts_each_file_with_warcinfo_and_annex_c_names(tmp_path: Path) -> None:
    writer = RollingWarcWriter(tmp_path, "my-crawl", max_size=3000, host="host1")
    body = random.Random(5).randbytes(2500)  # incompressible, so each record is ~2.5 kB on disk
    for i in range(6):
        writer.write(
            response_record(f"http://e/{i}", warc_date(), http_head("HTTP/1.1 200 OK", []), body + bytes([i]))
        )
    files = writer.close()
    assert len(files) >= 3
    serials = []
    for path in files:
        match = ANNEX_C.match(path.name)
        assert match, path.name
        assert match["prefix"] == "my-crawl" and match["host"] == "host1"
        serials.append(int(match["serial"]))
        types = [r.record_type for r in ArchiveReader("warcio").read(path) if isinstance(r, ArchiveRecord)]
        assert types[0] == "warcinfo" and "warcinfo" not in types[1:]
    assert serials == sorted(serials) and len(set(serials)) == len(serials)
    uris = [
        r.target_uri
        for p in files
        for r in ArchiveReader("warcio").read(p)
        if isinstance(r, ArchiveRecord) and r.record_type == "response"
    ]
    assert uris == [f"http://e/{i}" for i in range(6)]


def test_records_are_readable_while_the_file_is_still_open(tmp_path: Path) -> None:
    """Flushed per record: a crash now would lose nothing already written."""
    writer = WarcFileWriter(tmp_path / "a.warc.gz")
    for record in _exchange("http://example.org/", b"<html>x</html>"):
        writer.write(record)
    assert not (tmp_path / "a.warc.gz").exists()
    open_file = tmp_path / "a.warc.gz.open"
    types = [r.record_type for r in ArchiveReader("warcio").read(open_file) if isinstance(r, ArchiveRecord)]
    assert types == ["response", "request", "metadata"]
    writer.close()
    assert (tmp_path / "a.warc.gz").exists() and not open_file.exists()
    assert gzip.decompress((tmp_path / "a.warc.gz").read_bytes()).count(b"WARC/1.1") == 3


def test_annex_c_name_sanitises_the_host() -> None:
    assert ANNEX_C.match(annex_c_name("p", 7, "my host-1.example"))
    assert annex_c_name("p", 7, "h").split("-")[2] == "00007"


@settings(max_examples=60, deadline=None)
@given(
    simhash=st.integers(0, 2**64 - 1),
    tokens=st.integers(0, 10**6),
    extractor=st.text(min_size=1).filter(lambda s: s.strip() == s and " " not in s and s.isprintable()),
    duplicate=st.none()
    | st.builds(
        Duplicate,
        record_id=st.just("<urn:uuid:1>"),
        uri=st.just("http://a/b?c"),
        date=st.just("2024-01-01T00:00:00Z"),
        distance=st.integers(0, 64),
        file=st.none() | st.just("x.warc.gz"),
        offset=st.none() | st.integers(0, 2**40),
    ),
)
def test_simhash_fields_round_trip(
    simhash: int, tokens: int, extractor: str, duplicate: Duplicate | None
) -> None:
    fields = SimhashFields(
        simhash, tokens, extractor, duplicate=duplicate, source_file="a b.arc", source_offset=5
    )
    assert SimhashFields.from_pairs(parse_fields(encode_fields(fields.to_pairs()))) == fields


@given(st.text())
def test_field_values_cannot_inject_lines(value: str) -> None:
    block = encode_fields([("simhash", value)])
    assert len(parse_fields(block)) <= 1
    assert block.count(b"\r\n") == 1


def test_a_writer_holds_a_lock_on_its_open_file_until_it_closes(tmp_path: Path) -> None:
    """What tells a live ``.open`` file from one a killed crawl left (see warc.recover)."""
    from scrapy_simhash.warc.write.writer import try_lock

    writer = WarcFileWriter(tmp_path / "a.warc.gz")
    writer.write(_exchange("http://example.org/", b"<html>x</html>")[0])
    with open(writer.open_path, "rb") as other:
        assert not try_lock(other)
    writer.abandon()  # as a killed process: the lock goes with the file descriptor
    with open(writer.open_path, "rb") as other:
        assert try_lock(other)
