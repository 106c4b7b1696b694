"""What ``tag`` and ``dedupe`` take in and write out: sidecars never read as inputs, dates copied exactly
(and checked), ``near-duplicate-of-file`` relative to the sidecar, directories, the help text.

Every archive is generated in ``tmp_path`` from real corpus pages.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.cli import main
from scrapy_simhash.index import open_index
from scrapy_simhash.page import fingerprint_page
from scrapy_simhash.warc.read.reader import fastwarc_available
from scrapy_simhash.warc.records import (
    SimhashFields,
    http_head,
    parse_fields,
    response_record,
    valid_date,
    warc_date,
)
from scrapy_simhash.warc.reprocess import Options, dedupe, plan_inputs, tag
from scrapy_simhash.warc.write.writer import gzip_member

READERS = ["warcio", "fastwarc"] if fastwarc_available() else ["warcio"]
HEAD = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html; charset=utf-8")])


@pytest.fixture(scope="module")
def pages(corpus: Path) -> list[bytes]:
    files = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:3]
    return [gzip.decompress(f.read_bytes()) for f in files]


def _warc(path: Path, records: list[tuple[str, str, bytes]]) -> Path:
    """A per-record-gzip WARC of responses (uri, WARC-Date as given, HTML body)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        for uri, date, body in records:
            out.write(gzip_member(response_record(uri, date, HEAD, body).to_bytes()))
    return path


def _metadata(sidecar: Path) -> list[tuple[dict, SimhashFields]]:
    out = []
    with open(sidecar, "rb") as fh:
        for rec in ArchiveIterator(fh):
            if rec.rec_type == "metadata":
                fields = SimhashFields.from_pairs(parse_fields(rec.content_stream().read()))
                out.append((dict(rec.rec_headers.headers), fields))
    return out


def _sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".simhash.warc.gz")


# -- item 11: sidecars given as inputs ----------------------------------------------------------------


def test_a_glob_that_matches_sidecars_does_not_tag_them(pages: list[bytes], tmp_path: Path, capsys) -> None:
    warc = _warc(tmp_path / "a.warc.gz", [("http://e.test/1", warc_date(), pages[0])])
    assert main(["tag", str(warc), "--workers", "1", "--no-progress"]) == 0
    capsys.readouterr()
    # what `scrapy-simhash tag *.warc.gz` passes on the second run (an interrupted one leaves `.open`)
    opened = tmp_path / "b.warc.gz.simhash.warc.gz.open"
    opened.write_bytes(b"")
    status = main(["tag", str(warc), str(_sidecar(warc)), str(opened), "--workers", "1", "--no-progress"])
    out, err = capsys.readouterr()
    assert status == 0  # a note, not an error
    assert not _sidecar(_sidecar(warc)).exists()
    assert not (tmp_path / (opened.name + ".simhash.warc.gz")).exists()
    assert f"note: {_sidecar(warc)}: a simhash sidecar" in err and f"note: {opened}: a simhash sidecar" in err
    assert "files: 0 processed, 1 already complete, 2 sidecars given as input not read" in out


def test_dedupe_does_not_read_sidecars_either(pages: list[bytes], tmp_path: Path) -> None:
    warc = _warc(tmp_path / "a.warc.gz", [("http://e.test/1", warc_date(), pages[0])])
    tag(plan_inputs([warc]), Options(workers=1))
    summary, _ = dedupe(plan_inputs([warc, _sidecar(warc)]), Options(workers=1))
    assert summary.files == 1 and summary.sidecars_not_read == 1 and summary.exit_status == 0


# -- item 18: directories and help ---------------------------------------------------------------------


def test_a_directory_without_archives_is_a_counted_problem(tmp_path: Path, capsys) -> None:
    named_like_an_archive = tmp_path / "x.warc.gz"
    named_like_an_archive.mkdir()
    (named_like_an_archive / "notes.txt").write_text("not an archive")
    status = main(["tag", str(named_like_an_archive), "--workers", "1", "--no-progress"])
    out, err = capsys.readouterr()
    assert status == 1
    assert f"skipped: {named_like_an_archive}: a directory without WARC/ARC files" in err
    assert "problems: 1 skipped data" in out


