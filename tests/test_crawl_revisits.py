"""Revisit records in the crawl's WARCs: real crawls (child processes) of a real HTTP server on 127.0.0.1.

The site serves two URLs with byte-identical bodies (and an identical binary twice): the first
crawl writes one response and one revisit for each payload; a second crawl of the unchanged site
through the same index writes revisits only; pywb replays every revisit with the original's bytes.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from revisit_support import (
    BINARY,
    PROFILE,
    SPIDER_SCRIPT,
    Stats,
    by_type,
    fastwarc_records,
    run_crawl,
    site,
    warcio_records,
)

from scrapy_simhash.index.archive.payload_digests import DATABASE, Claim, Original
from scrapy_simhash.warc.read.reader import fastwarc_available
from scrapy_simhash.warc.records import sha1_digest

__all__ = ["site"]  # the fixture, shared with the Redis tests


@pytest.fixture(scope="module")
def crawls(site: dict[str, object], tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Two crawls of the unchanged site through one embedded index, each into its own WARC directory."""
    root = tmp_path_factory.mktemp("revisits")
    index = str(root / "index")
    first = run_crawl(site, root / "first", index)
    time.sleep(1.1)  # the second crawl's captures get later 14-digit timestamps than the first's
    second = run_crawl(site, root / "second", index)
    return {"first": first, "second": second, "index": index, "root": root}


def test_first_crawl_writes_one_response_and_one_revisit_per_identical_payload(
    crawls: dict, site: dict
) -> None:
    first = crawls["first"]
    records = warcio_records(first["warcs"])
    assert all(r["digest_ok"] is not False for r in records), [r["problems"] for r in records]
    responses = {r["headers"]["WARC-Target-URI"]: r for r in by_type(records, "response")}
    revisits = {r["headers"]["WARC-Target-URI"]: r for r in by_type(records, "revisit")}
    base = site["url"]
    pairs = [("a", "a-again"), ("bin", "bin-again")]
    for one, two in pairs:
        assert (base + one in responses) != (base + two in responses), "exactly one response per payload"
        original_uri, revisit_uri = (
            (base + one, base + two) if base + one in responses else (base + two, base + one)
        )
        original, revisit = responses[original_uri], revisits[revisit_uri]
        h = revisit["headers"]
        assert h["WARC-Profile"] == PROFILE
        assert h["WARC-Refers-To"] == original["headers"]["WARC-Record-ID"]
        assert h["WARC-Refers-To-Target-URI"] == original_uri
        assert h["WARC-Refers-To-Date"] == original["headers"]["WARC-Date"]
        body = site["routes"]["/" + one][1]
        assert h["WARC-Payload-Digest"] == original["headers"]["WARC-Payload-Digest"] == sha1_digest(body)
        assert "WARC-Truncated" not in h
        assert h["Content-Type"] == "application/http;msgtype=response"
        assert revisit["payload"] == b"" and revisit["status"] == "200"  # headers only
        assert original["payload"] == body
    # distinct payloads and empty bodies (nothing to save) are written in full
    assert {base + p for p in ("", "b", "c", "empty", "empty-again")} <= set(responses)
    assert len(revisits) == 2
    stats = first["stats"]
    assert stats["simhash/warc/revisits"] == 2
    assert stats["simhash/warc/revisit_bytes_saved"] == len(site["routes"]["/a"][1]) + len(BINARY)
    assert "simhash/warc/revisit_errors" not in stats
    # a request record for every response and revisit, concurrent to it
    ids = {r["headers"]["WARC-Record-ID"] for r in records if r["type"] in ("response", "revisit")}
    requests = by_type(records, "request")
    assert len(requests) == len(ids) and {r["headers"]["WARC-Concurrent-To"] for r in requests} == ids


def test_meta_names_the_revisit_record_and_its_original(crawls: dict, site: dict) -> None:
    first = crawls["first"]
    records = warcio_records(first["warcs"])
    written = {r["headers"]["WARC-Record-ID"]: r for r in records if r["type"] in ("response", "revisit")}
    for item in first["items"]:
        record = written[item["record_id"]]
        assert record["headers"]["WARC-Target-URI"] == item["url"]
        assert record["headers"]["WARC-Date"] == item["date"]
        if record["type"] == "revisit":
            assert item["revisit_of"] == record["headers"]["WARC-Refers-To"]
        else:
            assert item["revisit_of"] is None
    # the page's metadata record is still written, concurrent to the revisit
    metadata = by_type(records, "metadata")
    revisit_ids = {r["headers"]["WARC-Record-ID"] for r in by_type(records, "revisit")}
    assert revisit_ids & {m["headers"].get("WARC-Concurrent-To") for m in metadata}


