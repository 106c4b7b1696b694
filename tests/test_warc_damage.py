"""Damaged archives (issue 11): a damaged gzip member costs its own records only, is reported once,
makes the run exit 1 and leaves the sidecar unfinished, whichever reader backend is used."""

from __future__ import annotations

import functools
import hashlib
import re
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from conftest import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.cli import main
from scrapy_simhash.warc.read.payload import html_page
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
BACKENDS = [
    "warcio",
    pytest.param("fastwarc", marks=pytest.mark.skipif(not fastwarc_available(), reason="no FastWARC")),
]
EXAMPLE = "aut/warc/example.warc.gz"  # 822 records, one gzip member each
CLUEWEB = "resiliparse/clueweb-quirk.warc.gz"  # 30 members: warcinfo and 29 pages
# These tests count the sidecar's records, one a fingerprinted page. ClueWeb09's pages are a shop's product
# pages: the default extractor finds only the shop's template on them and skips them (``boilerplate``),
# trafilatura keeps the same ranking list on each, so every page is fingerprinted with it.
EVERY_PAGE_FINGERPRINTED = ("--extractor", "trafilatura")


def members(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each gzip member."""
    out = []
    start = 0
    while start < len(data):
        decomp = zlib.decompressobj(wbits=31)
        decomp.decompress(data[start:])
        assert decomp.eof
        end = len(data) - len(decomp.unused_data)
        out.append((start, end))
        start = end
    return out


def records(items: list) -> list[tuple]:
    return [
        (
            r.offset,
            r.record_type,
            r.record_id,
            r.target_uri,
            hashlib.sha1(r.block).hexdigest(),
            getattr(r, "clipped", r.truncated),
        )
        for r in items
        if isinstance(r, ArchiveRecord)
    ]


def problems(items: list) -> list[ReadProblem]:
    return [p for p in items if isinstance(p, ReadProblem)]


def flip_bit_in_member(source: Path, target: Path, index: int) -> tuple[int, int]:
    """Flip one bit inside the deflate data of member ``index``; returns the member's (start, end)."""
    data = bytearray(source.read_bytes())
    start, end = members(bytes(data))[index]
    data[start + (end - start) // 2] ^= 0x10
    target.write_bytes(bytes(data))
    return start, end


def break_crc_of_member(source: Path, target: Path, index: int) -> tuple[int, int]:
    data = bytearray(source.read_bytes())
    start, end = members(bytes(data))[index]
    data[end - 8] ^= 0xFF  # the CRC32 trailer
    target.write_bytes(bytes(data))
    return start, end


def tag(inputs: list[Path], out: Path, *extra: str) -> int:
    args = ["tag", *map(str, inputs), "--out", str(out), "--workers", "1", "--no-progress"]
    return main([*args, *EVERY_PAGE_FINGERPRINTED, *extra])


def sidecar_offsets(path: Path) -> list[int]:
    """Source offsets named by the metadata records of a (finished or unfinished) sidecar."""
    offsets = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "metadata":
                block = rec.content_stream().read().decode()
                line = next(x for x in block.splitlines() if x.startswith("source-offset:"))
                offsets.append(int(line.split(":", 1)[1]))
    return offsets


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_flipped_bit_in_the_first_member_costs_only_the_first_record(
    corpus: Path, tmp_path: Path, backend: str
) -> None:
    source = corpus / "warcs" / EXAMPLE
    damaged = tmp_path / "example.warc.gz"
    _, end = flip_bit_in_member(source, damaged, 0)
    assert not sniff(str(damaged)).empty  # it used to be "empty archive", 0 records, exit 0
    items = list(ArchiveReader(backend).read(damaged))
    intact = records(list(ArchiveReader(backend).read(source)))
    assert len(intact) == 822
    assert records(items) == intact[1:]
    [problem] = problems(items)
    assert problem.skipped and problem.offset == 0 and f"next intact member at {end}" in problem.reason


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bad_crc_in_member_11_of_30_costs_that_member_only(
    corpus: Path, tmp_path: Path, backend: str
) -> None:
    source = corpus / "warcs" / CLUEWEB
    damaged = tmp_path / "clueweb.warc.gz"
    start, _ = break_crc_of_member(source, damaged, 10)
    intact = records(list(ArchiveReader(backend).read(source)))
    assert len(members(source.read_bytes())) == len(intact) == 30
    items = list(ArchiveReader(backend).read(damaged))
    assert records(items) == intact[:10] + intact[11:]  # 29 of 30 (it used to read 11, then stop)
    [problem] = problems(items)
    assert problem.skipped and problem.offset == start and "CRC32" in problem.reason


@pytest.mark.parametrize("backend", BACKENDS)
def test_tag_reports_the_damage_once_exits_1_and_leaves_the_sidecar_unfinished(
    corpus: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], backend: str
) -> None:
    damaged = tmp_path / "clueweb.warc.gz"
    start, _ = break_crc_of_member(corpus / "warcs" / CLUEWEB, damaged, 10)
    out_dir = tmp_path / "out"
    assert tag([damaged], out_dir, "--reader", backend, "--index", str(tmp_path / "index")) == 1
    out, err = capfd.readouterr()
    assert "Error -3" not in err  # warcio used to print the zlib error once per read attempt
    assert [line for line in err.splitlines() if line.startswith("skipped: ")] == [
        f"skipped: {damaged} @ {start}: " + err.split(f"skipped: {damaged} @ {start}: ")[1].splitlines()[0]
    ]
    assert "problems: 1 skipped data" in out and "records: 29 read" in out
    sidecar = out_dir / (damaged.name + ".simhash.warc.gz")
    assert not sidecar.exists()
    unfinished = sidecar.with_name(sidecar.name + ".open")
    assert len(sidecar_offsets(unfinished)) == 28  # the 28 pages that were read are tagged all the same

    # a rerun does not take the input for done: it reads it again and says so again
    assert tag([damaged], out_dir, "--reader", backend, "--index", str(tmp_path / "index")) == 1
    out, err = capfd.readouterr()
    assert "0 already complete" in out and "files: 1 processed" in out
    assert f"skipped: {damaged} @ {start}: " in err
    assert not sidecar.exists()


def test_an_intact_input_still_gets_a_finished_sidecar(corpus: Path, tmp_path: Path) -> None:
    assert tag([corpus / "warcs" / CLUEWEB], tmp_path) == 0
    assert (tmp_path / "clueweb-quirk.warc.gz.simhash.warc.gz").exists()
    assert tag([corpus / "warcs" / CLUEWEB], tmp_path) == 0  # and the rerun skips it


@pytest.mark.parametrize("backend", BACKENDS)
def test_flipped_first_member_through_tag(
    corpus: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], backend: str
) -> None:
    # the example crawl's first 60 members (warcinfo, then 4 HTML pages among 59 records): a damaged
    # first member must not make the archive look empty, which needs records after it, not the whole
    # crawl's 94 pages extracted again
    data = (corpus / "warcs" / EXAMPLE).read_bytes()
    source = tmp_path / "first-members.warc.gz"
    source.write_bytes(data[: members(data)[59][1]])
    damaged = tmp_path / "example.warc.gz"
    flip_bit_in_member(source, damaged, 0)
    assert tag([damaged], tmp_path / "out", "--reader", backend) == 1
    out, err = capfd.readouterr()
    assert "empty archive" not in err
    assert "records: 59 read" in out and "problems: 1 skipped data" in out
    assert re.search(r"records: 59 read .*, 4 HTML, [1-9]\d* fingerprinted", out), out
    assert not (tmp_path / "out" / (damaged.name + ".simhash.warc.gz")).exists()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("compressed", [True, False])