def test_a_directory_named_like_an_archive_is_searched_for_archives(
    pages: list[bytes], tmp_path: Path, capsys
) -> None:
    folder = tmp_path / "crawl.warc.gz"
    _warc(folder / "part-1.warc.gz", [("http://e.test/1", warc_date(), pages[0])])
    assert main(["tag", str(folder), "--workers", "1", "--no-progress"]) == 0
    assert "files: 1 processed" in capsys.readouterr().out
    assert _sidecar(folder / "part-1.warc.gz").exists()


def test_tag_help_says_that_without_an_index_nothing_is_detected(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["tag", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "Without --index only the fingerprints are written: nothing is detected" in text
    assert "without it only fingerprints are written and nothing is detected as a near-duplicate" in text


# -- item 13: near-duplicate-of-date is the original's WARC-Date, as written -------------------------

ODD_DATES = ["2026-11-22T09:39:58.123456789Z", "2008-10-29T05:21:46-07:00", "2026-11-22T09:39:58.5Z"]


@pytest.mark.parametrize("reader", READERS)
def test_near_duplicate_of_date_is_the_original_warc_date_exactly(
    pages: list[bytes], tmp_path: Path, reader: str
) -> None:
    originals = [(f"http://e.test/{i}/a", date, pages[i]) for i, date in enumerate(ODD_DATES)]
    copies = [(f"http://e.test/{i}/b", warc_date(), pages[i]) for i in range(len(ODD_DATES))]
    warc = _warc(tmp_path / "dates.warc.gz", originals)
    later = _warc(tmp_path / "later.warc.gz", copies)
    with open_index(tmp_path / "ix", k=3) as index:
        tag(plan_inputs([warc, later]), Options(workers=1, reader=reader), index)
    found = {}
    for sidecar in (_sidecar(warc), _sidecar(later)):
        for headers, fields in _metadata(sidecar):
            if fields.duplicate is not None:
                found[headers["WARC-Target-URI"]] = fields.duplicate.date
    assert found == {f"http://e.test/{i}/b": date for i, date in enumerate(ODD_DATES)}
    _, rows = dedupe(plan_inputs([warc, later]), Options(workers=1, reader=reader))
    originals = {row["uri"]: row["date"] for row in rows if row["role"] == "original"}
    assert originals == {f"http://e.test/{i}/a": date for i, date in enumerate(ODD_DATES)}


# -- item 14: near-duplicate-of-file relative to the sidecar ----------------------------------------


def test_near_duplicate_of_file_is_relative_so_a_moved_collection_keeps_its_links(
    pages: list[bytes], tmp_path: Path
) -> None:
    collection = tmp_path / "collection"
    first = _warc(collection / "2024" / "first.warc.gz", [("http://e.test/a", warc_date(), pages[0])])
    second = _warc(collection / "2025" / "second.warc.gz", [("http://e.test/b", warc_date(), pages[0])])
    with open_index(tmp_path / "ix", k=3) as index:
        tag(plan_inputs([first, second]), Options(workers=1), index)
    [(_, fields)] = _metadata(_sidecar(second))
    assert fields.duplicate is not None
    assert fields.duplicate.file == "../2024/first.warc.gz"
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(collection, moved)
    sidecar = _sidecar(moved / "2025" / "second.warc.gz")
    [(_, fields)] = _metadata(sidecar)
    target = sidecar.parent / fields.duplicate.file
    assert target.resolve() == (moved / "2024" / "first.warc.gz").resolve()
    with open(target, "rb") as fh:  # the offset still points at the original record
        fh.seek(fields.duplicate.offset)
        record = next(iter(ArchiveIterator(fh)))
        assert record.rec_headers.get_header("WARC-Target-URI") == "http://e.test/a"


def test_with_out_the_link_is_relative_to_the_sidecar_in_the_other_tree(
    pages: list[bytes], tmp_path: Path
) -> None:
    first = _warc(tmp_path / "in" / "first.warc.gz", [("http://e.test/a", warc_date(), pages[1])])
    second = _warc(tmp_path / "in" / "second.warc.gz", [("http://e.test/b", warc_date(), pages[1])])
    with open_index(tmp_path / "ix", k=3) as index:
        tag(plan_inputs([first, second], tmp_path / "out" / "sidecars"), Options(workers=1), index)
    [(_, fields)] = _metadata(tmp_path / "out" / "sidecars" / "second.warc.gz.simhash.warc.gz")
    assert fields.duplicate is not None and fields.duplicate.file == "../../in/first.warc.gz"
    assert fields.source_file == "../../in/second.warc.gz"


# -- item 15: invalid dates are noted ---------------------------------------------------------------


def test_an_invalid_warc_date_is_noted_and_the_page_still_tagged(
    pages: list[bytes], tmp_path: Path, capsys
) -> None:
    bad = "2008-10-294T05:21:46-0700"  # as in ClueWeb09 (resiliparse/clueweb-quirk.warc.gz)
    warc = _warc(
        tmp_path / "quirk.warc.gz",
        [("http://e.test/bad", bad, pages[0]), ("http://e.test/good", "2008-10-29T05:21:46-07:00", pages[1])],
    )
    status = main(["tag", str(warc), "--workers", "1", "--no-progress"])
    out, err = capsys.readouterr()
    assert status == 0  # a note: nothing was lost
    notes = [line for line in err.splitlines() if "invalid WARC-Date" in line]
    assert notes == [f"note: {warc} @ 0: invalid WARC-Date '{bad}'; copied as it is"]
    assert "problems: 0 skipped data, 1 notices" in out
    assert {h["WARC-Target-URI"] for h, _ in _metadata(_sidecar(warc))} == {
        "http://e.test/bad",
        "http://e.test/good",
    }
    report = tmp_path / "r.jsonl"
    _warc(tmp_path / "copy.warc.gz", [("http://e.test/copy", warc_date(), pages[0])])
    main(["dedupe", str(warc), str(tmp_path / "copy.warc.gz"), "--report", str(report), "--no-progress"])
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert {row["date"] for row in rows if row["uri"] == "http://e.test/bad"} == {bad}  # copied as it is


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("2008-10-294T05:21:46-0700", False),
        ("null", False),
        ("", False),
        ("2026-02-30T00:00:00Z", False),
        ("2026-11-22T24:00:00Z", False),
        ("2026-11-22T09:39:58", False),  # W3C-DTF: a time needs a zone
        ("2026-11-22T09:39:58Z", True),
        ("2026-11-22T09:39:58.123456789Z", True),
        ("2008-10-29T05:21:46-0700", True),  # basic-format offset: accepted (lenient)
        ("2026-11", True),
        ("2026", True),
    ],
)
def test_valid_date(value: str, valid: bool) -> None:
    assert valid_date(value) is valid
    assert valid_date("20081029052146", "arc") and not valid_date("20081329052146", "arc")


