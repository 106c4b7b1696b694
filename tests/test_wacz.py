"""WACZ packages as input: the WARCs inside are read in place, wherever WARCs are read.

On the real packages of the corpus (py-wacz's examples: valid, signed, and one whose signature
does not verify: all read the same, the signature is not ours to judge) and on larger packages
built here from corpus WARCs with the reference tool (``wacz create``).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest
from conftest import CORPUS
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.warc.read.inputs import plan_inputs
from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord, ReadProblem, fastwarc_available
from scrapy_simhash.warc.read.wacz import archive_size, expand_archive, open_archive
from scrapy_simhash.warc.records import SimhashFields, parse_fields

PACKAGES = CORPUS / "warcs" / "py-wacz"
CORPUS_PACKAGES = ["valid_example_2.wacz", "valid_signed_example_1.wacz", "invalid_signed_example_1.wacz"]
BACKENDS = [
    "warcio",
    pytest.param("fastwarc", marks=pytest.mark.skipif(not fastwarc_available(), reason="no FastWARC")),
]
BIN = Path(sys.executable).parent
EXAMPLE = CORPUS / "warcs" / "aut" / "warc" / "example.warc.gz"  # 3 clusters of real near-duplicates


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` in a subprocess with a clean environment (no variable the tests set)."""
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG", "PYTHONPATH") if name in os.environ}
    return subprocess.run(
        [str(BIN / "scrapy-simhash"), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def member_of(package: Path) -> str:
    [name] = [n for n in zipfile.ZipFile(package).namelist() if n.startswith("archive/")]
    return name


def unpacked(package: Path, target: Path) -> Path:
    """The package's WARC extracted (for comparison only: the tools never extract)."""
    name = member_of(package)
    out = target / Path(name).name
    out.write_bytes(zipfile.ZipFile(package).read(name))
    return out


def records(items: list) -> list[tuple]:
    return [
        (r.offset, r.record_type, r.record_id, r.target_uri, r.date, hashlib.sha1(r.block).hexdigest())
        for r in items
        if isinstance(r, ArchiveRecord)
    ]


def own_index(package: Path) -> list[dict]:
    """The package's own CDXJ index (``indexes/index.cdx.gz``, written by py-wacz)."""
    text = gzip.decompress(zipfile.ZipFile(package).read("indexes/index.cdx.gz")).decode()
    return [json.loads(line.split(" ", 2)[2]) for line in text.splitlines() if line.strip()]


def sidecar_fields(path: Path) -> list[SimhashFields]:
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "metadata":
                out.append(SimhashFields.from_pairs(parse_fields(rec.content_stream().read())))
    return out


# -- reading ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CORPUS_PACKAGES)
def test_a_corpus_package_reads_as_its_warc_with_offsets_inside_it(
    name: str, backend: str, tmp_path: Path
) -> None:
    package = PACKAGES / name
    [where] = expand_archive(package)
    assert where == f"{package}#{member_of(package)}"
    plain = unpacked(package, tmp_path)
    inside = list(ArchiveReader(backend).read(where))
    assert not [i for i in inside if isinstance(i, ReadProblem)]
    assert records(inside) == records(list(ArchiveReader(backend).read(plain)))
    assert {r.file for r in inside} == {where}
    assert archive_size(where) == plain.stat().st_size
    # the offsets are the ones the package's own index gives for its records
    offsets = {r.offset for r in inside if isinstance(r, ArchiveRecord)}
    assert {int(line["offset"]) for line in own_index(package)} <= offsets


def test_a_member_compressed_in_the_zip_is_read_too(tmp_path: Path) -> None:
    """Not what the WACZ spec asks for (members are stored), but a zip tool may do it."""
    package = PACKAGES / "valid_signed_example_1.wacz"
    plain = unpacked(package, tmp_path)
    deflated = tmp_path / "deflated.wacz"
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as out:
        out.write(plain, "archive/" + plain.name)
    [where] = expand_archive(deflated)
    assert records(list(ArchiveReader("warcio").read(where))) == records(
        list(ArchiveReader("warcio").read(plain))
    )
    with open_archive(where) as fh:
        fh.seek(100)
        assert fh.read(50) == plain.read_bytes()[100:150]


def test_a_location_names_one_warc_of_a_package_as_input(tmp_path: Path) -> None:
    package = tmp_path / "c.wacz"
    shutil.copyfile(PACKAGES / "valid_example_2.wacz", package)
    [entry] = plan_inputs([f"{package}#archive/example-collection.warc"])
    assert str(entry.path) == f"{package}#archive/example-collection.warc"
    assert entry.sidecar == tmp_path / "c.wacz.example-collection.warc.simhash.warc.gz"
    with pytest.raises(ValueError, match="no such file"):
        plan_inputs([f"{package}#archive/nothing.warc"])


# -- tag, dedupe, cdxj, report on the corpus packages ----------------------------------------------------


@pytest.fixture(scope="module")
def tagged(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``tag DIR --index`` over copies of the three corpus packages (example.com: few words)."""
    base = tmp_path_factory.mktemp("packages")
    folder = base / "in"
    folder.mkdir()
    for name in CORPUS_PACKAGES:
        shutil.copyfile(PACKAGES / name, folder / name)
    digests = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir()}
    run = run_cli(
        "tag",
        str(folder),
        "--index",
        str(base / "ix"),
        "--workers",
        "1",
        "--no-progress",
        "--min-tokens",
        "5",
    )
    return {"folder": folder, "digests": digests, "run": run, "base": base}


def test_tag_writes_a_sidecar_per_warc_beside_the_package_and_never_rewrites_it(tagged: dict) -> None:
    run, folder = tagged["run"], tagged["folder"]
    assert run.returncode == 0, run.stderr
    assert "files: 3 processed" in run.stdout and "2 near-duplicates" in run.stdout
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.glob("*.wacz")} == tagged[
        "digests"
    ]
    first = {}
    for name in CORPUS_PACKAGES:
        member = member_of(PACKAGES / name)
        sidecar = folder / f"{name}.{Path(member).name}.simhash.warc.gz"
        [fields] = sidecar_fields(sidecar)  # one HTML page in each package
        assert fields.source_file == f"{name}#{member}"  # relative to the sidecar, as for a plain WARC
        responses = [line for line in own_index(PACKAGES / name) if line["status"] == "200"]
        assert [fields.source_offset] == [int(line["offset"]) for line in responses]
        first[name] = fields
    # the earliest input's page is the original; the others name it inside its package
    original = first["invalid_signed_example_1.wacz"]
    assert original.duplicate is None
    for name in ("valid_example_2.wacz", "valid_signed_example_1.wacz"):
        duplicate = first[name].duplicate
        assert duplicate is not None
        assert (
            duplicate.file
            == f"invalid_signed_example_1.wacz#{member_of(PACKAGES / original.source_file.split('#')[0])}"
        )
        assert duplicate.offset == original.source_offset
    again = run_cli("tag", str(folder), "--workers", "1", "--no-progress", "--min-tokens", "5")
    assert again.returncode == 0 and "files: 0 processed, 3 already complete" in again.stdout


def test_cdxj_names_records_inside_the_package_with_the_sidecars_fingerprints(tagged: dict) -> None:
    run = subprocess.run(
        [str(BIN / "scrapy-simhash"), "cdxj", str(tagged["folder"])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = [line.split(" ", 2) for line in run.stdout.splitlines()]
    assert "3 sidecars read" in run.stderr
    for name in CORPUS_PACKAGES:
        ours = [
            (key, ts, json.loads(rest))
            for key, ts, rest in lines
            if json.loads(rest)["filename"].startswith(name)
        ]
        assert {f["filename"] for _, _, f in ours} == {f"{name}#{member_of(PACKAGES / name)}"}
        # the same records at the same offsets as the package's own index says
        keep = ("url", "mime", "status", "digest", "length", "offset")
        assert sorted(tuple(f[k] for k in keep) for _, _, f in ours) == sorted(
            tuple(line[k] for k in keep) for line in own_index(PACKAGES / name)
        )
        assert [
            f["simhash"] for _, _, f in ours if f["status"] == "200"
        ]  # from the sidecar beside the package


def test_dedupe_and_report_over_the_corpus_packages(tagged: dict) -> None:
    rows_path = tagged["base"] / "rows.jsonl"
    run = run_cli(
        "dedupe", str(tagged["folder"]), "--report", str(rows_path), "--workers", "1", "--no-progress",
        "--min-tokens", "5",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in rows_path.read_text().splitlines()]
    assert len(rows) == 3 and {r["cluster"] for r in rows} == {0}
    assert all(re.fullmatch(r".+\.wacz#archive/.+\.warc(\.gz)?", r["file"]) for r in rows)
    html = tagged["base"] / "report.html"
    report = run_cli("report", str(rows_path), "-o", str(html))
    assert report.returncode == 0, report.stderr
    payload = json.loads(re.search(r'id="report-data">(.*?)</script>', html.read_text(), re.S).group(1))
    assert payload["diffs"] and all(
        d["reason"] is None and "illustrative examples" in d["left"] for d in payload["diffs"]
    )
    # the package itself, and the sidecars beside it, are report inputs too
    from_sidecars = run_cli("report", str(tagged["folder"]), "-o", str(tagged["base"] / "r2.html"))
    assert from_sidecars.returncode == 0, from_sidecars.stderr
    assert "1 clusters, 2 near-duplicates" in from_sidecars.stderr
    diffs = json.loads(
        re.search(r'id="report-data">(.*?)</script>', (tagged["base"] / "r2.html").read_text(), re.S).group(1)
    )["diffs"]
    assert diffs and all(d["reason"] is None and d["left"] for d in diffs)  # found through source-file


# -- larger packages built with the reference tool -----------------------------------------------------


@pytest.fixture(scope="module")
def built(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Corpus WARCs (aut's crawl, and a planted one-sentence edit across two files) as plain files and
    as one WACZ made by ``wacz create``; ``dedupe`` over both."""
    from verified_support import edit_inputs

    base = tmp_path_factory.mktemp("built")
    plain = base / "plain"
    edit_inputs(corpus, plain)
    shutil.copyfile(EXAMPLE, plain / "example.warc.gz")
    names = sorted(p.name for p in plain.iterdir())
    package = base / "pack.wacz"
    made = subprocess.run(
        [str(BIN / "wacz"), "create", "-o", str(package), *names], cwd=plain, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    runs = {}
    for kind, target in (("plain", plain), ("wacz", package)):
        report = base / f"{kind}.jsonl"
        run = run_cli("dedupe", str(target), "--report", str(report), "--workers", "2", "--no-progress")
        assert run.returncode == 0, run.stderr
        runs[f"{kind}_rows"] = [json.loads(line) for line in report.read_text().splitlines()]
    return {"base": base, "plain": plain, "package": package, "names": names, **runs}


def test_the_package_holds_the_warcs_stored(built: dict) -> None:
    infos = {i.filename: i for i in zipfile.ZipFile(built["package"]).infolist()}
    assert [n for n in sorted(infos) if n.startswith("archive/")] == [f"archive/{n}" for n in built["names"]]
    assert all(infos[f"archive/{n}"].compress_type == zipfile.ZIP_STORED for n in built["names"])


def test_dedupe_over_a_wacz_gives_the_clusters_of_the_unpacked_warcs(built: dict) -> None:
    def comparable(rows: list[dict], prefix: str) -> list[tuple]:
        out = []
        for row in rows:
            assert row["file"].startswith(prefix), row["file"]
            out.append((row["cluster"], row["role"], row["record_id"], row["uri"], row["file"][len(prefix) :],
                        row["offset"], row["simhash"], row["distance"], row["similarity"]))  # fmt: skip
        return out

    plain = comparable(built["plain_rows"], str(built["plain"]) + "/")
    packed = comparable(built["wacz_rows"], f"{built['package']}#archive/")
    assert packed == plain
    clusters = {c for c, *_ in plain}
    assert len(clusters) >= 4  # aut's three, and the one-sentence edit across a.warc.gz and b.warc.gz
    edit = [r for r in built["wacz_rows"] if r["uri"] in ("http://a/orig", "http://b/edit")]
    assert len(edit) == 2 and edit[0]["cluster"] == edit[1]["cluster"]


# -- damage -----------------------------------------------------------------------------------------


def stored_package(path: Path, members: dict[str, bytes]) -> Path:
    """A minimal WACZ (stored members and a datapackage.json), as a browser extension would write one."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
        for name, data in members.items():
            out.writestr(name, data)
        out.writestr("datapackage.json", json.dumps({"profile": "data-package", "wacz_version": "1.1.1"}))
    return path


def gzip_member_starts(data: bytes) -> list[int]:
    starts, start = [], 0
    while start < len(data):
        starts.append(start)
        decomp = zlib.decompressobj(wbits=31)
        decomp.decompress(data[start:])
        start = len(data) - len(decomp.unused_data)
    return starts


@pytest.mark.parametrize("backend", BACKENDS)
def test_damage_inside_a_member_is_reported_as_for_the_plain_warc(
    corpus: Path, tmp_path: Path, backend: str
) -> None:
    data = bytearray((corpus / "warcs" / "resiliparse" / "clueweb-quirk.warc.gz").read_bytes())
    starts = gzip_member_starts(bytes(data))
    data[(starts[10] + starts[11]) // 2] ^= 0x10  # a flipped bit in member 11 of 30
    plain = tmp_path / "plain" / "crawl.warc.gz"
    plain.parent.mkdir()
    plain.write_bytes(bytes(data))
    package = stored_package(tmp_path / "c.wacz", {"archive/crawl.warc.gz": bytes(data)})

    def tag(target: Path) -> tuple[int, list[str], str]:
        # trafilatura: every ClueWeb09 page is fingerprinted (the default skips the shop's pages as
        # boilerplate), so the unfinished sidecar names each page read (tests/test_warc_damage.py)
        args = ("--workers", "1", "--no-progress", "--reader", backend, "--extractor", "trafilatura")
        run = run_cli("tag", str(target), *args)
        skipped = [line for line in run.stderr.splitlines() if line.startswith("skipped: ")]
        return run.returncode, skipped, run.stdout

    plain_status, plain_skipped, plain_out = tag(plain)
    status, skipped, out = tag(package)
    assert plain_status == status == 1
    assert len(plain_skipped) == 1 and f"@ {starts[10]}: damaged gzip member" in plain_skipped[0]
    assert skipped == [line.replace(str(plain), f"{package}#archive/crawl.warc.gz") for line in plain_skipped]
    assert "records: 29 read" in plain_out and "records: 29 read" in out
    # the sidecar stays unfinished (the next run reads the member again), with the pages that were read
    unfinished = tmp_path / "c.wacz.crawl.warc.gz.simhash.warc.gz.open"
    offsets = [f.source_offset for f in sidecar_fields(unfinished)]
    assert offsets == [
        f.source_offset for f in sidecar_fields(plain.with_name("crawl.warc.gz.simhash.warc.gz.open"))
    ]
    assert offsets and starts[10] not in offsets


def test_a_broken_zip_is_an_error_for_that_file_and_the_run_goes_on(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    good = PACKAGES / "valid_signed_example_1.wacz"
    shutil.copyfile(good, folder / "b-good.wacz")
    (folder / "a-cut.wacz").write_bytes(good.read_bytes()[: good.stat().st_size // 2])  # a copy cut short
    (folder / "c-not-a-zip.wacz").write_bytes(b"WARC/1.1\r\n" + b"x" * 200)
    run = run_cli("dedupe", str(folder), "--workers", "1", "--no-progress", "--min-tokens", "5")
    assert run.returncode == 1, run.stderr
    for broken in ("a-cut.wacz", "c-not-a-zip.wacz"):
        assert re.search(
            rf"skipped: {re.escape(str(folder / broken))}: .*not a readable WACZ \(zip\) file", run.stderr
        )
    assert "files: 1 processed" in run.stderr and "records: 4 read" in run.stderr
    assert "problems: 2 skipped data" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_package_without_warcs_is_said(tmp_path: Path) -> None:
    empty = stored_package(tmp_path / "empty.wacz", {"pages/pages.jsonl": b'{"format": "json-pages-1.0"}\n'})
    run = run_cli("tag", str(empty), "--no-progress")
    assert run.returncode == 1
    assert f"skipped: {empty}: a WACZ without WARC files in its archive/ folder" in run.stderr


def test_a_member_opens_as_a_seekable_stream_of_its_own_bytes() -> None:
    """Positions are offsets inside the member; its bytes are read from the zip file itself."""
    package = PACKAGES / "valid_example_2.wacz"
    [where] = expand_archive(package)
    data = zipfile.ZipFile(package).read(member_of(package))
    with open_archive(where) as fh:
        assert fh.seek(0, io.SEEK_END) == len(data)
        fh.seek(845)
        assert fh.tell() == 845 and fh.read(8) == data[845:853]
        fh.seek(0)
        assert fh.read() == data
        assert fh.read(10) == b""  # the member ends where its bytes end, not at the zip's end


def test_a_damaged_zip_entry_is_a_problem_of_that_warc_only(tmp_path: Path) -> None:
    """The zip's directory reads, but one member's local header is damaged: that WARC cannot be opened
    (one skipped problem naming it), the other WARC of the package is read."""
    warc = unpacked(PACKAGES / "valid_example_2.wacz", tmp_path)
    package = stored_package(
        tmp_path / "p.wacz", {"archive/a.warc": warc.read_bytes(), "archive/b.warc": warc.read_bytes()}
    )
    data = bytearray(package.read_bytes())
    info = zipfile.ZipFile(package).getinfo("archive/a.warc")
    data[info.header_offset : info.header_offset + 4] = b"XXXX"
    package.write_bytes(bytes(data))
    first, second = plan_inputs([package])
    [problem] = list(ArchiveReader("warcio").read(first.path))
    assert problem.skipped and problem.file == f"{package}#archive/a.warc"
    assert "damaged zip entry 'archive/a.warc'" in problem.reason
    assert records(list(ArchiveReader("warcio").read(second.path))) == records(
        list(ArchiveReader("warcio").read(warc))
    )