def test_fastwarc_reads_every_record_with_valid_digests(crawls: dict) -> None:
    if not fastwarc_available():
        pytest.skip("FastWARC not installed")
    for crawl in (crawls["first"], crawls["second"]):
        fast = fastwarc_records(crawl["warcs"])
        slow = warcio_records(crawl["warcs"])
        assert [r["type"] for r in fast] == [r["type"] for r in slow]
        assert all(r["block_ok"] for r in fast)
        for f, s in zip(fast, slow, strict=True):
            assert f["headers"]["WARC-Record-ID"] == s["headers"]["WARC-Record-ID"]
            if f["type"] == "revisit":
                assert f["headers"]["WARC-Refers-To"] == s["headers"]["WARC-Refers-To"]
                assert f["status"] == 200


def test_second_crawl_of_the_unchanged_site_writes_revisits_only(crawls: dict, site: dict) -> None:
    first = warcio_records(crawls["first"]["warcs"])
    second = warcio_records(crawls["second"]["warcs"])
    originals = {r["headers"]["WARC-Record-ID"]: r for r in by_type(first, "response")}
    with_body = [r for r in by_type(second, "response") if r["payload"]]
    assert with_body == []
    revisits = by_type(second, "revisit")
    assert len(revisits) == len(site["routes"]) - 2  # every page but the two empty ones
    for r in revisits:
        original = originals[r["headers"]["WARC-Refers-To"]]  # a response of the first crawl
        assert r["headers"]["WARC-Payload-Digest"] == original["headers"]["WARC-Payload-Digest"]
        assert r["headers"]["WARC-Refers-To-Date"] == original["headers"]["WARC-Date"]
    stats = crawls["second"]["stats"]
    assert stats["simhash/warc/revisits"] == len(revisits)
    saved = sum(len(body) for body in {body for _, body in site["routes"].values()})
    duplicates = len(site["routes"]["/a"][1]) + len(BINARY)  # fetched twice, saved twice
    assert stats["simhash/warc/revisit_bytes_saved"] == saved + duplicates
    assert (Path(crawls["index"]) / DATABASE).is_file()


# -- pywb -------------------------------------------------------------------------------------------


