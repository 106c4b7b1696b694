"""Reprocessing real archives: sidecar WARCs, near-duplicates across files and formats, resuming, CLI."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.cli import main
from scrapy_simhash.index import open_index
from scrapy_simhash.page import PageFingerprint, fingerprint_page
from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord
from scrapy_simhash.warc.records import SimhashFields, http_head, parse_fields, response_record, warc_date
from scrapy_simhash.warc.reprocess import Options, dedupe, plan_inputs, tag
from scrapy_simhash.warc.write.writer import RollingWarcWriter

SMALL = ["resiliparse/warcfile.warc", "resiliparse/warcfile.warc.gz"]  # the same HTML pages, twice


def _metadata(sidecar: Path) -> list[tuple[dict, SimhashFields]]:
    """(WARC headers, fields) of every metadata record, read with warcio and its digest checks."""
    out = []
    with open(sidecar, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests=True):
            block = rec.content_stream().read()
            assert rec.digest_checker.passed is not False, rec.digest_checker.problems
            if rec.rec_type == "metadata":
                headers = dict(rec.rec_headers.headers)
                assert "WARC-Payload-Digest" not in headers
                out.append((headers, SimhashFields.from_pairs(parse_fields(block))))
    return out


@pytest.fixture(scope="module")
def small_inputs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Copies of two small corpus files (so sidecars can be written next to them)."""
    base = tmp_path_factory.mktemp("small")
    copies = []
    for name in SMALL:
        target = base / name.replace("/", "__")
        shutil.copyfile(corpus / "warcs" / name, target)
        copies.append(target)
    return copies


@pytest.fixture(scope="module")
def tagged(small_inputs: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict:
    digests = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in small_inputs}
    index_dir = tmp_path_factory.mktemp("index") / "ix"
    with open_index(index_dir, k=3) as index:
        summary = tag(plan_inputs(small_inputs), Options(workers=2), index)
    return {"summary": summary, "digests": digests, "index": index_dir}


def test_sidecars_describe_existing_records_and_leave_inputs_untouched(
    small_inputs: list[Path], tagged: dict
) -> None:
    summary = tagged["summary"]
    # 6 of the 32 pages are mostly the site's template: skipped as boilerplate
    assert summary.exit_status == 0 and summary.pages == 32 and summary.fingerprinted >= 24
    for path in small_inputs:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == tagged["digests"][path]
        sidecar = path.with_name(path.name + ".simhash.warc.gz")
        records = {r.record_id: r for r in ArchiveReader("warcio").read(path) if isinstance(r, ArchiveRecord)}
        metadata = _metadata(sidecar)
        assert len(metadata) == summary.fingerprinted // 2
        for headers, fields in metadata:
            described = records[headers["WARC-Refers-To"]]  # refers to a record that exists
            assert described.record_type == "response"
            assert headers["WARC-Target-URI"] == described.target_uri
            assert fields.source_file == path.name and fields.source_offset == described.offset


def test_with_an_index_the_second_copy_is_tagged_as_near_duplicate_of_the_first(
    small_inputs: list[Path], tagged: dict
) -> None:
    first, second = small_inputs
    firsts = {h["WARC-Refers-To"]: f for h, f in _metadata(first.with_name(first.name + ".simhash.warc.gz"))}
    assert all(f.duplicate is None for f in firsts.values())  # 16 distinct pages
    for headers, fields in _metadata(second.with_name(second.name + ".simhash.warc.gz")):
        dup = fields.duplicate
        assert dup is not None and dup.distance == 0
        assert dup.file == first.name  # relative to the sidecar
        assert dup.record_id == headers["WARC-Refers-To"]
        assert fields.simhash == firsts[dup.record_id].simhash
    with open_index(tagged["index"], k=3) as index:
        assert len(index) == tagged["summary"].fingerprinted
        meta = next(iter(index.query(fields.simhash)), None).meta
        assert {"url", "date", "record_id", "file", "offset"} <= set(meta)