def test_a_clipped_last_record_is_flagged_not_fingerprinted_and_exits_1(
    corpus: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str], backend: str, compressed: bool
) -> None:
    source = corpus / "warcs" / CLUEWEB
    data = source.read_bytes()
    start, end = members(data)[-1]
    if compressed:
        clipped = data[: start + (end - start) // 2]  # the last member (an HTML page) cut in half
        last_offset = start
    else:
        plain = zlib.decompressobj(wbits=31)
        text = b""
        rest = data
        while rest:
            plain = zlib.decompressobj(wbits=31)
            text += plain.decompress(rest)
            rest = plain.unused_data
        last_offset = text.rfind(b"WARC/0.18\r\n")
        clipped = text[: len(text) - 2000]
    path = tmp_path / ("clipped.warc.gz" if compressed else "clipped.warc")
    path.write_bytes(clipped)
    items = list(ArchiveReader(backend).read(path))
    last = [r for r in items if isinstance(r, ArchiveRecord)][-1]
    assert last.offset == last_offset and last.truncated and getattr(last, "clipped", False)
    [problem] = problems(items)
    assert problem.skipped and problem.offset == last_offset and "clipped" in problem.reason
    assert len(records(items)) == 30

    assert tag([path], tmp_path / "out", "--reader", backend) == 1
    out, _ = capfd.readouterr()
    assert "problems: 1 skipped data" in out
    offsets = sidecar_offsets(tmp_path / "out" / (path.name + ".simhash.warc.gz.open"))
    assert len(offsets) == 28 and last_offset not in offsets  # every page but the clipped one


# -- both backends agree on every corpus file, damaged ones included ----------------------------------

WARCS = CORPUS / "warcs"
ALL_ARCHIVES = sorted(
    str(p.relative_to(WARCS))
    for p in (WARCS.rglob("*") if WARCS.is_dir() else [])
    if p.is_file() and (".warc" in p.name or ".arc" in p.name)
)


def everything(items: list) -> list[tuple]:
    """Records (all fields, block digest) and problems, in stream order."""
    out: list[tuple] = []
    for item in items:
        if isinstance(item, ReadProblem):
            out.append(("problem", item.offset, item.skipped, item.reason))
        else:
            block = hashlib.sha1(item.block).hexdigest()
            fields = (item.offset, item.record_type, item.record_id, item.target_uri, item.date)
            out.append(("record", *fields, item.content_type, block, item.truncated, item.clipped))
    return out


@needs_fastwarc
@pytest.mark.parametrize("name", ALL_ARCHIVES)
def test_warcio_and_fastwarc_give_the_same_records_and_problems(name: str) -> None:
    path = WARCS / name
    via_warcio = list(ArchiveReader("warcio").read(path))
    via_fastwarc = list(ArchiveReader("fastwarc").read(path))
    if sniff(str(path)).compression in ("lz4", "zstd"):  # warcio cannot read these at all, and says so
        [refusal] = via_warcio
        assert isinstance(refusal, ReadProblem) and "warc-fast" in refusal.reason
        return
    assert everything(via_warcio) == everything(via_fastwarc)
    pages_w = [html_page(r) for r in via_warcio if isinstance(r, ArchiveRecord)]
    pages_f = [html_page(r) for r in via_fastwarc if isinstance(r, ArchiveRecord)]
    assert pages_w == pages_f


def test_the_corpus_comparison_covers_the_damaged_files() -> None:
    for name in [
        "warcio/example-wrong-chunks.warc.gz",
        "webarchive-commons/resource/html/link-extraction-test.warc",
        "copycat/clueweb-09-sample/en0000/00.warc.gz",
        "resiliparse/clipped.warc.gz",
        "gowarc/corrupted-mid-record.warc.gz.open",
        "warcio/example-trunc.warc",
    ]:
        assert name in ALL_ARCHIVES
    assert len(ALL_ARCHIVES) > 60


# -- any damaged byte of a generated archive costs at most its own member -----------------------------


@functools.cache
def _archive(pages: int) -> tuple[list[bytes], list[str]]:
    """Per-record gzip members (built once: record ids and dates differ on every build)."""
    uris = [f"http://example.com/{i}" for i in range(pages)]
    head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
    body = "<html><body>" + " ".join(f"word{n}" for n in range(300)) + "</body></html>"
    records = [response_record(u, warc_date(), head, f"{body}{u}".encode()).to_bytes() for u in uris]
    return [gzip_member(r) for r in records], uris


@needs_fastwarc
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    pages=st.integers(2, 6),
    data=st.data(),
)
def test_a_damaged_byte_costs_at_most_its_own_member(tmp_path: Path, pages: int, data: st.DataObject) -> None:
    members_, uris = _archive(pages)
    victim = data.draw(st.integers(0, pages - 1), label="member")
    position = data.draw(st.integers(0, len(members_[victim]) - 1), label="byte")  # header, data or trailer
    flip = data.draw(st.integers(1, 255), label="xor")
    damaged = bytearray(members_[victim])
    damaged[position] ^= flip
    path = tmp_path / "damaged.warc.gz"
    path.write_bytes(b"".join(members_[:victim]) + bytes(damaged) + b"".join(members_[victim + 1 :]))
    results = {backend: list(ArchiveReader(backend).read(path)) for backend in ("warcio", "fastwarc")}
    assert everything(results["warcio"]) == everything(results["fastwarc"])
    items = results["warcio"]
    read = [r.target_uri for r in items if isinstance(r, ArchiveRecord) and not r.clipped]
    others = [u for i, u in enumerate(uris) if i != victim]
    assert [u for u in read if u != uris[victim]] == others  # every other member's record, in order
    if read != uris:  # the damaged member's record was lost: that is reported, once
        lost = [p for p in problems(items) if p.skipped]
        assert len(lost) == 1 and lost[0].offset == sum(len(m) for m in members_[:victim])