@pytest.mark.skipif(
    not os.environ.get("SCRAPY_SIMHASH_PYWB_BIN") and not (Path(sys.executable).parent / "wayback").exists(),
    reason="pywb not found: set SCRAPY_SIMHASH_PYWB_BIN to the bin directory of a venv with pywb",
)
@pytest.mark.parametrize("indexer", ["wb-manager", "scrapy-simhash cdxj"])
def test_pywb_replays_every_url_of_both_crawls_revisits_with_the_originals_payload(
    crawls: dict, site: dict, tmp_path: Path, indexer: str
) -> None:
    """Both crawls' WARCs in one pywb collection, indexed by pywb's own ``wb-manager add`` or by this
    project's ``cdxj`` command: every capture replays byte for byte, revisits with the original's bytes."""
    from test_cdxj import PYWB, _get, wayback

    assert PYWB is not None
    root = tmp_path / "pywb"
    root.mkdir()
    subprocess.run([str(PYWB / "wb-manager"), "init", "coll"], cwd=root, check=True, capture_output=True)
    warcs = [*crawls["first"]["warcs"], *crawls["second"]["warcs"]]
    subprocess.run(
        [str(PYWB / "wb-manager"), "add", "coll", *map(str, warcs)], cwd=root, check=True, capture_output=True
    )
    if indexer == "scrapy-simhash cdxj":
        ours = subprocess.run(
            [sys.executable, "-m", "scrapy_simhash", "cdxj", *map(str, warcs)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        assert ours.count('"mime": "warc/revisit"') == len(by_type(warcio_records(warcs), "revisit"))
        (root / "collections" / "coll" / "indexes" / "index.cdxj").write_text(ours)
    captures = [r for r in warcio_records(warcs) if r["type"] in ("response", "revisit")]
    revisits = [r for r in captures if r["type"] == "revisit"]
    assert len(revisits) >= len(site["routes"])
    checked = 0
    with wayback(root) as base:
        for r in captures:
            uri = r["headers"]["WARC-Target-URI"]
            stamp = "".join(ch for ch in r["headers"]["WARC-Date"] if ch.isdigit())[:14]
            body = site["routes"]["/" + uri.removeprefix(str(site["url"]))][1]
            status, replayed = _get(f"{base}/coll/{stamp}id_/{uri}")
            assert status == 200, (uri, replayed[:300])
            assert replayed == body, uri
            checked += r["type"] == "revisit"
        for r in revisits:  # the CDX API lists each revisited URL's revisit captures as revisits
            status, rows = _get(f"{base}/coll/cdx?url={r['headers']['WARC-Target-URI']}&output=json")
            assert any(json.loads(line).get("mime") == "warc/revisit" for line in rows.decode().splitlines())
    assert checked == len(revisits)


# -- stores that cannot be used ---------------------------------------------------------------------


def _assert_all_in_full(crawl: dict[str, object], site: dict[str, object]) -> None:
    records = warcio_records(crawl["warcs"])
    assert by_type(records, "revisit") == []
    assert len(by_type(records, "response")) == len(site["routes"])
    assert "simhash/warc/revisits" not in crawl["stats"]
    assert crawl["stats"]["simhash/warc/revisit_errors"] >= 1
    assert crawl["log"].count("cannot use the payload digests") == 1, crawl["log"][-3000:]


def test_a_damaged_digest_file_writes_full_responses_and_says_so_once(site: dict, tmp_path: Path) -> None:
    index = tmp_path / "index"
    index.mkdir()
    (index / DATABASE).write_bytes(b"this is not a SQLite database\n" * 200)
    crawl = run_crawl(site, tmp_path / "crawl", str(index))
    _assert_all_in_full(crawl, site)
    assert "are damaged" in crawl["log"]
    assert (index / DATABASE).read_bytes().startswith(b"this is not")  # left as it was, for inspection


def test_a_dead_redis_writes_full_responses_and_the_crawl_goes_on(site: dict, tmp_path: Path) -> None:
    from redis_server import free_port

    crawl = run_crawl(site, tmp_path / "crawl", f"redis://127.0.0.1:{free_port()}/0?prefix=gone")
    _assert_all_in_full(crawl, site)


def test_revisits_off_writes_every_payload_in_full(site: dict, tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    run_crawl(site, tmp_path / "one", index)
    crawl = run_crawl(site, tmp_path / "two", index, SIMHASH_WARC_REVISITS=False)
    records = warcio_records(crawl["warcs"])
    assert by_type(records, "revisit") == [] and len(by_type(records, "response")) == len(site["routes"])


def test_reset_forgets_the_payloads_archived_before(site: dict, tmp_path: Path) -> None:
    index = str(tmp_path / "index")
    run_crawl(site, tmp_path / "one", index)
    crawl = run_crawl(site, tmp_path / "two", index, SIMHASH_RESET=True)
    records = warcio_records(crawl["warcs"])
    assert len(by_type(records, "revisit")) == 2  # only this crawl's own repeated payloads
    ids = {r["headers"]["WARC-Record-ID"] for r in by_type(records, "response")}
    assert {r["headers"]["WARC-Refers-To"] for r in by_type(records, "revisit")} <= ids


# -- a crawl killed between writing a response and registering its payload ----------------------------

KILL_PRELUDE = r"""
import os, sys, time
from scrapy_simhash.index.archive import payload_digests

point = sys.argv.pop()  # "before" or "after" the payload is registered
real_confirm = payload_digests.EmbeddedPayloadDigests.confirm

def confirm(self, digest, candidate):
    if candidate.uri.endswith(("/a", "/a-again")):
        if point == "after":
            real_confirm(self, digest, candidate)
        sys.stdout.write("KILL ME\n")
        sys.stdout.flush()
        time.sleep(600)
    return real_confirm(self, digest, candidate)

payload_digests.EmbeddedPayloadDigests.confirm = confirm
"""


@pytest.mark.parametrize("point", ["before", "after"])
def test_a_crawl_killed_around_registration_never_leaves_a_revisit_pointing_to_nothing(
    site: dict, tmp_path: Path, point: str
) -> None:
    """The child crawl says when it is between writing /a's response and registering its payload
    (``before``) or just after registering it (``after``), and is SIGKILLed there. The next crawl
    through the same index and WARC directory finishes the killed crawl's ``.open`` file; then every
    revisit in every finished WARC refers to a response record that is in one of them."""
    index, warc_dir, out = tmp_path / "index", tmp_path / "warcs", tmp_path / "killed"
    out.mkdir()
    script = out / "crawl.py"
    script.write_text(KILL_PRELUDE + SPIDER_SCRIPT)
    args = [str(site["url"]), str(warc_dir), str(index), str(out), "{}", point]
    child = subprocess.Popen(
        [sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=out
    )
    assert child.stdout is not None and child.stderr is not None
    try:
        line = child.stdout.readline()
        assert line == b"KILL ME\n", child.stderr.read()[-3000:]
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()
        child.stderr.close()
    assert list(warc_dir.glob("*.warc.gz.open")), "the killed crawl left its WARC open"
    after = run_crawl(site, tmp_path / "next", str(index), warc_dir)
    assert after["stats"]["simhash/warc/recovered"] == 1
    assert not list(warc_dir.glob("*.open"))
    records = warcio_records(sorted(warc_dir.glob("*.warc.gz")))
    responses = {r["headers"]["WARC-Record-ID"]: r for r in by_type(records, "response")}
    revisits = by_type(records, "revisit")
    assert revisits
    for r in revisits:
        original = responses[r["headers"]["WARC-Refers-To"]]
        assert original["headers"]["WARC-Payload-Digest"] == r["headers"]["WARC-Payload-Digest"]
        assert original["payload"], "a revisit refers to a response without its payload"
    a = site["routes"]["/a"][1]
    killed_file = [r for r in responses.values() if r["payload"] == a and r["file"] != after["warcs"][-1]]
    # the killed crawl's response for /a survived in the finished file; registered ("after"), the next
    # crawl refers to it instead of storing the payload again
    assert killed_file
    refers_to_killed = {r["headers"]["WARC-Refers-To"] for r in revisits} & {
        r["headers"]["WARC-Record-ID"] for r in killed_file
    }
    assert bool(refers_to_killed) == (point == "after")


def test_a_store_that_failed_is_tried_again_after_the_pause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """On the injected clock: no store calls during the pause (each response counted), then the store
    is opened again and revisits resume."""
    from scrapy_simhash.index.archive.payload_digests import EmbeddedPayloadDigests, PayloadDigestError
    from scrapy_simhash.warc.write.crawl_revisits import ERRORS, CrawlRevisits

    caplog.set_level(logging.INFO, logger="scrapy_simhash.warc.write.crawl_revisits")
    opened: list[str] = []
    now = [0.0]

    def open_store() -> EmbeddedPayloadDigests:
        opened.append("try")
        if len(opened) == 1:
            raise PayloadDigestError("down")
        return EmbeddedPayloadDigests(tmp_path)

    stats = Stats()
    revisits = CrawlRevisits(open_store, stats, location="here", retry_after=30.0, clock=lambda: now[0])
    one = Original("<urn:uuid:1>", "http://x/1", "d1")
    assert revisits.claim("sha1:A", one) == Claim()  # the store fails: a full response
    now[0] = 29.0
    assert revisits.claim("sha1:A", one) == Claim()  # still pausing: not tried
    assert opened == ["try"] and stats.get_value(ERRORS) == 2
    now[0] = 30.0
    assert revisits.claim("sha1:A", one).claimed
    revisits.confirm("sha1:A", one)
    assert revisits.claim("sha1:A", Original("<urn:uuid:2>", "http://x/2", "d2")).original == one
    assert opened == ["try", "try"] and stats.get_value(ERRORS) == 2
    logged = [r.getMessage() for r in caplog.records if "payload digests of here" in r.getMessage()]
    assert len(logged) == 2 and "down" in logged[0] and "work again" in logged[1]
    revisits.close()


def test_dedupe_reads_both_crawls_revisits_as_exact_duplicates_of_their_originals(
    crawls: dict, tmp_path: Path
) -> None:
    """Read back by `scrapy-simhash dedupe` (a subprocess): every revisit is found by its
    WARC-Refers-To among the two crawls' records, none is left without its original."""
    report = tmp_path / "rows.jsonl"
    warc_dirs = [str(crawls[run]["warcs"][0].parent) for run in ("first", "second")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMHASH", "SCRAPY"))}
    done = subprocess.run(
        [sys.executable, "-m", "scrapy_simhash", "dedupe", *warc_dirs, "--report", str(report)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    written = warcio_records([*crawls["first"]["warcs"], *crawls["second"]["warcs"]])
    revisits = {r["headers"]["WARC-Record-ID"]: r for r in by_type(written, "revisit")}
    revisit_rows = [row for row in rows if row.get("revisit")]
    assert len(revisit_rows) == len(revisits)
    for row in revisit_rows:
        assert row["revisit"] == "record-id", row
        assert row["revisit_of"] in {r["headers"]["WARC-Refers-To"] for r in revisits.values()}