def test_a_rerun_skips_complete_sidecars_and_redoes_interrupted_ones(
    small_inputs: list[Path], tagged: dict
) -> None:
    first, second = small_inputs
    done = first.with_name(first.name + ".simhash.warc.gz")
    before = done.read_bytes()
    interrupted = second.with_name(second.name + ".simhash.warc.gz")
    interrupted.unlink()
    interrupted.with_name(interrupted.name + ".open").write_bytes(b"half a record")
    summary = tag(plan_inputs(small_inputs), Options(workers=1))
    assert summary.files_skipped_complete == 1 and summary.files == 1
    assert done.read_bytes() == before
    assert interrupted.exists() and not interrupted.with_name(interrupted.name + ".open").exists()
    assert len(_metadata(interrupted)) == tagged["summary"].fingerprinted // 2


def test_worker_count_does_not_change_the_output(small_inputs: list[Path], tmp_path: Path) -> None:
    def fields(workers: int) -> list:
        out = tmp_path / f"w{workers}"
        entries = plan_inputs(small_inputs[:1], out)
        tag(entries, Options(workers=workers))
        return [(h["WARC-Refers-To"], f) for h, f in _metadata(entries[0].sidecar)]

    assert fields(1) == fields(2)


def test_dedupe_report_lists_clusters_with_locations(small_inputs: list[Path], tmp_path: Path) -> None:
    summary, rows = dedupe(plan_inputs(small_inputs), Options(workers=1))
    assert summary.exit_status == 0
    clusters: dict[int, list[dict]] = {}
    for row in rows:
        clusters.setdefault(row["cluster"], []).append(row)
    per_file = summary.fingerprinted // 2
    assert len(clusters) == per_file >= 12 and all(len(c) == 2 for c in clusters.values())
    for members in clusters.values():
        original, copy = members
        assert (original["role"], copy["role"]) == ("original", "duplicate")
        assert original["file"].endswith("warcfile.warc") and copy["file"].endswith("warcfile.warc.gz")
        assert original["record_id"] == copy["record_id"] and copy["distance"] == 0


def test_cli_dedupe_writes_csv_and_a_summary(small_inputs: list[Path], tmp_path: Path, capsys) -> None:
    report = tmp_path / "clusters.csv"
    status = main(
        ["dedupe", *map(str, small_inputs), "--workers", "1", "--report", str(report), "--no-progress"]
    )
    assert status == 0
    rows = list(csv.DictReader(report.open()))
    assert len(rows) >= 24 and set(rows[0]) >= {"record_id", "uri", "date", "file", "offset", "distance"}
    assert f"clusters: {len(rows) // 2} covering {len(rows)} records" in capsys.readouterr().out


def test_cli_exit_status_says_whether_anything_was_skipped(corpus: Path, tmp_path: Path, capsys) -> None:
    clean = corpus / "warcs/warcio/example.warc.gz"
    assert main(["tag", str(clean), "--out", str(tmp_path / "a"), "--workers", "1", "--no-progress"]) == 0
    damaged = corpus / "warcs/gowarc/corrupted-trailing-bytes.warc.gz.open"
    status = main(["tag", str(damaged), "--out", str(tmp_path / "b"), "--workers", "1", "--no-progress"])
    err = capsys.readouterr().err
    assert status == 1
    assert f"skipped: {damaged} @ 2362: " in err and "recompress" in err
    # what could be read is tagged, but the sidecar stays unfinished so that the next run retries
    assert (tmp_path / "b" / (damaged.name + ".simhash.warc.gz.open")).exists()
    assert not (tmp_path / "b" / (damaged.name + ".simhash.warc.gz")).exists()
    assert main(["tag", str(tmp_path / "missing.warc.gz"), "--no-progress"]) == 2


def test_directory_inputs_mirror_under_out_and_skip_our_own_sidecars(
    small_inputs: list[Path], tmp_path: Path
) -> None:
    source = small_inputs[0].parent
    entries = plan_inputs([source], tmp_path / "out")
    names = sorted(e.path.name for e in entries)
    assert names == sorted(p.name for p in small_inputs)  # sidecars next to them are not inputs
    assert all(e.sidecar.parent == tmp_path / "out" for e in entries)
    with pytest.raises(ValueError, match="share the sidecar"):
        plan_inputs(
            [
                small_inputs[0],
                small_inputs[0].parent / ".." / small_inputs[0].parent.name / small_inputs[0].name,
            ],
            tmp_path,
        )


