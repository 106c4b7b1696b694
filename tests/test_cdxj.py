"""``scrapy-simhash cdxj``: CDXJ lines identical to cdxj-indexer's plus the simhash keys, merged into an
existing index byte for byte, and served by pywb itself (replay and CDX API)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.cli import main
from scrapy_simhash.extract.registry import DEFAULT_NAME
from scrapy_simhash.warc.cdxj import CDXJ_KEYS, CdxjLine, SortedWriter, index_lines, merge_index
from scrapy_simhash.warc.records import (
    WARC_FIELDS,
    SimhashFields,
    WarcRecord,
    encode_fields,
    http_head,
    metadata_record,
    request_record,
    response_record,
)
from scrapy_simhash.warc.write.writer import WarcFileWriter

cdxj_indexer = pytest.importorskip("cdxj_indexer.main")

BIN = Path(sys.executable).parent


def _pywb_bin() -> Path | None:
    """pywb's scripts: pywb pins redis==2.10.6, which this project's redis>=5 excludes, so pywb lives in
    a venv of its own, named by SCRAPY_SIMHASH_PYWB_BIN (its bin directory), or beside this Python."""
    for candidate in (os.environ.get("SCRAPY_SIMHASH_PYWB_BIN"), str(BIN)):
        if candidate and (Path(candidate) / "wayback").exists():
            return Path(candidate)
    return None


PYWB = _pywb_bin()
needs_pywb = pytest.mark.skipif(
    PYWB is None,
    reason="pywb not found: python3 -m venv /tmp/pywb-venv && /tmp/pywb-venv/bin/pip install pywb, "
    "then SCRAPY_SIMHASH_PYWB_BIN=/tmp/pywb-venv/bin",
)
SMALL = ["resiliparse/warcfile.warc.gz", "cdxj-indexer/example.warc.gz"]
ARC = "ukwa-webarchive-test-suite/small-arcs-and-warcs/IAH-20080430204825-00000-blackbook-truncated.arc.gz"

_TEXT = " ".join(f"word{n} of the archived NAME article, sentence {n}." for n in range(40))
PAGES = {
    uri: f"<html><head><title>{name}</title></head><body><article><h1>{name} page</h1>"
    f"<p>{_TEXT.replace('NAME', name)}</p></article></body></html>"
    for uri, name in (("https://example.org/a", "alpha"), ("https://example.org/b", "beta"))
}
HASHES = {"https://example.org/a": 0x0123456789ABCDEF, "https://example.org/b": 0x7EDCBA9876543210}


def crawl_warc(path: Path, metadata: bool = True) -> Path:
    """A WARC as the crawl writes it: response, request, then the metadata record Concurrent-To the
    response, one minute later (so a replay index that takes metadata records would see them last)."""
    writer = WarcFileWriter(path)
    for n, (uri, html) in enumerate(PAGES.items()):
        date = f"2026-11-22T09:0{n}:00Z"
        body = html.encode()
        head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html; charset=utf-8")])
        resp = response_record(uri, date, head, body)
        writer.write(resp)
        req = http_head("GET / HTTP/1.1", [("Host", "example.org")])
        writer.write(request_record(uri, date, req, b"", concurrent_to=resp.record_id))
        if not metadata:
            continue
        fields = SimhashFields(simhash=HASHES[uri], tokens=9, extractor="test-extractor/1")
        writer.write(
            metadata_record(uri, fields, concurrent_to=resp.record_id, date=f"2026-11-22T09:0{n}:59Z")
        )
    writer.close()
    return path


def without_keys(text: str) -> str:
    out = []
    for line in text.splitlines(keepends=True):
        urlkey, ts, body = line.split(" ", 2)
        fields = {k: v for k, v in json.loads(body).items() if k not in CDXJ_KEYS}
        out.append(f"{urlkey} {ts} {json.dumps(fields)}\n")
    return "".join(out)


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        status = main(["cdxj", *args])
    finally:
        sys.stdout, sys.stderr = old
    return status, out.getvalue(), err.getvalue()


def reference(*paths: Path) -> str:
    """cdxj-indexer's own sorted output (its CLI, in a subprocess)."""
    return subprocess.run(
        [str(BIN / "cdxj-indexer"), "-s", *map(str, paths)], check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture(scope="module")
def tagged(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Copies of small corpus WARCs and an ARC, each with the sidecar `tag` wrote."""
    base = tmp_path_factory.mktemp("tagged")
    copies = []
    for name in [*SMALL, ARC]:
        target = base / Path(name).name
        shutil.copyfile(corpus / "warcs" / name, target)
        copies.append(target)
    assert main(["tag", "--no-progress", *map(str, copies)]) == 0
    assert all(Path(f"{p}.simhash.warc.gz").is_file() for p in copies)
    return copies


def test_lines_are_cdxj_indexers_plus_keys_from_sidecars(tagged: list[Path]) -> None:
    status, out, err = run_cli(*map(str, tagged))
    assert status == 0, err
    lines = out.splitlines()
    assert lines == sorted(lines)  # sorted as pywb's binary search needs
    assert without_keys(out) == reference(*tagged)
    with_keys = [json.loads(line.split(" ", 2)[2]) for line in lines if '"simhash"' in line]
    # every fingerprint of the sidecars landed on a line: the WARCs' (by record id) and the ARC's (by offset)
    assert len(with_keys) >= 13  # the link-list pages are skipped as the site's template
    assert {f["filename"] for f in with_keys} == {p.name for p in tagged if p.name != "example.warc.gz"}
    for fields in with_keys:
        assert fields["simhash-scheme"] == "simhash-doc/1"
        assert fields["text-extractor"].startswith(f"{DEFAULT_NAME}/")
        assert fields["mime"] == "text/html"
    assert "fingerprints matched no indexed record" not in err


def test_sorting_past_the_memory_buffer_gives_the_same_index(tagged: list[Path]) -> None:
    """Lines go to the sorter file by file; with a tiny buffer it spills sorted runs to temporary
    files and merges them, and the index is the same as sorted in memory."""
    small, whole = io.StringIO(), io.StringIO()
    writer = SortedWriter(small, max_buffer=300)
    assert index_lines(tagged, emit=writer) == []
    writer.close()
    writer = SortedWriter(whole)
    for line in index_lines(tagged):
        writer(line)
    writer.close()
    assert small.getvalue() == whole.getvalue() == run_cli(*map(str, tagged))[1]
    assert without_keys(small.getvalue()) == reference(*tagged)


def test_crawl_metadata_records_give_the_fields(tmp_path: Path) -> None:
    warc = crawl_warc(tmp_path / "crawl.warc.gz")
    status, out, err = run_cli(str(warc))
    assert status == 0, err
    assert without_keys(out) == reference(warc)  # metadata and request records are not indexed
    rows = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines()]
    assert len(rows) == 2
    for row in rows:
        assert row["simhash"] == SimhashFields(HASHES[row["url"]], 1, "x").to_pairs()[0][1]
        assert row["text-extractor"] == "test-extractor/1"


def test_metadata_record_in_the_next_file_after_a_rollover(tmp_path: Path) -> None:
    """The crawl's writer may start a new file between a response and its metadata record."""
    uris = ["https://example.org/1", "https://example.org/2", "https://example.org/3"]
    records = []
    for n, uri in enumerate(uris):
        head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
        resp = response_record(uri, f"2026-11-22T10:00:0{n}Z", head, b"<html><p>page</p></html>")
        fields = SimhashFields(simhash=n + 1, tokens=9, extractor="test-extractor/1")
        records += [resp, metadata_record(uri, fields, concurrent_to=resp.record_id)]
    first, second = WarcFileWriter(tmp_path / "crawl-1.warc.gz"), WarcFileWriter(tmp_path / "crawl-2.warc.gz")
    for record in records[:3]:  # response 1, its metadata, response 2 | metadata 2, response 3, its metadata
        first.write(record)
    for record in records[3:]:
        second.write(record)
    first.close(), second.close()
    status, out, err = run_cli(str(tmp_path))
    assert status == 0, err
    rows = {
        json.loads(line.split(" ", 2)[2])["url"]: json.loads(line.split(" ", 2)[2])
        for line in out.splitlines()
    }
    assert set(rows) == set(uris)
    assert all("simhash" in row for row in rows.values()), rows
    assert "matched no indexed record" not in err
    assert without_keys(out) == reference(tmp_path / "crawl-1.warc.gz", tmp_path / "crawl-2.warc.gz")


def test_minhash_fields_are_carried_when_present(tmp_path: Path) -> None:
    uri = "https://example.org/m"
    resp = response_record(uri, "2026-11-22T10:00:00Z", http_head("HTTP/1.1 200 OK", []), b"<p>x</p>")
    pairs = [
        ("minhash", "AAECAw"),
        ("minhash-scheme", "minhash-doc/1"),
        ("text-extractor", "test-extractor/1"),
        ("other-field", "not copied"),
    ]
    block = WarcRecord(
        "metadata",
        [("WARC-Target-URI", uri), ("WARC-Concurrent-To", resp.record_id), ("Content-Type", WARC_FIELDS)],
        encode_fields(pairs),
    )
    writer = WarcFileWriter(tmp_path / "m.warc.gz")
    writer.write(resp)
    writer.write(block)
    writer.close()
    status, out, err = run_cli(str(tmp_path / "m.warc.gz"))
    assert status == 0, err
    row = json.loads(out.split(" ", 2)[2])
    assert {k: row[k] for k in CDXJ_KEYS if k in row} == {
        "minhash": "AAECAw",
        "minhash-scheme": "minhash-doc/1",
        "text-extractor": "test-extractor/1",
    }


def test_merge_adds_keys_and_leaves_every_other_byte(tagged: list[Path], tmp_path: Path) -> None:
    existing = tmp_path / "index.cdxj"
    foreign = (
        'org,example)/ 20200101000000 {"url": "http://example.org/", "offset": "0", "filename": "x.warc.gz"}'
    )
    text = "!meta 0 {}\r\n" + reference(*tagged) + foreign + "\n" + "org,example)/ 2020 - - legacy cdx\n"
    existing.write_bytes(text.encode())
    out = tmp_path / "merged.cdxj"
    status, _, err = run_cli(*map(str, tagged), "--merge", str(existing), "-o", str(out))
    assert status == 0, err
    merged = out.read_bytes().decode()
    assert merged.count('"simhash"') >= 13
    old_lines, new_lines = text.splitlines(keepends=True), merged.splitlines(keepends=True)
    assert len(old_lines) == len(new_lines)
    for old, new in zip(old_lines, new_lines, strict=True):
        if old == new:
            continue
        # the original JSON up to its closing brace, then only our keys
        assert new.startswith(old.rstrip("\n")[:-1] + ", ")
        added = json.loads(new.split(" ", 2)[2])
        assert set(added) - set(json.loads(old.split(" ", 2)[2])) <= set(CDXJ_KEYS)
    # the result equals what indexing writes, and merging again changes nothing
    assert merged.split("\r\n", 1)[1].split(foreign)[0] == run_cli(*map(str, tagged))[1]
    status, again, err = run_cli(*map(str, tagged), "--merge", str(out))
    assert again == merged and "already had the fields" in err


def test_stale_sidecar_is_not_used(tagged: list[Path], tmp_path: Path) -> None:
    warc = tmp_path / "warcfile.warc.gz"
    shutil.copyfile(tagged[0], warc)
    shutil.copyfile(f"{tagged[0]}.simhash.warc.gz", f"{warc}.simhash.warc.gz")
    with open(warc, "ab") as fh:  # the archive grew after `tag`: offsets no longer trusted
        fh.write(tagged[1].read_bytes())
    status, out, err = run_cli(str(warc))
    assert status == 1
    assert "sidecar not used" in err and '"simhash"' not in out
    assert out == reference(warc)


def test_damaged_input_is_reported_and_others_indexed(tagged: list[Path], tmp_path: Path) -> None:
    """Bytes that are no record after the good ones: the good ones' lines are kept, the failure named."""
    bad = tmp_path / "bad.warc.gz"
    bad.write_bytes(tagged[0].read_bytes() + b"garbage, not a record\r\n" * 50)
    status, out, err = run_cli(str(bad), str(tagged[1]))
    assert status == 1
    size = tagged[0].stat().st_size  # the garbage is named as the range it fills
    assert f"bad.warc.gz @ {size}: " in err and f"bytes {size}-{bad.stat().st_size} not indexed" in err
    assert '"filename": "example.warc.gz"' in out
    good = reference(tagged[0]).replace('"warcfile.warc.gz"', '"bad.warc.gz"')
    assert set(good.splitlines()) <= set(out.splitlines())


# -- damaged archives: each damaged range named, the intact records after it indexed ----------------------

DOLMA = "dolma/sample-0000.warc.gz"  # 48 gzip members: warcinfo, then request and response records


def gzip_members(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each gzip member of an intact per-record gzip file."""
    out, start = [], 0
    while start < len(data):
        decomp = zlib.decompressobj(wbits=31)
        decomp.decompress(data[start:])
        end = len(data) - len(decomp.unused_data)
        out.append((start, end))
        start = end
    return out


def cdxj_command(*args: str) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash cdxj`` as a user runs it: the installed script, in a process of its own."""
    return subprocess.run([str(BIN / "scrapy-simhash"), "cdxj", *args], capture_output=True, text=True)


def test_a_truncated_warc_gz_names_the_cut_and_exits_1(corpus: Path, tmp_path: Path) -> None:
    data = (corpus / "warcs" / DOLMA).read_bytes()
    start, end = gzip_members(data)[20]  # a response record
    cut = tmp_path / "sample.warc.gz"
    cut.write_bytes(data[: start + (end - start) // 2])
    (tmp_path / "intact").mkdir()
    before = tmp_path / "intact" / "sample.warc.gz"  # the same file, ending before the cut member
    before.write_bytes(data[:start])
    run = cdxj_command(str(cut))
    assert run.returncode == 1, run.stderr  # it was 0, with a line for the clipped record and no message
    assert (
        f"{cut} @ {start}: " in run.stderr
        and f"bytes {start}-{len(data[: start + (end - start) // 2])}" in run.stderr
    )
    assert run.stdout == reference(before) and run.stdout.count("\n") == 9


def test_a_damaged_gzip_member_costs_its_record_and_the_rest_is_indexed(corpus: Path, tmp_path: Path) -> None:
    data = bytearray((corpus / "warcs" / DOLMA).read_bytes())
    copy = tmp_path / "intact" / "sample.warc.gz"
    copy.parent.mkdir()
    copy.write_bytes(bytes(data))
    start, end = gzip_members(bytes(data))[10]  # a response record
    data[start + (end - start) // 2] ^= 0x10
    damaged = tmp_path / "sample.warc.gz"
    damaged.write_bytes(bytes(data))
    run = cdxj_command(str(damaged))
    assert run.returncode == 1, run.stderr
    assert f"{damaged} @ {start}: damaged gzip member" in run.stderr and f"bytes {start}-{end}" in run.stderr
    expected = [line for line in reference(copy).splitlines() if f'"offset": "{start}"' not in line]
    assert len(expected) == 24  # every response but the damaged one (it used to stop there: 4 lines)
    assert run.stdout.splitlines() == expected
    computed = cdxj_command("--compute", str(damaged))  # read twice, the damage is named once
    assert computed.returncode == 1 and computed.stderr.count(f"@ {start}:") == 1, computed.stderr
    assert without_keys(computed.stdout).splitlines() == expected


def test_a_plain_warc_cut_inside_a_record_header_is_named(corpus: Path, tmp_path: Path) -> None:
    cut = tmp_path / "example.warc"
    cut.write_bytes((corpus / "warcs" / "warcio" / "example.warc").read_bytes()[:3607])  # header at 3370
    run = cdxj_command(str(cut))
    assert run.returncode == 1, run.stderr
    assert f"{cut} @ 3370: record header cut off" in run.stderr and "bytes 3370-3607" in run.stderr
    assert '"offset": "3370"' not in run.stdout and '"offset": "1197"' in run.stdout


def test_compute_gives_the_lines_tag_sidecars_give(tagged: list[Path], tmp_path: Path) -> None:
    """--compute on bare copies (no sidecar) fingerprints as `tag` did: the same lines, WARC and ARC."""
    bare = []
    for path in tagged:
        shutil.copyfile(path, tmp_path / path.name)
        bare.append(tmp_path / path.name)
    status, computed, err = run_cli("--compute", *map(str, bare))
    assert status == 0, err
    assert "0 sidecars read" in err
    assert computed == run_cli(*map(str, tagged))[1]
    assert computed.count('"simhash"') >= 13


def test_compute_keeps_the_recorded_fingerprint(tmp_path: Path) -> None:
    warc = crawl_warc(tmp_path / "crawl.warc.gz")
    status, out, err = run_cli("--compute", str(warc))
    assert status == 0, err
    rows = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines()]
    assert [r["text-extractor"] for r in rows] == ["test-extractor/1"] * 2
    # the same pages without their metadata records do get a computed fingerprint
    bare = crawl_warc(tmp_path / "bare.warc.gz", metadata=False)
    status, out, err = run_cli("--compute", str(bare))
    assert status == 0, err
    rows = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines()]
    assert len(rows) == 2 and all(r["text-extractor"].startswith(f"{DEFAULT_NAME}/") for r in rows)
    assert {r["simhash"] for r in rows}.isdisjoint(
        SimhashFields(h, 1, "x").to_pairs()[0][1] for h in HASHES.values()
    )


_url = st.from_regex(r"[a-z]{1,6}", fullmatch=True)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_url, st.integers(0, 10**6), st.booleans()),
        min_size=1,
        max_size=30,
        unique_by=lambda t: t[1],
    )
)
def test_merge_only_appends_keys_property(rows: list[tuple[str, int, bool]]) -> None:
    existing = []
    lines = []
    for host, offset, tagged_row in rows:
        fields = {"url": f"http://{host}/", "offset": str(offset), "filename": "f.warc.gz"}
        existing.append(f"{host})/ 20200101000000 {json.dumps(fields)}\n")
        if tagged_row:
            lines.append(CdxjLine(f"{host})/", "20200101000000", {**fields, "simhash": f"h{offset}"}))
    out = io.StringIO()
    merge_index(existing, lines, out)
    merged = out.getvalue().splitlines(keepends=True)
    assert without_keys("".join(merged)) == "".join(existing)
    assert sum('"simhash"' in line for line in merged) == len(lines)


# -- pywb itself ------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextlib.contextmanager
def wayback(root: Path) -> Iterator[str]:
    """pywb's ``wayback`` serving the collections under ``root`` on a free local port; its base URL."""
    assert PYWB is not None
    port = _free_port()
    server = subprocess.Popen(
        [str(PYWB / "wayback"), "-b", "127.0.0.1", "-p", str(port)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None:
                    assert server.stdout is not None
                    pytest.fail("wayback did not start:\n" + server.stdout.read().decode(errors="replace"))
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()


def _collection(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A pywb collection holding the crawl WARC (added by ``wb-manager``): root, WARC, index file."""
    assert PYWB is not None
    warc = crawl_warc(tmp_path / "crawl.warc.gz")
    root = tmp_path / "pywb"
    root.mkdir()
    subprocess.run([str(PYWB / "wb-manager"), "init", "coll"], cwd=root, check=True, capture_output=True)
    subprocess.run(
        [str(PYWB / "wb-manager"), "add", "coll", str(warc)], cwd=root, check=True, capture_output=True
    )
    return (
        root,
        root / "collections" / "coll" / "archive" / warc.name,
        root / "collections/coll/indexes/index.cdxj",
    )


@needs_pywb
def test_pywb_replays_with_our_index_and_serves_the_fields(tmp_path: Path) -> None:
    root, warc, index = _collection(tmp_path)
    assert index.read_text().count("\n") == 2  # pywb's own indexer, too, leaves request and metadata out
    status, ours, err = run_cli(str(warc))
    assert status == 0, err
    index.write_text(ours)
    with wayback(root) as base:
        for uri, html in PAGES.items():
            # replay at a later timestamp still finds the page: nothing shadows it
            status, body = _get(f"{base}/coll/20261231000000id_/{uri}")
            assert status == 200
            assert body == html.encode()
            status, body = _get(f"{base}/coll/cdx?url={uri}&output=json")
            assert status == 200
            rows = [json.loads(line) for line in body.decode().splitlines()]
            assert len(rows) == 1
            assert rows[0]["simhash"] == SimhashFields(HASHES[uri], 1, "x").to_pairs()[0][1]
            assert rows[0]["simhash-scheme"] == "simhash-doc/1"
            assert rows[0]["text-extractor"] == "test-extractor/1"
            assert rows[0]["status"] == "200" and rows[0]["mime"] == "text/html"


@needs_pywb
def test_merge_into_pywbs_own_index(tmp_path: Path) -> None:
    """--merge on the index `wb-manager add` wrote (pywb's indexer: other digest form, mime-detected):
    only our keys are added, and pywb serves the page and the keys from it."""
    root, warc, index = _collection(tmp_path)
    own = index.read_text()
    status, _, err = run_cli(str(warc), "--merge", str(index), "-o", str(index))
    assert status == 0, err
    merged = index.read_text()
    assert merged.count('"simhash"') == 2
    assert without_keys(merged) == "".join(
        f"{line.split(' ', 2)[0]} {line.split(' ', 2)[1]} {json.dumps(json.loads(line.split(' ', 2)[2]))}\n"
        for line in own.splitlines()
    )
    uri, html = next(iter(PAGES.items()))
    with wayback(root) as base:
        assert _get(f"{base}/coll/20261231000000id_/{uri}") == (200, html.encode())
        status, body = _get(f"{base}/coll/cdx?url={uri}&output=json")
    assert status == 200 and json.loads(body)["text-extractor"] == "test-extractor/1"


@needs_pywb
def test_pywb_index_of_all_records_shadows_the_page(tmp_path: Path) -> None:
    """What docs/warc.md warns about: ``cdx-indexer -a`` indexes the metadata record under the page's
    URL one minute later, and pywb then replays the simhash fields instead of the page."""
    root, warc, index = _collection(tmp_path)
    every = subprocess.run(
        [str(PYWB / "cdx-indexer"), "-a", "-j", "-s", str(warc)], check=True, capture_output=True, text=True
    ).stdout
    assert '"mime": "application/warc-fields"' in every
    index.write_text(every)
    uri = next(iter(PAGES))
    with wayback(root) as base:
        status, body = _get(f"{base}/coll/20261231000000id_/{uri}")
    assert status == 200
    assert body.startswith(b"simhash: ") and PAGES[uri].encode() not in body


# -- issue 13/14: the sketch in CDXJ lines ---------------------------------------------------------------


def _sidecar_sketches(sidecar: Path) -> set[str]:
    from warcio.archiveiterator import ArchiveIterator

    from scrapy_simhash.warc.records import parse_fields

    out = set()
    with open(sidecar, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "metadata":
                pairs = parse_fields(rec.content_stream().read())
                if "revisit-resolved-by" in dict(pairs):
                    continue  # a revisit record's: no page of its own (docs/warc.md)
                fields = SimhashFields.from_pairs(pairs)
                assert fields.minhash is not None
                out.add(fields.minhash.to_text())
    return out


def test_verified_tag_sidecars_give_the_minhash_key(tagged: list[Path]) -> None:
    status, out, err = run_cli(*map(str, tagged))
    assert status == 0, err
    rows = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines()]
    keyed = [row for row in rows if "simhash" in row]
    assert len(keyed) >= 13
    assert all(row["minhash-scheme"] == "minhash-doc/1" for row in keyed)
    want = set().union(*(_sidecar_sketches(Path(f"{p}.simhash.warc.gz")) for p in tagged))
    assert {row["minhash"] for row in keyed} == want


def test_sidecars_written_before_sketches_give_the_simhash_keys_alone(
    tagged: list[Path], tmp_path: Path
) -> None:
    copies = []
    for path in tagged:
        shutil.copyfile(path, tmp_path / path.name)
        copies.append(tmp_path / path.name)
    assert main(["tag", "--no-progress", "--mode", "simhash", *map(str, copies)]) == 0
    status, out, err = run_cli(*map(str, copies))
    assert status == 0, err
    assert out.count('"simhash"') >= 13 and '"minhash' not in out
    assert without_keys(out) == without_keys(run_cli(*map(str, tagged))[1])
