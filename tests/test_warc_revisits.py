"""Existing revisit records: ``tag`` and ``dedupe`` report them as exact duplicates of what they repeat.

The archives are built with warcio: WARC/1.1 and WARC/1.0 revisits, a revisit in a file read before
the file holding its original, revisits resolved by record id, by payload digest (written in hex,
as some writers do) and by target URI + date, one whose original is not in the input, damaged ones
and a server-not-modified one. The commands run as subprocesses from a clean environment, with
both readers.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import urllib.parse
from pathlib import Path

import pytest
from test_cdxj import PYWB, _get, needs_pywb, wayback
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from scrapy_simhash.warc.read.reader import fastwarc_available
from scrapy_simhash.warc.records import parse_fields

PROFILE_11 = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
PROFILE_10 = "http://netpreserve.org/warc/1.0/revisit/identical-payload-digest"
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
READERS = [
    "warcio",
    pytest.param("fastwarc", marks=pytest.mark.skipif(not fastwarc_available(), reason="no FastWARC")),
]

WORDS = [
    "archive",
    "harbour",
    "lantern",
    "meadow",
    "orchard",
    "pebble",
    "quarry",
    "ribbon",
    "saddle",
    "thimble",
    "umbrella",
    "velvet",
    "walnut",
    "yonder",
    "zephyr",
    "anchor",
    "bramble",
    "candle",
    "dagger",
    "ember",
    "falcon",
    "garnet",
    "hollow",
    "island",
    "jasper",
    "kettle",
    "ledger",
    "marble",
    "nectar",
    "oyster",
    "parcel",
    "quiver",
    "raven",
    "spindle",
    "tundra",
]


def _page(seed: int) -> bytes:
    """An article long enough to be fingerprinted, different for every seed."""
    paragraphs = []
    for p in range(6):
        words = [WORDS[(seed * 7 + p * 5 + i * 3) % len(WORDS)] for i in range(40)]
        paragraphs.append(f"<p>Paragraph {p} of story {seed}: {' '.join(words)}.</p>")
    return (
        f"<html><head><title>Story {seed}</title></head><body><article><h1>Story {seed}</h1>"
        f"{''.join(paragraphs)}</article></body></html>"
    ).encode()


def _http(content_type: str) -> StatusAndHeaders:
    return StatusAndHeaders("200 OK", [("Content-Type", content_type)], protocol="HTTP/1.1")


def _response(writer: WARCWriter, uri: str, body: bytes, content_type: str, date: str) -> dict[str, str]:
    record = writer.create_warc_record(
        uri,
        "response",
        payload=io.BytesIO(body),
        http_headers=_http(content_type),
        warc_headers_dict={"WARC-Date": date},
    )
    writer.write_record(record)
    headers = record.rec_headers
    return {
        "id": headers.get_header("WARC-Record-ID"),
        "uri": uri,
        "date": date,
        "digest": headers.get_header("WARC-Payload-Digest"),
    }


def _revisit(writer: WARCWriter, uri: str, date: str, **headers: str) -> str:
    """A revisit record: HTTP headers only, the WARC headers given (by their names with ``_``)."""
    fields = {"WARC-Date": date}
    fields.update({name.replace("_", "-"): value for name, value in headers.items()})
    record = writer.create_warc_record(
        uri,
        "revisit",
        payload=io.BytesIO(b""),
        http_headers=_http("text/html"),
        warc_headers_dict=fields,
    )
    writer.write_record(record)
    return record.rec_headers.get_header("WARC-Record-ID")


@pytest.fixture(scope="module")
def collection(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two archives: ``1-crawl.warc.gz`` (WARC/1.1, the originals and same-file revisits) and
    ``0-again.warc`` (WARC/1.0, read first: revisits of records in the other file)."""
    base = tmp_path_factory.mktemp("revisits")
    ids: dict[str, str] = {}
    with open(base / "1-crawl.warc.gz", "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.1")
        a = _response(writer, "http://example.test/a", _page(1), "text/html", "2024-01-01T10:00:00Z")
        b = _response(writer, "http://example.test/b", _page(2), "text/html", "2024-01-01T10:00:05Z")
        gif = b"GIF89a" + bytes(range(64))
        g = _response(writer, "http://example.test/logo.gif", gif, "image/gif", "2024-01-01T10:00:06Z")
        ids["a-again"] = _revisit(
            writer,
            "http://example.test/a?utm_source=x",
            "2024-01-01T10:01:00Z",
            WARC_Profile=PROFILE_11,
            WARC_Refers_To=a["id"],
            WARC_Refers_To_Target_URI=a["uri"],
            WARC_Refers_To_Date=a["date"],
            WARC_Payload_Digest=a["digest"],
        )
        ids["missing"] = _revisit(
            writer,
            "http://example.test/gone",
            "2024-01-01T10:02:00Z",
            WARC_Profile=PROFILE_11,
            WARC_Refers_To="<urn:uuid:00000000-0000-4000-8000-000000000000>",
            WARC_Refers_To_Target_URI="http://example.test/gone",
            WARC_Refers_To_Date="2023-12-01T00:00:00Z",
            WARC_Payload_Digest="sha1:" + "A" * 32,
        )
        ids["no-reference"] = _revisit(
            writer,
            "http://example.test/broken",
            "2024-01-01T10:03:00Z",
            WARC_Profile=PROFILE_11,
            WARC_Refers_To_Target_URI=a["uri"],
        )
        ids["bad-profile"] = _revisit(
            writer,
            "http://example.test/a",
            "2024-01-01T10:04:00Z",
            WARC_Profile="http://example.test/my-own-profile",
            WARC_Refers_To=a["id"],
            WARC_Payload_Digest=a["digest"],
        )
        ids["not-modified"] = _revisit(
            writer,
            "http://example.test/b",
            "2024-01-01T10:05:00Z",
            WARC_Profile=NOT_MODIFIED,
            WARC_Refers_To=b["id"],
        )
    sha1_hex = hashlib.sha1(gif).hexdigest()
    with open(base / "0-again.warc", "wb") as fh:
        writer = WARCWriter(fh, gzip=False, warc_version="1.0")
        ids["a-next-crawl"] = _revisit(
            writer,
            a["uri"],
            "2024-02-01T10:00:00Z",
            WARC_Profile=PROFILE_10,
            WARC_Refers_To=a["id"],
            WARC_Payload_Digest=a["digest"],
        )
        ids["gif-by-digest"] = _revisit(
            writer,
            g["uri"],
            "2024-02-01T10:00:01Z",
            WARC_Profile=PROFILE_10,
            WARC_Payload_Digest=f"sha1:{sha1_hex}",
        )
        ids["b-by-capture"] = _revisit(
            writer,
            b["uri"],
            "2024-02-01T10:00:02Z",
            WARC_Profile=PROFILE_10,
            WARC_Refers_To="<urn:uuid:11111111-1111-4111-8111-111111111111>",  # not in the input
            WARC_Payload_Digest="sha256:" + "0" * 64,  # another algorithm: no digest matches
            WARC_Refers_To_Target_URI=b["uri"],
            WARC_Refers_To_Date="2024-01-01T10:00:05.000Z",
        )
    return {"dir": base, "a": a, "b": b, "gif": g, "ids": ids}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` in a subprocess with a clean environment (no variable the tests set)."""
    tool = Path(sys.executable).with_name("scrapy-simhash")
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return subprocess.run([str(tool), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


COMMON = ["--workers", "1", "--no-progress"]
SUMMARY = (
    "revisits: 5 identical-payload (4 exact duplicates of records in the input, 1 original not in input), "
    "1 server-not-modified (skipped: no payload to compare), 2 damaged"
)


@pytest.mark.parametrize("reader", READERS)
def test_dedupe_reports_each_revisit_as_an_exact_duplicate_of_what_it_repeats(
    collection: dict, tmp_path: Path, reader: str
) -> None:
    report = tmp_path / "rows.jsonl"
    index = tmp_path / "index"
    done = run_cli(
        "dedupe", str(collection["dir"]), "--report", str(report), "--index", str(index), "--reader", reader,
        *COMMON, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert SUMMARY in done.stdout
    assert "problems: 0 skipped data, 2 notices" in done.stdout
    # page a and its two revisits, page b and one, the image and one; not the revisit of a missing record
    assert "clusters: 3 covering 7 records (4 redundant)" in done.stdout
    assert "neither WARC-Refers-To nor WARC-Payload-Digest" in done.stdout + done.stderr
    assert "unknown WARC-Profile ('http://example.test/my-own-profile')" in done.stdout + done.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    ids, a, b, gif = collection["ids"], collection["a"], collection["b"], collection["gif"]
    by_id = {row["record_id"]: row for row in rows}
    # neither the damaged, the bad-profile nor the server-not-modified revisit is a row
    assert set(by_id) == {
        a["id"], b["id"], gif["id"],
        ids["a-again"], ids["a-next-crawl"], ids["gif-by-digest"], ids["b-by-capture"], ids["missing"],
    }  # fmt: skip
    expected = {
        "a-again": (a, "record-id"),
        "a-next-crawl": (a, "record-id"),  # its file is read first: resolved once every input is read
        "gif-by-digest": (gif, "payload-digest"),  # a hex SHA-1 matches warcio's base32 one
        "b-by-capture": (b, "uri-date"),
    }
    for name, (original, how) in expected.items():
        row = by_id[ids[name]]
        first = by_id[original["id"]]
        assert first["role"] == "original" and first["revisit"] is None
        assert row["cluster"] == first["cluster"] and row["role"] == "duplicate"
        assert (row["distance"], row["similarity"], row["method"]) == (0, 1.0, "revisit")
        assert (row["revisit"], row["revisit_of"]) == (how, original["id"])
        assert row["simhash"] == first["simhash"]
    assert by_id[a["id"]]["simhash"] and by_id[gif["id"]]["simhash"] is None  # an image has no fingerprint
    missing = by_id[ids["missing"]]
    assert missing["cluster"] is None and missing["revisit"] == "original not in input"
    assert missing["revisit_of"] == "<urn:uuid:00000000-0000-4000-8000-000000000000>"
    assert rows[-1] is not None and rows[-1]["record_id"] == ids["missing"]
    # a revisit is never stored as a page of its own: the index holds the two pages
    again = run_cli(
        "dedupe", str(collection["dir"] / "1-crawl.warc.gz"), "--index", str(index), "--report", "-",
        "--reader", reader, *COMMON, cwd=tmp_path,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    from scrapy_simhash.index import open_index

    with open_index(index) as stored:
        assert len(stored) == 2


def _sidecar_fields(path: Path) -> dict[str, dict[str, str]]:
    """The fields of each metadata record, by the record it describes (``WARC-Refers-To``)."""
    out = {}
    with open(path, "rb") as fh:
        for record in ArchiveIterator(fh, check_digests=True):
            if record.rec_type == "metadata":
                out[record.rec_headers.get_header("WARC-Refers-To")] = dict(
                    parse_fields(record.content_stream().read())
                )
    return out


@pytest.mark.parametrize("reader", READERS)
def test_tag_writes_a_revisit_record_for_each_revisit(collection: dict, tmp_path: Path, reader: str) -> None:
    out = tmp_path / "sidecars"
    done = run_cli(
        "tag", str(collection["dir"]), "--out", str(out), "--reader", reader, *COMMON, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert SUMMARY in done.stdout
    ids, a, gif = collection["ids"], collection["a"], collection["gif"]
    crawl = _sidecar_fields(out / "1-crawl.warc.gz.simhash.warc.gz")
    again = _sidecar_fields(out / "0-again.warc.simhash.warc.gz")
    assert set(crawl) == {a["id"], collection["b"]["id"], ids["a-again"], ids["missing"]}
    assert set(again) == {ids["a-next-crawl"], ids["gif-by-digest"], ids["b-by-capture"]}
    page = crawl[a["id"]]
    for fields in (crawl[ids["a-again"]], again[ids["a-next-crawl"]]):
        # the original's fingerprint, an exact duplicate of it, and where it is
        assert fields["simhash"] == page["simhash"]
        assert fields["near-duplicate-of"] == a["id"]
        assert (fields["near-duplicate-distance"], fields["near-duplicate-similarity"]) == ("0", "1.0000")
        assert fields["revisit-of"] == a["id"] and fields["revisit-resolved-by"] == "record-id"
        assert fields["revisit-of-file"] == os.path.relpath(collection["dir"] / "1-crawl.warc.gz", out)
        assert fields["revisit-of-offset"] == "0"
    assert again[ids["a-next-crawl"]]["revisit-profile"] == PROFILE_10
    assert crawl[ids["a-again"]]["revisit-profile"] == PROFILE_11
    image = again[ids["gif-by-digest"]]
    assert "simhash" not in image and image["revisit-of"] == gif["id"]
    assert image["revisit-resolved-by"] == "payload-digest"
    missing = crawl[ids["missing"]]
    assert missing["revisit-resolved-by"] == "original not in input" and "simhash" not in missing
    assert missing["revisit-of-uri"] == "http://example.test/gone"
    # finished sidecars: a second run skips both inputs
    rerun = run_cli(
        "tag", str(collection["dir"]), "--out", str(out), "--reader", reader, *COMMON, cwd=tmp_path
    )
    assert rerun.returncode == 0 and "files: 0 processed, 2 already complete" in rerun.stdout


def test_a_real_webrecorder_warc_with_revisits_before_their_originals(corpus: Path, tmp_path: Path) -> None:
    """``aut/warc/issue-493.warc``: five WARC/1.0 revisits of images, with no WARC-Refers-To, three
    of them before their original in the file."""
    source = corpus / "warcs" / "aut" / "warc" / "issue-493.warc"
    report = tmp_path / "rows.csv"
    done = run_cli("dedupe", str(source), "--report", str(report), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "revisits: 5 identical-payload (5 exact duplicates of records in the input, 0 original" in done.stdout
    )
    import csv

    rows = list(csv.DictReader(report.open()))
    revisits = [row for row in rows if row["method"] == "revisit"]
    assert len(revisits) == 5 and all(row["revisit"] == "payload-digest" for row in revisits)
    originals = {row["cluster"]: row for row in rows if row["role"] == "original"}
    for row in revisits:
        assert originals[row["cluster"]]["uri"] == row["uri"]
        assert originals[row["cluster"]]["record_id"] == row["revisit_of"]
        assert originals[row["cluster"]]["date"] < row["date"]


def test_cdxj_lines_of_revisits_are_pywbs_and_carry_the_originals_fingerprint(
    collection: dict, tmp_path: Path
) -> None:
    """cdxj-indexer's lines for revisits (mime ``warc/revisit``, the payload digest), unchanged; with
    ``tag``'s sidecars, a revisit of a page gains the page's fingerprint."""
    copy = tmp_path / "collection"
    copy.mkdir()
    for name in ("1-crawl.warc.gz", "0-again.warc"):
        (copy / name).write_bytes((collection["dir"] / name).read_bytes())
    assert run_cli("tag", str(copy), *COMMON, cwd=tmp_path).returncode == 0
    index = tmp_path / "index.cdxj"
    done = run_cli(
        "cdxj", str(copy / "1-crawl.warc.gz"), str(copy / "0-again.warc"), "-o", str(index), cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    reference = subprocess.run(
        [str(Path(sys.executable).with_name("cdxj-indexer")), "-s", "1-crawl.warc.gz", "0-again.warc"],
        cwd=copy,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ours = [
        (line.split(" ", 2)[:2], json.loads(line.split(" ", 2)[2])) for line in index.read_text().splitlines()
    ]
    theirs = [(line.split(" ", 2)[:2], json.loads(line.split(" ", 2)[2])) for line in reference.splitlines()]
    extra = ("simhash", "simhash-scheme", "text-extractor", "minhash", "minhash-scheme")
    assert [(key, {k: v for k, v in f.items() if k not in extra}) for key, f in ours] == theirs
    a = collection["a"]
    page = next(f for _, f in ours if f["url"] == a["uri"] and f["mime"] == "text/html")
    revisits = [f for _, f in ours if f["mime"] == "warc/revisit" and f.get("digest") == a["digest"]]
    # the bad-profile revisit names the same digest but is not reported as a duplicate: no fingerprint
    assert sorted(f.get("simhash") is not None for f in revisits) == [False, True, True]
    assert all(f["simhash"] == page["simhash"] for f in revisits if "simhash" in f)


def test_the_report_counts_exact_duplicates_by_revisit(collection: dict, tmp_path: Path) -> None:
    """From ``dedupe`` rows, from ``tag``'s sidecars and from the archives alone: revisits are a count
    of their own, not near-duplicates (a revisit of an image is not a page)."""
    copy = tmp_path / "collection"
    copy.mkdir()
    for name in ("1-crawl.warc.gz", "0-again.warc"):
        (copy / name).write_bytes((collection["dir"] / name).read_bytes())
    raw = tmp_path / "raw"  # the archives alone, as a crawl leaves them: resolved by the report itself
    raw.mkdir()
    for name in ("1-crawl.warc.gz", "0-again.warc"):
        (raw / name).write_bytes((collection["dir"] / name).read_bytes())
    rows = tmp_path / "rows.jsonl"
    assert run_cli("dedupe", str(copy), "--report", str(rows), *COMMON, cwd=tmp_path).returncode == 0
    assert run_cli("tag", str(copy), *COMMON, cwd=tmp_path).returncode == 0
    for source in (rows, copy, raw):
        page = tmp_path / "report.html"
        done = run_cli("report", str(source), "-o", str(page), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        html = page.read_text()
        assert 'id="total-revisits" data-value="4"' in html
        assert 'id="total-revisits-not-in-input" data-value="1"' in html
        assert 'id="total-near-duplicates" data-value="0"' in html


@pytest.mark.skipif(not fastwarc_available(), reason="no FastWARC")
@pytest.mark.parametrize(
    "name", ["aut/warc/issue-493.warc", "aut/warc/example.pdf.warc.gz", "warcio/example.warc.gz"]
)
def test_both_readers_give_the_same_revisit_headers(corpus: Path, name: str) -> None:
    """The headers revisits are resolved by come the same from warcio and FastWARC (plain and gzip)."""
    from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord

    path = corpus / "warcs" / name
    seen = {}
    for backend in ("warcio", "fastwarc"):
        records = [r for r in ArchiveReader(backend).read(path) if isinstance(r, ArchiveRecord)]
        seen[backend] = [(r.offset, r.record_type, r.links) for r in records]
    assert seen["warcio"] == seen["fastwarc"]
    revisits = [links for _, kind, links in seen["warcio"] if kind == "revisit"]
    assert revisits and all(links.profile and links.payload_digest for links in revisits)
    assert all(links.refers_to_uri and links.refers_to_date for links in revisits)


def test_cdxj_compute_gives_revisits_the_keys_the_sidecars_give(collection: dict, tmp_path: Path) -> None:
    copy = tmp_path / "collection"
    copy.mkdir()
    for name in ("1-crawl.warc.gz", "0-again.warc"):
        (copy / name).write_bytes((collection["dir"] / name).read_bytes())
    inputs = [str(copy / "1-crawl.warc.gz"), str(copy / "0-again.warc")]
    computed = run_cli("cdxj", *inputs, "--compute", "-o", str(tmp_path / "computed.cdxj"), cwd=tmp_path)
    assert computed.returncode == 0, computed.stderr
    assert run_cli("tag", *inputs, *COMMON, cwd=tmp_path).returncode == 0
    from_sidecars = run_cli("cdxj", *inputs, "-o", str(tmp_path / "sidecars.cdxj"), cwd=tmp_path)
    assert from_sidecars.returncode == 0, from_sidecars.stderr
    lines = (tmp_path / "computed.cdxj").read_text()
    assert lines == (tmp_path / "sidecars.cdxj").read_text()
    # the two revisits of page a and the one of page b (the gif has no fingerprint)
    assert sum('"warc/revisit"' in line and '"simhash"' in line for line in lines.splitlines()) == 3


@needs_pywb
def test_pywb_replays_the_revisits_with_the_originals_payload_from_our_index(
    collection: dict, tmp_path: Path
) -> None:
    """Our CDXJ lines (with the fingerprints of ``tag``'s sidecars) in a pywb collection: each revisit's
    URL and time replays the original's payload, byte for byte, and the revisit's line carries the
    original's fingerprint."""
    assert PYWB is not None
    root = tmp_path / "pywb"
    root.mkdir()
    subprocess.run([str(PYWB / "wb-manager"), "init", "coll"], cwd=root, check=True, capture_output=True)
    names = ("1-crawl.warc.gz", "0-again.warc")
    archive = root / "collections" / "coll" / "archive"
    subprocess.run(
        [str(PYWB / "wb-manager"), "add", "coll", *(str(collection["dir"] / n) for n in names)],
        cwd=root,
        check=True,
        capture_output=True,
    )
    assert run_cli("tag", *(str(archive / n) for n in names), *COMMON, cwd=tmp_path).returncode == 0
    index = root / "collections" / "coll" / "indexes" / "index.cdxj"
    done = run_cli("cdxj", *(str(archive / n) for n in names), "-o", str(index), cwd=archive)
    assert done.returncode == 0, done.stderr
    a = collection["a"]
    fingerprint = next(
        json.loads(line.split(" ", 2)[2])["simhash"]
        for line in index.read_text().splitlines()
        if f'"url": "{a["uri"]}"' in line and '"text/html"' in line
    )
    with wayback(root) as base:
        for when, uri in (
            ("20240201100000", a["uri"]),
            ("20240101100100", "http://example.test/a?utm_source=x"),
        ):
            status, body = _get(f"{base}/coll/{when}id_/{uri}")
            assert status == 200 and body == _page(1)
            status, body = _get(f"{base}/coll/cdx?url={urllib.parse.quote(uri, safe='')}&output=json")
            lines = [json.loads(line) for line in body.decode().splitlines()]
            revisit = next(line for line in lines if line["timestamp"] == when)
            assert revisit["mime"] == "warc/revisit" and revisit["simhash"] == fingerprint


def test_revisits_inside_a_wacz_are_resolved_across_its_warcs(collection: dict, tmp_path: Path) -> None:
    """The two archives packed in one WACZ (``wacz create``): the same rows as the plain files, named
    ``coll.wacz#archive/…``; ``tag``'s sidecars beside the package name the original's member."""
    plain = tmp_path / "plain"
    plain.mkdir()
    names = ["0-again.warc", "1-crawl.warc.gz"]
    for name in names:
        (plain / name).write_bytes((collection["dir"] / name).read_bytes())
    package = tmp_path / "coll.wacz"
    made = subprocess.run(
        [str(Path(sys.executable).with_name("wacz")), "create", "-o", str(package), *names],
        cwd=plain,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stderr
    rows = {}
    for target, prefix in ((plain, f"{plain}/"), (package, f"{package}#archive/")):
        report = tmp_path / f"{target.name}.jsonl"
        done = run_cli("dedupe", str(target), "--report", str(report), *COMMON, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert SUMMARY in done.stdout
        found = [json.loads(line) for line in report.read_text().splitlines()]
        assert all(row["file"].startswith(prefix) for row in found)
        rows[target.name] = [{**row, "file": row["file"][len(prefix) :]} for row in found]
    assert rows["coll.wacz"] == rows["plain"]
    assert run_cli("tag", str(package), *COMMON, cwd=tmp_path).returncode == 0
    again = _sidecar_fields(tmp_path / "coll.wacz.0-again.warc.simhash.warc.gz")
    revisit = again[collection["ids"]["a-next-crawl"]]
    assert revisit["revisit-of-file"] == "coll.wacz#archive/1-crawl.warc.gz"
    assert revisit["revisit-of-offset"] == "0" and revisit["revisit-resolved-by"] == "record-id"