@pytest.mark.slow
def test_arc_and_warc_twins_pair_at_distance_zero(corpus: Path) -> None:
    warc = corpus / "warcs/aut/warc/example.warc.gz"
    arc = corpus / "warcs/aut/arc/example.arc.gz"
    summary, rows = dedupe(plan_inputs([warc, arc]), Options(workers=2))
    assert summary.exit_status == 0
    pages: dict[str, dict[str, str]] = {}
    for row in rows:
        pages.setdefault(row["file"], {})[row["uri"]] = row["simhash"]
    clusters: dict[int, set[str]] = {}
    for row in rows:
        clusters.setdefault(row["cluster"], set()).add(row["file"])
    assert all(files == {str(warc), str(arc)} for files in clusters.values())
    assert summary.fingerprinted == 2 * len(pages[str(warc)]) > 140
    assert pages[str(warc)] == pages[str(arc)]  # every page, its twin, the same fingerprint
    for row in rows:
        twin_file = str(arc) if row["file"] == str(warc) else str(warc)
        assert pages[twin_file][row["uri"]] == row["simhash"]


@pytest.mark.slow
def test_every_corpus_file_is_processed_without_a_crash(corpus: Path, tmp_path: Path, capsys) -> None:
    status = main(["tag", str(corpus / "warcs"), "--out", str(tmp_path), "--workers", "2", "--no-progress"])
    out, err = capsys.readouterr()
    assert status == 1, "the corpus holds damaged files: the exit status must say so"
    for name in ["badexample.arc.gz", "corrupted-mid-record.warc.gz.open", "example-trunc.warc"]:
        assert any(line.startswith("skipped: ") and name in line for line in err.splitlines()), name
    inputs = plan_inputs([corpus / "warcs"], tmp_path)
    unfinished = [e for e in inputs if not e.sidecar.exists()]
    # an input that lost records has no finished sidecar (so a later run retries it), and said why
    skipped_lines = [line for line in err.splitlines() if line.startswith("skipped: ")]
    for entry in unfinished:
        assert any(f"{entry.path} " in line or f"{entry.path}:" in line for line in skipped_lines), entry.path
    assert 0 < len(unfinished) < len(inputs) // 2
    assert "files: " in out and "problems: " in out