# -- ARC files gzipped per record ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_arc_members_are_parsed_one_by_one(corpus: Path, backend: str) -> None:
    # ARC records here are followed by no blank line: read as one stream, warcio would take each
    # next record's header line for the previous record's end marker and lose every other record
    folder = corpus / "warcs/ukwa-webarchive-test-suite/small-arcs-and-warcs"
    path = folder / "IAH-20080430204825-00000-blackbook-truncated.arc.gz"
    items = list(ArchiveReader(backend).read(path))
    assert len(records(items)) == 8 and problems(items) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_damaged_arc_member_costs_that_record_only(corpus: Path, tmp_path: Path, backend: str) -> None:
    source = corpus / "warcs/aut/arc/example.arc.gz"
    damaged = tmp_path / "example.arc.gz"
    start, _ = flip_bit_in_member(source, damaged, 3)
    intact = records(list(ArchiveReader(backend).read(source)))
    items = list(ArchiveReader(backend).read(damaged))
    assert len(intact) == 299
    assert records(items) == [r for r in intact if r[0] != start]
    [problem] = problems(items)
    assert problem.skipped and problem.offset == start


@pytest.mark.parametrize("backend", BACKENDS)
def test_members_without_closing_blank_lines_lose_nothing(tmp_path: Path, backend: str) -> None:
    # some writers end a record's gzip member without its CRLF CRLF: read member by member (warcio's
    # own gzip reading) nothing was lost, so nothing may be reported lost now
    head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
    data = [response_record(f"http://x/{i}", warc_date(), head, b"<p>hi</p>").to_bytes() for i in range(3)]
    path = tmp_path / "no-blank-lines.warc.gz"
    path.write_bytes(b"".join(gzip_member(record[:-4]) for record in data))
    items = list(ArchiveReader(backend).read(path))
    assert [r[3] for r in records(items)] == ["http://x/0", "http://x/1", "http://x/2"]
    assert [p.skipped for p in problems(items)] == [False, False]


