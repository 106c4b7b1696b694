"""How a page's main text changed between captures, found in archives by ``dedupe --report`` and ``tag``.

Three archives written here with warcio hold three captures of the same four pages (the site of
:mod:`change_support`: a byte-identical page, one whose advert and timestamp change, one with an
edited sentence, one rewritten and then kept), a month apart; the byte-identical page of the second
month is a ``revisit`` record. The commands run as subprocesses from a clean environment.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from change_support import version
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from scrapy_simhash.warc.records import parse_fields

SITE = "http://gazette.test"
PAGES = ["/same.html", "/ad.html", "/edit.html", "/rewrite.html"]
DATES = {1: "2026-01-05T10:00:0{}Z", 2: "2026-02-05T10:00:0{}Z", 3: "2026-03-05T10:00:0{}Z"}
PROFILE = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
COMMON = ["--workers", "1", "--no-progress"]

KINDS = {
    2: dict(zip(PAGES, ["unchanged", "same-text", "minor", "changed"], strict=True)),
    3: dict(zip(PAGES, ["unchanged", "same-text", "minor", "unchanged"], strict=True)),
}
"""The change of each page of month N since month N - 1 (the byte-identical page of month 2 is a revisit)."""


def _http() -> StatusAndHeaders:
    return StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")


def write_month(path: Path, month: int, captures: dict[tuple[int, str], dict[str, str]]) -> None:
    """The four pages of ``month`` in one WARC; month 2's identical page as a revisit of month 1's."""
    pages = version(month)
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.1")
        for second, name in enumerate(PAGES):
            uri, date = SITE + name, DATES[month].format(second)
            if month == 2 and name == "/same.html":
                first = captures[(1, name)]
                headers = {
                    "WARC-Date": date,
                    "WARC-Profile": PROFILE,
                    "WARC-Refers-To": first["id"],
                    "WARC-Refers-To-Target-URI": uri,
                    "WARC-Refers-To-Date": first["date"],
                    "WARC-Payload-Digest": first["digest"],
                }
                record = writer.create_warc_record(
                    uri, "revisit", payload=io.BytesIO(b""), http_headers=_http(), warc_headers_dict=headers
                )
            else:
                record = writer.create_warc_record(
                    uri,
                    "response",
                    payload=io.BytesIO(pages[name]),
                    http_headers=_http(),
                    warc_headers_dict={"WARC-Date": date},
                )
            writer.write_record(record)
            captures[(month, name)] = {
                "id": record.rec_headers.get_header("WARC-Record-ID"),
                "date": date,
                "digest": record.rec_headers.get_header("WARC-Payload-Digest"),
            }


@pytest.fixture(scope="module")
def months(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """``month-1.warc.gz`` .. ``month-3.warc.gz`` and the id and date of every capture, by (month, page)."""
    base = tmp_path_factory.mktemp("months")
    captures: dict[tuple[int, str], dict[str, str]] = {}
    for month in (1, 2, 3):
        write_month(base / f"month-{month}.warc.gz", month, captures)
    return {"dir": base, "files": {m: base / f"month-{m}.warc.gz" for m in (1, 2, 3)}, "captures": captures}


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` in a subprocess with a clean environment (no variable the tests set)."""
    tool = Path(sys.executable).with_name("scrapy-simhash")
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return subprocess.run([str(tool), *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


def expected_changes(captures: dict, months: tuple[int, ...] = (2, 3)) -> dict[str, tuple]:
    """Record id -> (kind, previous capture's id, its date) of every capture after a page's first."""
    out = {}
    for month in months:
        for name in PAGES:
            previous = captures[(month - 1, name)]
            out[captures[(month, name)]["id"]] = (KINDS[month][name], previous["id"], previous["date"])
    return out


def row_changes(rows: list[dict]) -> dict[str, tuple]:
    return {
        row["record_id"]: (row["text_change"], row["previous_capture"], row["previous_capture_date"])
        for row in rows
        if row["text_change"] is not None
    }


# -- dedupe --report ----------------------------------------------------------------------------------


def test_dedupe_rows_say_how_each_capture_changed_since_the_previous_one_by_date(
    months: dict, tmp_path: Path
) -> None:
    """Inputs given latest first: the captures are still compared in WARC-Date order."""
    files = months["files"]
    report = tmp_path / "rows.jsonl"
    done = run_cli(
        "dedupe", str(files[3]), str(files[1]), str(files[2]), "--report", str(report), *COMMON, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    captures = months["captures"]
    expected = expected_changes(captures)
    # every capture in a cluster says how it changed; the rewritten page of month 2 is in one (with
    # month 3's identical copy), so its "changed" is there too
    assert row_changes(rows) == expected
    firsts = {captures[(1, name)]["id"] for name in PAGES}
    for row in rows:
        assert list(row)[-4:] == [
            "text_change",
            "text_similarity",
            "previous_capture",
            "previous_capture_date",
        ]
        if row["record_id"] in firsts:  # a URL's first capture in the inputs
            assert (row["text_change"], row["text_similarity"], row["previous_capture"]) == (None, None, None)
        elif row["text_change"] in ("unchanged", "same-text"):
            assert row["text_similarity"] == 1.0
        elif row["text_change"] == "minor":
            assert 0.0 < row["text_similarity"] < 1.0
    # the revisit row is an unchanged capture of its URL, and the next month compares with it
    revisit = captures[(2, "/same.html")]["id"]
    assert next(row for row in rows if row["record_id"] == revisit)["method"] == "revisit"
    assert expected[captures[(3, "/same.html")]["id"]][1] == revisit


def test_dedupe_csv_rows_have_the_same_columns(months: dict, tmp_path: Path) -> None:
    report = tmp_path / "rows.csv"
    done = run_cli(
        "dedupe", str(months["dir"]), "--report", str(report), "--format", "csv", *COMMON, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = list(csv.DictReader(report.read_text().splitlines()))
    got = {
        row["record_id"]: (row["text_change"], row["previous_capture"], row["previous_capture_date"])
        for row in rows
        if row["text_change"]
    }
    assert got == expected_changes(months["captures"])
    assert {row["text_similarity"] for row in rows if row["text_change"] == "unchanged"} == {"1.0"}


def test_dedupe_minhash_rows_carry_the_changes_too(months: dict, tmp_path: Path) -> None:
    report = tmp_path / "rows.jsonl"
    done = run_cli(
        "dedupe", str(months["dir"]), "--method", "minhash", "--report", str(report), *COMMON, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    got = row_changes(rows)
    expected = expected_changes(months["captures"])
    assert got and all(expected[record] == change for record, change in got.items())
    assert {change[0] for change in got.values()} >= {"unchanged", "same-text"}


def test_dedupe_over_a_wacz_gives_the_same_changes(months: dict, tmp_path: Path) -> None:
    package = tmp_path / "months.wacz"
    names = [f"month-{m}.warc.gz" for m in (1, 2, 3)]
    wacz = Path(sys.executable).with_name("wacz")
    made = subprocess.run(
        [str(wacz), "create", "-o", str(package), *names], cwd=months["dir"], capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    report = tmp_path / "rows.jsonl"
    done = run_cli("dedupe", str(package), "--report", str(report), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert row_changes(rows) == expected_changes(months["captures"])
    assert all("months.wacz#archive/" in row["file"] for row in rows)


# -- tag ----------------------------------------------------------------------------------------------


def sidecar_changes(path: Path) -> dict[str, tuple]:
    """Record described -> (text-change, previous-capture, previous-capture-date) of a sidecar's records
    (None for a record without them)."""
    out = {}
    with open(path, "rb") as fh:
        for record in ArchiveIterator(fh):
            if record.rec_type != "metadata":
                continue
            fields = dict(parse_fields(record.content_stream().read()))
            described = record.rec_headers.get_header("WARC-Refers-To")
            kind = fields.get("text-change")
            change = (kind, fields.get("previous-capture"), fields.get("previous-capture-date"))
            out[described] = change if kind else None
            if kind in ("unchanged", "same-text"):
                assert fields["text-similarity"] == "1.0000"
    return out


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".simhash.warc.gz")


def test_tag_sidecars_say_how_each_capture_changed(months: dict, tmp_path: Path) -> None:
    files, captures = months["files"], months["captures"]
    out = tmp_path / "out"
    done = run_cli("tag", *(str(files[m]) for m in (1, 2, 3)), "--out", str(out), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    got: dict[str, tuple | None] = {}
    for month in (1, 2, 3):
        got.update(sidecar_changes(out / f"month-{month}.warc.gz.simhash.warc.gz"))
    expected = expected_changes(captures)
    # every record has its sidecar record, the revisit's included; the first month's have no change
    assert got == {**{captures[(1, name)]["id"]: None for name in PAGES}, **expected}


def test_tag_with_an_index_compares_with_the_captures_of_earlier_runs(months: dict, tmp_path: Path) -> None:
    """One ``tag --index`` run per month: each compares with the month before, kept beside the index."""
    files, captures = months["files"], months["captures"]
    index, out = tmp_path / "index", tmp_path / "out"
    for month in (1, 2, 3):
        done = run_cli(
            "tag", str(files[month]), "--index", str(index), "--out", str(out), *COMMON, cwd=tmp_path
        )
        assert done.returncode == 0, done.stdout + done.stderr
        got = sidecar_changes(out / f"month-{month}.warc.gz.simhash.warc.gz")
        if month == 1:
            assert got == {captures[(1, name)]["id"]: None for name in PAGES}
        else:
            assert got == expected_changes(captures, (month,))
    assert (index / "captures.sqlite").is_file()


def test_tag_compares_only_with_an_older_capture_when_inputs_are_not_in_date_order(
    months: dict, tmp_path: Path
) -> None:
    """Month 2 tagged first: month 1, older, gets no change and does not replace month 2 as the pages'
    latest capture, which month 3 is then compared with. Month 2's revisit, tagged without its original,
    cannot be placed (its text is unknown), so month 3's identical page compares with month 1's."""
    files, captures = months["files"], months["captures"]
    index, out = tmp_path / "index", tmp_path / "out"
    for month in (2, 1, 3):
        done = run_cli(
            "tag", str(files[month]), "--index", str(index), "--out", str(out), *COMMON, cwd=tmp_path
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert set(sidecar_changes(out / "month-1.warc.gz.simhash.warc.gz").values()) == {None}
    assert set(sidecar_changes(out / "month-2.warc.gz.simhash.warc.gz").values()) == {None}
    expected = expected_changes(captures, (3,))
    first = captures[(1, "/same.html")]
    expected[captures[(3, "/same.html")]["id"]] = ("unchanged", first["id"], first["date"])
    assert sidecar_changes(out / "month-3.warc.gz.simhash.warc.gz") == expected


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


def test_tag_with_a_redis_index_compares_with_the_captures_of_earlier_runs(
    months: dict, redis_server: object, tmp_path: Path
) -> None:
    files, captures = months["files"], months["captures"]
    location = f"{redis_server.url}?prefix=tl-{uuid.uuid4().hex[:12]}"  # type: ignore[attr-defined]
    out = tmp_path / "out"
    for month in (1, 2):
        done = run_cli(
            "tag", str(files[month]), "--index", location, "--out", str(out), *COMMON, cwd=tmp_path
        )
        assert done.returncode == 0, done.stdout + done.stderr
    assert set(sidecar_changes(out / "month-1.warc.gz.simhash.warc.gz").values()) == {None}
    assert sidecar_changes(out / "month-2.warc.gz.simhash.warc.gz") == expected_changes(captures, (2,))


def test_a_record_read_twice_is_one_capture_not_an_unchanged_one(months: dict, tmp_path: Path) -> None:
    """A copy of an archive among the inputs holds the same records (same ids): not a new capture."""
    copy = tmp_path / "copy-of-month-1.warc.gz"
    copy.write_bytes(months["files"][1].read_bytes())
    report = tmp_path / "rows.jsonl"
    done = run_cli(
        "dedupe", str(months["files"][1]), str(copy), "--report", str(report), *COMMON, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert len(rows) >= 8 and all(row["text_change"] is None for row in rows)


# -- the payload digest of a record ---------------------------------------------------------------------


def _record(block: bytes, digest: str | None = None, record_type: str = "response") -> object:
    from scrapy_simhash.warc.read.links import RecordLinks
    from scrapy_simhash.warc.read.reader import ArchiveRecord

    links = RecordLinks(payload_digest=digest) if digest else None
    return ArchiveRecord(
        "x.warc", 0, record_type, "<urn:uuid:1>", "http://a/", None, None, block, links=links
    )


def test_the_payload_digest_is_the_header_when_well_formed_else_computed_from_the_payload() -> None:
    import base64
    import hashlib

    from scrapy_simhash.warc.read.payload import record_payload_digest

    body = b"<html><body>hello</body></html>"
    sha1 = hashlib.sha1(body)
    want = "sha1:" + base64.b32encode(sha1.digest()).decode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
    plain = head + b"\r\n" + body
    chunked = head + b"Transfer-Encoding: chunked\r\n\r\n" + b"a\r\n" + body[:10] + b"\r\n"
    chunked += f"{len(body) - 10:x}\r\n".encode() + body[10:] + b"\r\n0\r\n\r\n"
    assert record_payload_digest(_record(plain, "sha1:" + "A" * 32)) == "sha1:" + "A" * 32  # trusted as is
    assert record_payload_digest(_record(plain, f"SHA1:{sha1.hexdigest()}")) == want  # hex: made base32
    assert record_payload_digest(_record(plain)) == want  # none: computed
    assert record_payload_digest(_record(plain, "sha1:not-a-digest")) == want  # damaged: computed
    assert record_payload_digest(_record(plain, "sha256:" + "0" * 64)) == want  # another algorithm
    assert record_payload_digest(_record(chunked)) == want  # the payload is the de-chunked body
    assert record_payload_digest(_record(body, record_type="resource")) == want  # a resource: its block


def test_tag_with_the_crawl_index_compares_a_later_archive_with_the_crawl_s_captures(tmp_path: Path) -> None:
    """A crawl through an index, then ``tag --index`` of a later archive of the same site: each page is
    compared with the crawl's capture of its URL, named by the crawl's record id and date."""
    from change_support import changing_site, run_crawl

    index = tmp_path / "site.idx"
    with changing_site() as site:
        crawl = run_crawl(site, tmp_path / "crawl", str(index))
    base = str(site["url"]).rstrip("/")
    crawled = {
        str(r["headers"]["WARC-Target-URI"]): r["headers"]  # type: ignore[index]
        for r in crawl["records"]  # type: ignore[union-attr]
        if r["type"] == "response"
    }
    later = tmp_path / "later.warc.gz"
    pages, ids = version(2), {}
    with open(later, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.1")
        for second, name in enumerate(PAGES):
            record = writer.create_warc_record(
                base + name,
                "response",
                payload=io.BytesIO(pages[name]),
                http_headers=_http(),
                warc_headers_dict={"WARC-Date": f"2099-01-01T00:00:0{second}Z"},
            )
            writer.write_record(record)
            ids[name] = record.rec_headers.get_header("WARC-Record-ID")
    done = run_cli("tag", str(later), "--index", str(index), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    expected = {
        ids[name]: (
            KINDS[2][name],
            crawled[base + name]["WARC-Record-ID"],
            crawled[base + name]["WARC-Date"],
        )
        for name in PAGES
    }
    assert sidecar_changes(sidecar(later)) == expected


def test_a_crawl_and_tag_agree_on_pages_served_compressed(tmp_path: Path) -> None:
    """Pages served with ``Content-Encoding: gzip``: the crawl records a capture's payload digest as its
    WARC record has it (the bytes received), so ``tag --index`` of a later archive holding the same bytes
    finds them ``unchanged``, not merely ``same-text``."""
    from change_support import changing_site, run_crawl

    index = tmp_path / "site.idx"
    with changing_site() as site:
        site["gzip"] = True
        first = run_crawl(site, tmp_path / "first", str(index))
        second = run_crawl(site, tmp_path / "second", str(tmp_path / "other.idx"))  # full responses again
    encodings = {
        r["headers"].get("WARC-Target-URI"): r["http"].get("Content-Encoding")  # type: ignore[union-attr]
        for r in second["records"]  # type: ignore[union-attr]
        if r["type"] == "response"
    }
    assert {encodings.get(str(site["url"]).rstrip("/") + name) for name in PAGES} == {"gzip"}
    later = tmp_path / "later"
    later.mkdir()
    for warc in (tmp_path / "second").rglob("*.warc.gz"):
        warc.rename(later / warc.name)
    done = run_cli("tag", str(later), "--index", str(index), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    kinds = {
        change[0]
        for path in later.glob("*.simhash.warc.gz")
        for change in sidecar_changes(path).values()
        if change[0] is not None
    }
    assert kinds == {"unchanged"} and first["records"]


def test_a_damaged_capture_store_costs_the_changes_not_the_run(months: dict, tmp_path: Path) -> None:
    files = months["files"]
    index, out = tmp_path / "index", tmp_path / "out"
    done = run_cli("tag", str(files[1]), "--index", str(index), "--out", str(out), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("captures.sqlite-wal", "captures.sqlite-shm"):
        (index / name).unlink(missing_ok=True)
    (index / "captures.sqlite").write_bytes(b"not a database at all" * 100)
    done = run_cli("tag", str(files[2]), "--index", str(index), "--out", str(out), *COMMON, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "warning: the last captures beside" in done.stderr
    assert "text changes are found among this run's inputs only" in done.stderr
    got = sidecar_changes(out / "month-2.warc.gz.simhash.warc.gz")
    assert len(got) == len(PAGES) and set(got.values()) == {None}  # every page tagged, none compared


class _FailingStore:
    """A capture store whose server went away after the first look-up."""

    def __init__(self) -> None:
        self.calls = 0

    def last(self, url: str) -> None:
        from scrapy_simhash.index.archive.captures import CaptureStoreError

        self.calls += 1
        if self.calls > 1:
            raise CaptureStoreError("redis://127.0.0.1:1/0: connection refused")

    def put(self, capture: object) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_store_that_fails_during_a_run_stops_the_changes_and_says_so(months: dict, tmp_path: Path) -> None:
    from scrapy_simhash.warc.pipeline import Options
    from scrapy_simhash.warc.read.inputs import plan_inputs
    from scrapy_simhash.warc.reprocess import tag

    store = _FailingStore()
    inputs = plan_inputs([months["files"][1], months["files"][2]], tmp_path)
    summary = tag(inputs, Options(), captures=store)  # type: ignore[arg-type]
    assert summary.exit_status == 0 and store.calls == 2  # not asked again after the failure
    notes = [str(problem) for problem in summary.problems]
    assert notes == [
        "last captures: redis://127.0.0.1:1/0: connection refused; the pages read after it got no text change"
    ]
    assert set(sidecar_changes(tmp_path / "month-2.warc.gz.simhash.warc.gz").values()) == {None}


def test_captures_are_ordered_by_the_instant_of_their_date_then_input_order() -> None:
    """Offsets and fractions of a second count as the times they name; equal instants keep input order;
    a capture without a valid date is left off the timeline."""
    from scrapy_simhash.change import CHANGED, UNCHANGED
    from scrapy_simhash.index.archive.captures import Capture
    from scrapy_simhash.warc.timeline import changes

    def capture(name: str, date: str, digest: str) -> Capture:
        return Capture("http://a/", name, date, digest, f"text-{digest}", int(digest == "x") * 0xFFFF, None)

    found = changes(
        [
            ("late", capture("late", "2026-01-01T10:00:00.5Z", "x")),  # half a second after "offset"
            ("offset", capture("offset", "2026-01-01T11:00:00+01:00", "y")),  # 10:00:00Z
            ("undated", capture("undated", "yesterday", "x")),
            ("same-instant", capture("same-instant", "2026-01-01T10:00:00Z", "y")),  # after "offset": input
            ("early", capture("early", "20251231235959", "x")),  # an ARC date
        ]
    )
    assert {key: (change.kind, change.previous.record_id) for key, change in found.items()} == {
        "offset": (CHANGED, "early"),
        "same-instant": (UNCHANGED, "offset"),
        "late": (CHANGED, "same-instant"),
    }