def test_scrapy_commands_are_registered_and_behave_like_the_cli(
    small_inputs: list[Path], tmp_path: Path
) -> None:
    scrapy = Path(sys.executable).with_name("scrapy")
    common = ["--workers", "1", "--no-progress"]
    tagged = subprocess.run(
        [str(scrapy), "simhash-tag", str(small_inputs[0]), "--out", str(tmp_path), *common],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert tagged.returncode == 0, tagged.stderr
    assert "files: 1 processed" in tagged.stdout
    assert _metadata(tmp_path / (small_inputs[0].name + ".simhash.warc.gz"))
    report = tmp_path / "r.jsonl"
    deduped = subprocess.run(
        [str(scrapy), "simhash-dedupe", *map(str, small_inputs), "--report", str(report), *common],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert deduped.returncode == 0, deduped.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert rows and all(r["distance"] == 0 for r in rows)
    missing = subprocess.run(
        [str(scrapy), "simhash-tag", str(tmp_path / "nope.warc")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_an_index_that_cannot_be_opened_is_a_clear_error(
    small_inputs: list[Path], tmp_path: Path, capsys
) -> None:
    index_dir = tmp_path / "ix"
    with open_index(index_dir, k=3):  # holds the writer lock
        status = main(
            ["tag", str(small_inputs[0]), "--out", str(tmp_path), "--index", str(index_dir), "--no-progress"]
        )
    assert status == 2
    assert "cannot open the index" in capsys.readouterr().err
    assert not (tmp_path / (small_inputs[0].name + ".simhash.warc.gz")).exists()


def test_progress_line_shows_records_per_second(small_inputs: list[Path], tmp_path: Path) -> None:
    stream = io.StringIO()
    tag(plan_inputs(small_inputs[:1], tmp_path), Options(workers=1, progress=True), stream=stream)
    text = stream.getvalue()
    assert re.search(r"\d/1 files  \d+ records  [\d,]+ rec/s  \d+ pages fingerprinted", text)
    assert "\r" not in text and text.endswith("\n")  # not a terminal: plain lines (tests/test_progress.py)


def crash_on_marked_pages(body: bytes, url: str | None, encoding: str | None, **options) -> PageFingerprint:
    """Kills the worker process on pages whose URL says so (as a segfault in lxml would)."""
    if url and "crash-me" in url:
        os._exit(3)
    return fingerprint_page(body, url, encoding, **options)


def test_a_worker_crash_costs_only_its_page(corpus: Path, tmp_path: Path) -> None:
    pages = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:12]
    writer = RollingWarcWriter(tmp_path / "in", "crash")
    head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
    uris = [f"http://e.test/{'crash-me' if i == 5 else 'ok'}/{i}" for i in range(len(pages))]
    for uri, page in zip(uris, pages, strict=True):
        writer.write(response_record(uri, warc_date(), head, gzip.decompress(page.read_bytes())))
    [warc] = writer.close()
    entries = plan_inputs([warc], tmp_path / "out")
    summary = tag(entries, Options(workers=2, function=crash_on_marked_pages))
    assert summary.reasons.get("worker_crash") == 1
    assert summary.exit_status == 1  # a page was lost: the exit status says so
    tagged = {h["WARC-Target-URI"] for h, _ in _metadata(entries[0].sidecar)}
    assert tagged == {u for u in uris if "crash-me" not in u}  # every other page, before and after


_RUN_STATE: dict[str, int] = {}


def fingerprint_in_a_worker_forked_from_the_run(
    body: bytes, url: str | None, encoding: str | None, **options
) -> PageFingerprint:
    """Fingerprints only in a worker that inherited the running process's memory."""
    if _RUN_STATE.get("pid") != os.getppid():
        raise RuntimeError("this worker did not inherit the run's memory (its warmed extractor with it)")
    return fingerprint_page(body, url, encoding, **options)


def test_workers_inherit_the_warmed_process_whatever_the_default_start_method(
    corpus: Path, tmp_path: Path
) -> None:
    """Python 3.14 starts pool workers by forkserver on Linux unless told: they would import everything
    again and could not call a function defined outside an importable module."""
    multiprocessing.set_start_method("spawn", force=True)  # a default other than fork, as 3.14's
    try:
        _RUN_STATE["pid"] = os.getpid()
        pages = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:6]
        writer = RollingWarcWriter(tmp_path / "in", "fork")
        head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html")])
        for i, page in enumerate(pages):
            writer.write(
                response_record(f"http://e.test/{i}", warc_date(), head, gzip.decompress(page.read_bytes()))
            )
        [warc] = writer.close()
        entries = plan_inputs([warc], tmp_path / "out")
        summary = tag(entries, Options(workers=2, function=fingerprint_in_a_worker_forked_from_the_run))
    finally:
        multiprocessing.set_start_method(None, force=True)
        _RUN_STATE.clear()
    assert summary.exit_status == 0, summary.reasons
    assert len(_metadata(entries[0].sidecar)) == len(pages)


# -- issue 13: the verified rule is the default decision ---------------------------------------------


@pytest.fixture
def edit_inputs(corpus: Path, tmp_path: Path) -> list[Path]:
    from verified_support import edit_inputs

    return edit_inputs(corpus, tmp_path / "in")


def _by_uri(sidecar: Path) -> dict[str, SimhashFields]:
    return {headers["WARC-Target-URI"]: fields for headers, fields in _metadata(sidecar)}


def test_tag_pairs_a_one_sentence_edit_in_verified_mode_only(edit_inputs: list[Path], tmp_path: Path) -> None:
    second = edit_inputs[1]
    with open_index(tmp_path / "verified", k=3) as index:
        verified = tag(plan_inputs(edit_inputs, tmp_path / "v"), Options(workers=1), index)
    with open_index(tmp_path / "simhash", k=3, mode="simhash") as index:
        plain = tag(plan_inputs(edit_inputs, tmp_path / "s"), Options(workers=1, mode="simhash"), index)
    edited = _by_uri(tmp_path / "v" / (second.name + ".simhash.warc.gz"))
    dup = edited["http://b/edit"].duplicate
    assert dup is not None and dup.uri == "http://a/orig"
    assert dup.distance > 3 and dup.similarity is not None and dup.similarity >= 0.5
    copy = edited["http://b/u1-copy"].duplicate
    assert copy is not None and (copy.distance, copy.similarity) == (0, 1.0)
    assert verified.near_duplicates == 2 and verified.by_simhash == 0
    assert "decisions: verified mode, 2 near-duplicates verified by sketch, 0 by simhash alone" in (
        verified.lines()
    )
    assert all(f.minhash is not None for f in edited.values())  # every record carries its sketch
    plain_fields = _by_uri(tmp_path / "s" / (second.name + ".simhash.warc.gz"))
    assert plain_fields["http://b/edit"].duplicate is None  # k = 3 misses the edit
    assert plain_fields["http://b/u1-copy"].duplicate is not None
    assert all(f.minhash is None for f in plain_fields.values())  # simhash mode computes no sketch
    assert plain.near_duplicates == 1 and plain.by_simhash == 1 and plain.mode == "simhash"


def test_dedupe_pairs_a_one_sentence_edit_in_verified_mode_only(
    edit_inputs: list[Path], tmp_path: Path
) -> None:
    _, rows = dedupe(plan_inputs(edit_inputs), Options(workers=1))
    clusters = {frozenset(r["uri"] for r in rows if r["cluster"] == c) for c in {r["cluster"] for r in rows}}
    assert clusters == {
        frozenset({"http://a/orig", "http://b/edit"}),
        frozenset({"http://a/u1", "http://b/u1-copy"}),
    }
    edit = next(r for r in rows if r["uri"] == "http://b/edit")
    assert edit["role"] == "duplicate" and edit["method"] == "verified"
    assert edit["distance"] > 3 and 0.5 <= edit["similarity"] < 1.0
    original = next(r for r in rows if r["uri"] == "http://a/orig")
    assert (original["role"], original["distance"], original["similarity"]) == ("original", 0, 1.0)
    summary, plain = dedupe(plan_inputs(edit_inputs), Options(workers=1, mode="simhash"))
    assert {r["uri"] for r in plain} == {"http://a/u1", "http://b/u1-copy"}
    assert {(r["method"], r["similarity"]) for r in plain} == {("simhash", None)}
    assert summary.by_simhash == summary.near_duplicates == 1


def test_cli_mode_and_similarity(edit_inputs: list[Path], tmp_path: Path, capsys) -> None:
    def report(*extra: str) -> list[dict]:
        out = tmp_path / "r.jsonl"
        assert (
            main(
                [
                    "dedupe",
                    *map(str, edit_inputs),
                    "--workers",
                    "1",
                    "--no-progress",
                    "--report",
                    str(out),
                    *extra,
                ]
            )
            == 0
        )
        return [json.loads(line) for line in out.read_text().splitlines()]

    edit_found = {r["uri"] for r in report()} >= {"http://b/edit"}
    assert edit_found
    assert "http://b/edit" not in {r["uri"] for r in report("--mode", "simhash")}
    assert "http://b/edit" not in {r["uri"] for r in report("--method", "simhash")}  # the old spelling
    similarity = next(r["similarity"] for r in report() if r["uri"] == "http://b/edit")
    above = f"{min(1.0, similarity + 0.01):.4f}"
    assert "http://b/edit" not in {r["uri"] for r in report("--similarity", above)}
    assert "decisions: verified mode" in capsys.readouterr().out
    for bad, message in [
        (["--mode", "simhash", "--similarity", "0.6"], "--similarity applies to --mode verified only"),
        (["--method", "minhash", "--mode", "verified"], "do not apply to --method minhash"),
        (["--method", "simhash", "--mode", "verified"], "cannot be --mode verified"),
    ]:
        assert main(["dedupe", str(edit_inputs[0]), "--workers", "1", "--no-progress", *bad]) == 2
        assert message in capsys.readouterr().err


def test_an_index_written_before_sketches_is_read_and_its_pages_judged_by_simhash(
    edit_inputs: list[Path], tmp_path: Path
) -> None:
    """An old (simhash-only) index: its pages match by distance alone, counted as such in the summary."""
    first, second = edit_inputs
    old = tmp_path / "old-index"
    with open_index(old, k=3, mode="simhash") as index:
        tag(plan_inputs([first], tmp_path / "1"), Options(workers=1, mode="simhash"), index)
    with open_index(old, k=3) as index:
        summary = tag(plan_inputs([second], tmp_path / "2"), Options(workers=1), index)
    fields = _by_uri(tmp_path / "2" / (second.name + ".simhash.warc.gz"))
    copy = fields["http://b/u1-copy"].duplicate
    assert copy is not None and copy.distance == 0 and copy.similarity is None  # judged by simhash alone
    assert fields["http://b/edit"].duplicate is None  # its original has no sketch: k = 3 decides
    assert summary.near_duplicates == 1 and summary.by_simhash == 1
    assert "1 by simhash alone" in summary.decisions_line()
    # dedupe with the same old index: the copy's row says how it was judged
    with open_index(old, k=3) as index:
        _, rows = dedupe(plan_inputs([second]), Options(workers=1), index)
    row = next(r for r in rows if r["uri"] == "http://b/u1-copy")
    assert (row["method"], row["similarity"], row["distance"]) == ("simhash", None, 0)


# -- inside a Scrapy project: the crawl's index is not the report's scratch pad -------------------------


def _crawled_project(corpus: Path, root: Path) -> tuple[Path, Path, list[str]]:
    """A project whose SIMHASH_INDEX holds three pages as the crawl stored them (key: the URL; meta: url,
    date, the response record's id) and the crawl's WARC of those pages."""
    from scrapy_simhash.extract import DEFAULT_EXTRACTOR
    from scrapy_simhash.index.extractor_record import check_extractor
    from scrapy_simhash.warc.write.writer import WarcFileWriter

    (root / "proj").mkdir(parents=True)
    (root / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (root / "proj" / "__init__.py").write_text("")
    index_dir = root / "crawl-index"
    (root / "proj" / "settings.py").write_text(f"SIMHASH_INDEX = {str(index_dir)!r}\n")
    (root / "warcs").mkdir()
    writer = WarcFileWriter(root / "warcs" / "crawl-00000.warc.gz")
    index = open_index(index_dir)
    check_extractor(index, DEFAULT_EXTRACTOR.description)  # a crawl records its extractor first
    urls = []
    pages = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:3]
    for n, page in enumerate(pages):
        url, date, body = (
            f"https://example.org/{n}",
            f"2026-11-22T09:0{n}:00Z",
            gzip.decompress(page.read_bytes()),
        )
        head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html; charset=utf-8")])
        record = response_record(url, date, head, body)
        writer.write(record)
        fp = fingerprint_page(body, url, "utf-8", minhash=True)
        assert fp.simhash is not None
        index.check_and_add(
            fp.simhash, url, {"url": url, "date": date, "record_id": record.record_id}, sketch=fp.minhash
        )
        urls.append(url)
    writer.close()
    index.close()
    return root, index_dir, urls


def test_scrapy_dedupe_in_a_project_leaves_the_crawls_index_alone(corpus: Path, tmp_path: Path) -> None:
    project, index_dir, urls = _crawled_project(corpus, tmp_path / "project")
    scrapy = Path(sys.executable).with_name("scrapy")
    report = project / "report.jsonl"
    command = [
        str(scrapy),
        "simhash-dedupe",
        "warcs",
        "--report",
        str(report),
        "--workers",
        "1",
        "--no-progress",
    ]
    run = subprocess.run(command, capture_output=True, text=True, cwd=project, timeout=120)
    assert run.returncode == 0, run.stderr
    assert report.read_text() == ""  # three different pages: no cluster (each was its own duplicate)
    index = open_index(index_dir)
    try:
        assert sorted(index.keys()) == urls  # not one FILE#OFFSET row added
    finally:
        index.close()

    # asked to (--index), it uses the crawl's index: the crawl's entry of a record is not its duplicate
    run = subprocess.run(
        [*command, "--index", str(index_dir)], capture_output=True, text=True, cwd=project, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert report.read_text() == ""
    tagged = subprocess.run(
        [str(scrapy), "simhash-tag", "warcs", "--workers", "1", "--no-progress"],
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    assert tagged.returncode == 0, tagged.stderr
    assert "0 near-duplicates" in tagged.stdout
    fields = [f for _, f in _metadata(project / "warcs" / "crawl-00000.warc.gz.simhash.warc.gz")]
    assert len(fields) == 3 and not any(f.duplicate for f in fields)