# -- a plain WARC cut inside a record's header ----------------------------------------------------------

SCRIPT = Path(sys.executable).parent / "scrapy-simhash"
WARCIO_EXAMPLE = "warcio/example.warc"  # six records, uncompressed; the fifth (a revisit) starts at 3370


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_record_header_cut_by_the_end_of_the_file_is_reported(
    corpus: Path, tmp_path: Path, backend: str
) -> None:
    cut = tmp_path / "cut.warc"
    cut.write_bytes((corpus / "warcs" / WARCIO_EXAMPLE).read_bytes()[:3607])  # inside the header at 3370
    items = list(ArchiveReader(backend).read(cut))
    assert [r[0] for r in records(items)] == [0, 488, 1197, 2566, 3370]
    assert [r[5] for r in records(items)] == [False] * 4 + [True]  # the last one flagged clipped
    [problem] = problems(items)
    assert problem.skipped and problem.offset == 3370 and "header" in problem.reason


def test_tag_of_a_plain_warc_cut_inside_a_header_exits_1_and_leaves_the_sidecar_open(
    corpus: Path, tmp_path: Path
) -> None:
    cut = tmp_path / "cut.warc"
    cut.write_bytes((corpus / "warcs" / WARCIO_EXAMPLE).read_bytes()[:3607])
    run = subprocess.run(
        [str(SCRIPT), "tag", "--no-progress", "--workers", "1", str(cut)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"skipped: {cut} @ 3370: " in run.stderr
    assert "problems: 1 skipped data" in run.stdout
    assert (tmp_path / "cut.warc.simhash.warc.gz.open").is_file()
    assert not (tmp_path / "cut.warc.simhash.warc.gz").exists()