def test_max_body_size_is_the_too_large_cap(pages: list[bytes], tmp_path: Path, capsys) -> None:
    warc = _warc(tmp_path / "a.warc.gz", [("http://e.test/1", warc_date(), pages[0])])
    small = str(len(pages[0]) - 1)
    assert main(["tag", str(warc), "--max-body-size", small, "--workers", "1", "--no-progress"]) == 0
    assert "not fingerprinted: too_large 1" in capsys.readouterr().out
    _sidecar(warc).unlink()
    assert (
        main(["tag", str(warc), "--max-body-size", str(len(pages[0])), "--workers", "1", "--no-progress"])
        == 0
    )
    assert "1 fingerprinted" in capsys.readouterr().out


def test_a_file_full_of_invalid_dates_gives_a_few_notes_and_a_count(
    pages: list[bytes], tmp_path: Path, capsys
) -> None:
    warc = _warc(tmp_path / "null.warc.gz", [(f"http://e.test/{i}", "null", pages[i % 3]) for i in range(7)])
    assert main(["tag", str(warc), "--workers", "1", "--no-progress"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len([line for line in err if "invalid WARC-Date 'null'" in line]) == 3
    more = "4 more pages with an invalid or missing date, copied as they are"
    assert f"note: {warc}: {more} (7 in all; only the first 3 are listed)" in err
    assert len(_metadata(_sidecar(warc))) == 7


# -- issue 13: sketch and similarity fields in sidecars -------------------------------------------------


def _read_metadata_blocks(sidecar: Path, library: str) -> dict[str, list[tuple[str, str]]]:
    """URI -> fields of each metadata record, read with ``library`` itself (digests checked)."""
    out = {}
    if library == "fastwarc":
        from fastwarc.warc import ArchiveIterator as FastIterator
        from fastwarc.warc import WarcRecordType

        with open(sidecar, "rb") as fh:
            for rec in FastIterator(fh, record_types=WarcRecordType.metadata, parse_http=False):
                assert rec.verify_block_digest(consume=False)
                out[rec.headers["WARC-Target-URI"]] = parse_fields(rec.reader.read())
        return out
    with open(sidecar, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests=True):
            if rec.rec_type == "metadata":
                pairs = parse_fields(rec.content_stream().read())
                assert rec.digest_checker.passed is not False
                out[rec.rec_headers.get_header("WARC-Target-URI")] = pairs
    return out


@pytest.mark.parametrize("library", READERS)
def test_sidecars_carry_the_sketch_and_the_similarity(corpus: Path, tmp_path: Path, library: str) -> None:
    from verified_support import edit_inputs, planted_edit

    inputs = edit_inputs(corpus, tmp_path / "in")
    with open_index(tmp_path / "ix", k=3) as index:
        assert tag(plan_inputs(inputs), Options(workers=1), index).exit_status == 0
    blocks = _read_metadata_blocks(_sidecar(inputs[1]), library)
    edit = dict(blocks["http://b/edit"])
    assert edit["minhash-scheme"] == "minhash-doc/1"
    assert edit["near-duplicate-of-uri"] == "http://a/orig"
    assert int(edit["near-duplicate-distance"]) > 3
    assert (
        len(edit["near-duplicate-similarity"].split(".")[1]) == 4
        and float(edit["near-duplicate-similarity"]) >= 0.5
    )
    fields = SimhashFields.from_pairs(blocks["http://b/edit"])
    edited_page = fingerprint_page(planted_edit(corpus)[1])
    assert fields.minhash == edited_page.minhash and fields.simhash == edited_page.simhash
    assert fields.duplicate is not None and fields.duplicate.similarity == float(
        edit["near-duplicate-similarity"]
    )
    originals = _read_metadata_blocks(_sidecar(inputs[0]), library)
    assert all(
        "minhash" in dict(p) and "near-duplicate-similarity" not in dict(p) for p in originals.values()
    )


def test_a_sidecar_written_before_sketches_is_still_read(corpus: Path, tmp_path: Path) -> None:
    """Simhash mode writes the records of before sketches (no minhash field): they parse, with no sketch."""
    from verified_support import edit_inputs

    inputs = edit_inputs(corpus, tmp_path / "in")
    assert main(["tag", *map(str, inputs), "--mode", "simhash", "--workers", "1", "--no-progress"]) == 0
    for path in inputs:
        for _, fields in _metadata(_sidecar(path)):
            assert fields.minhash is None and fields.simhash
    # the next run (verified, the default) skips the complete old sidecars instead of failing on them
    assert main(["tag", *map(str, inputs), "--workers", "1", "--no-progress"]) == 0
