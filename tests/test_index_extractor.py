"""An index remembers the extractor of its pages: recorded, checked, refused, mixed on request.

Embedded and Redis (a real redis-server) through the same checks; the ``tag`` and ``index info``
commands as subprocesses. The crawl's side is in tests/test_scrapy_crawl.py.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer

from scrapy_simhash.extract import DEFAULT_EXTRACTOR, TrafilaturaExtractor
from scrapy_simhash.extract.identity import ExtractorIdentity, other_name, parse_description
from scrapy_simhash.extract.registry import DEFAULT_NAME
from scrapy_simhash.extract.resiliparse import ResiliparseExtractor
from scrapy_simhash.fingerprint.minhash import minhash
from scrapy_simhash.index import IndexCorruptError, IndexLostError, SimhashIndexError, open_index
from scrapy_simhash.index.embedded.minhash_store import MinHashIndex
from scrapy_simhash.index.extractor_record import (
    BEFORE_RECORDS,
    EXTRACTOR,
    ExtractorMismatch,
    check_extractor,
    recorded_extractors,
)

TRAFILATURA = TrafilaturaExtractor().description
PRECISION = TrafilaturaExtractor(favor_precision=True).description  # another extractor: other options
OTHER_VERSION = "trafilatura/0.0.1;" + TRAFILATURA.split(";", 1)[1]  # the same one at another version
DEFAULT = DEFAULT_EXTRACTOR.description  # what the commands use without --extractor
DEFAULT_OTHER_VERSION = f"{DEFAULT_NAME}/0.0.1+0.0.1;" + DEFAULT.split(";", 1)[1]
OTHER_NAME = ResiliparseExtractor().description  # another extractor altogether
CLI = Path(sys.executable).with_name("scrapy-simhash")


# -- the description ----------------------------------------------------------------------------


def test_a_description_parses_into_name_version_and_options():
    parsed = parse_description("trafilatura/2.0.0;fast=1;comments=0;fallback=none")
    assert parsed == ExtractorIdentity(
        "trafilatura", "2.0.0", (("fast", "1"), ("comments", "0"), ("fallback", "none"))
    )
    assert parse_description("fastex") == ExtractorIdentity("fastex", "", ())
    assert parse_description(OTHER_NAME).name == "resiliparse"
    assert parse_description(TRAFILATURA).same_extractor(parse_description(OTHER_VERSION))
    assert not parse_description(TRAFILATURA).same_extractor(parse_description(PRECISION))
    assert parse_description(TRAFILATURA).differences(parse_description(PRECISION)) == "precision=0 -> 1"
    assert (
        parse_description(TRAFILATURA)
        .differences(parse_description(OTHER_NAME))
        .startswith("name trafilatura")
    )


@pytest.mark.parametrize("bad", ["", "/2.0", "trafilatura/2.0;fast", "trafilatura;=1", "two words/1"])
def test_a_malformed_description_is_a_value_error(bad):
    with pytest.raises(ValueError, match="not an extractor description"):
        parse_description(bad)


def test_the_name_to_switch_back_to_is_the_recorded_one_only_when_the_names_differ():
    assert other_name(TRAFILATURA, DEFAULT) == "trafilatura"
    assert other_name(PRECISION, TRAFILATURA) is None  # options differ: no name switches back
    assert other_name(OTHER_VERSION, TRAFILATURA) is None
    assert other_name("two words/1", TRAFILATURA) == "two words/1"  # read as a name of its own, not refused
    assert ExtractorIdentity.read("two words/1") == ExtractorIdentity("two words/1", "", ())


# -- the record, on both backends ---------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield srv
    srv.stop()


@pytest.fixture(params=["embedded", "redis"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "embedded":
        return str(tmp_path / "index")
    server = request.getfixturevalue("server")
    return f"{server.url}?prefix=extractor-{uuid.uuid4().hex[:12]}"


def _with_page(location: str, extractor: str | None) -> None:
    """An index holding one page, recording ``extractor`` (None: recording nothing, as before)."""
    with open_index(location) as index:
        if extractor is not None:
            assert check_extractor(index, extractor).outcome == "recorded"
        index.add(0x1234_5678_9ABC_DEF0, "https://example.org/a")


def _reset(location: str) -> None:
    """Empty the index as SIMHASH_RESET does: a new index under the same name."""
    if "://" in location:
        with open_index(location) as index:
            index.clear()
    else:
        open_index(location, reset=True).close()


def _recorded(location: str) -> tuple[str | None, tuple[str, ...]]:
    with open_index(location) as index:
        return recorded_extractors(index.notes())


def test_a_new_index_records_the_first_extractor_and_keeps_it(location):
    _with_page(location, TRAFILATURA)
    assert _recorded(location) == (TRAFILATURA, ())
    with open_index(location) as index:
        check = check_extractor(index, TRAFILATURA)
    assert (check.outcome, check.recorded) == ("same", TRAFILATURA)


def test_another_extractor_is_refused_naming_both_and_the_index_keeps_its_own(location):
    _with_page(location, TRAFILATURA)
    with open_index(location) as index, pytest.raises(ExtractorMismatch) as refused:
        check_extractor(index, PRECISION)
    assert (refused.value.recorded, refused.value.current) == (TRAFILATURA, PRECISION)
    assert refused.value.differences == "precision=0 -> 1"
    assert _recorded(location) == (TRAFILATURA, ())


def test_mixing_keeps_the_first_extractor_and_records_the_others(location):
    _with_page(location, TRAFILATURA)
    for _ in range(2):  # asked twice: listed once
        with open_index(location) as index:
            check = check_extractor(index, PRECISION, mix=True)
        assert (check.outcome, check.recorded, check.mixed) == ("mixed", TRAFILATURA, (PRECISION,))
    assert _recorded(location) == (TRAFILATURA, (PRECISION,))
    with open_index(location) as index:  # the first extractor goes on, told that the index is mixed
        check = check_extractor(index, TRAFILATURA)
    assert (check.outcome, check.mixed) == ("same", (PRECISION,))
    with open_index(location) as index, pytest.raises(ExtractorMismatch):  # mixing is asked for each time
        check_extractor(index, PRECISION)


def test_a_difference_only_in_the_version_is_accepted_and_the_record_kept(location):
    _with_page(location, OTHER_VERSION)
    with open_index(location) as index:
        check = check_extractor(index, TRAFILATURA)
    assert (check.outcome, check.recorded) == ("version", OTHER_VERSION)
    assert _recorded(location) == (OTHER_VERSION, ())


def test_an_index_written_before_records_is_taken_as_trafilatura(location):
    _with_page(location, None)
    assert _recorded(location) == (None, ())
    with open_index(location) as index, pytest.raises(ExtractorMismatch) as refused:
        check_extractor(index, OTHER_NAME)  # the only extractor there was is not this one
    assert refused.value.before_records and refused.value.recorded == BEFORE_RECORDS
    assert _recorded(location) == (None, ())
    with open_index(location) as index:  # trafilatura: taken as the index's, with a warning, and recorded
        check = check_extractor(index, PRECISION)
    assert (check.outcome, check.recorded) == ("assumed", PRECISION)
    assert _recorded(location) == (PRECISION, ())


def test_an_index_written_before_records_can_be_mixed_with_another_extractor(location):
    _with_page(location, None)
    with open_index(location) as index:
        check = check_extractor(index, OTHER_NAME, mix=True)
    assert (check.outcome, check.recorded, check.mixed) == ("mixed", BEFORE_RECORDS, (OTHER_NAME,))
    assert _recorded(location) == (BEFORE_RECORDS, (OTHER_NAME,))
    with open_index(location) as index:  # trafilatura of unknown options: the next trafilatura run's
        check = check_extractor(index, TRAFILATURA)
    assert (check.outcome, check.recorded) == ("assumed", TRAFILATURA)
    assert _recorded(location) == (TRAFILATURA, (OTHER_NAME,))


def test_an_index_keeps_its_record_when_emptied(location):
    """The record goes with the index, not with its pages: only a reset (a new index) forgets it, so
    that two crawlers starting at once on a new server index cannot each record their own."""
    _with_page(location, TRAFILATURA)
    with open_index(location) as index:
        assert index.remove("https://example.org/a")
        with pytest.raises(ExtractorMismatch):
            check_extractor(index, OTHER_NAME)
    _reset(location)
    with open_index(location) as index:
        assert check_extractor(index, OTHER_NAME).outcome == "recorded"
    assert _recorded(location) == (OTHER_NAME, ())


def test_a_note_is_compare_and_set(location):
    """A record is never overwritten unless the writer names the value it replaces, so two writers
    opening an index at once with different extractors agree on the first one's."""
    with open_index(location) as index:
        assert index.note(EXTRACTOR, TRAFILATURA) == TRAFILATURA
        assert index.note(EXTRACTOR, PRECISION) == TRAFILATURA
        assert index.note(EXTRACTOR, PRECISION, replacing=OTHER_NAME) == TRAFILATURA
        assert index.note(EXTRACTOR, PRECISION, replacing=TRAFILATURA) == PRECISION
    assert _recorded(location) == (PRECISION, ())


def test_two_crawlers_opening_a_redis_index_at_once_agree_on_one_extractor(server):
    uri = f"{server.url}?prefix=extractor-{uuid.uuid4().hex[:12]}"
    with open_index(uri) as first, open_index(uri) as second:
        assert recorded_extractors(first.notes()) == (None, ())  # both saw no record
        assert recorded_extractors(second.notes()) == (None, ())
        assert check_extractor(first, TRAFILATURA).outcome == "recorded"
        with pytest.raises(ExtractorMismatch):
            check_extractor(second, PRECISION)
    assert _recorded(uri) == (TRAFILATURA, ())


class _RivalBetweenReads:
    """A Redis index on which another crawler records its extractor and stores a page right after this
    one has read the (still empty) notes: the moment between the check's two reads."""

    def __init__(self, index, rival_extractor: str, uri: str) -> None:
        self.index, self.rival, self.uri, self.reads = index, rival_extractor, uri, 0

    def __len__(self) -> int:
        return len(self.index)

    def notes(self) -> dict[str, str]:
        notes = self.index.notes()
        self.reads += 1
        if self.reads == 1:
            _with_page(self.uri, self.rival)
        return notes

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str:
        return self.index.note(name, value, replacing=replacing)


@pytest.mark.parametrize("mine", [OTHER_NAME, TRAFILATURA])
def test_a_crawler_that_finds_a_new_namespace_filled_meanwhile_compares_with_the_rivals_record(server, mine):
    """Notes empty, then pages: another crawler recorded its extractor in between. The check compares
    with that record, not with an index "written before records" (a wrong refusal message, and with
    mixing a wrong ``trafilatura`` record)."""
    uri = f"{server.url}?prefix=extractor-{uuid.uuid4().hex[:12]}"
    with open_index(uri) as index:
        raced = _RivalBetweenReads(index, TRAFILATURA, uri)
        if mine == TRAFILATURA:
            assert check_extractor(raced, mine).outcome == "same"
        else:
            with pytest.raises(ExtractorMismatch) as refused:
                check_extractor(raced, mine)
            assert (refused.value.recorded, refused.value.before_records) == (TRAFILATURA, False)
            assert "before indexes recorded" not in str(refused.value)
            mixed = check_extractor(index, mine, mix=True)  # the rival has recorded: mixing adds this one
            assert (mixed.outcome, mixed.recorded) == ("mixed", TRAFILATURA)
    assert _recorded(uri)[0] == TRAFILATURA


def test_an_embedded_note_is_a_checksummed_acknowledged_write(tmp_path):
    """The record is in the database's settings, under their checksum, and moves the commit mark:
    the reopened index has it, and damage to it is found."""
    import sqlite3

    from scrapy_simhash.index import IndexCorruptError

    location = tmp_path / "index"
    _with_page(str(location), TRAFILATURA)
    with open_index(location, read_only=True) as index:
        assert index.notes() == {EXTRACTOR: TRAFILATURA}
    with sqlite3.connect(location / "index.sqlite3") as db:
        db.execute("UPDATE settings SET value = ? WHERE name = 'note:extractor'", (PRECISION,))
    db.close()
    with pytest.raises(IndexCorruptError, match="settings fail their checksum"):
        open_index(location)


def test_an_index_written_before_checksums_records_its_extractor_once_upgraded(tmp_path):
    """The oldest embedded databases (no row checksums, no settings check, no format) are converted by
    the upgrade, which records nothing about their extractor: the first writer of the new index takes
    them as trafilatura's, under the settings' checksum."""
    import sqlite3

    from scrapy_simhash.index.embedded.embedded import SimhashIndex
    from scrapy_simhash.index.upgrade import upgrade

    path, new = tmp_path / "index", tmp_path / "new"
    _with_page(str(path), None)
    with sqlite3.connect(path / "index.sqlite3") as db:
        db.execute("ALTER TABLE entries DROP COLUMN chk")
        db.execute("DELETE FROM settings WHERE name IN ('check', 'format')")
    db.close()
    (path / "COMMITTED").unlink()
    upgrade(path, new)
    with SimhashIndex(new, read_only=True) as index:
        assert index.notes() == {}
    with SimhashIndex(new) as index:
        assert check_extractor(index, TRAFILATURA).outcome == "assumed"
    with SimhashIndex(new) as index:
        settings = index._store.settings()  # verified against their checksum
    assert settings["format"] == "3" and settings["note:extractor"] == TRAFILATURA


def test_a_redis_namespace_that_lost_its_data_records_nothing(server):
    """The record is made by the index's script, which checks the namespace's epoch: a Redis that
    restarted empty is reported, not given a config with nothing but the record."""
    uri = f"{server.url}?prefix=extractor-{uuid.uuid4().hex[:12]}"
    with open_index(uri) as index:
        server.client().flushall()
        with pytest.raises(IndexLostError):
            index.note(EXTRACTOR, TRAFILATURA)
    assert not server.client().keys("*")


# -- the commands -------------------------------------------------------------------------------


@pytest.fixture
def warc(corpus: Path, tmp_path: Path) -> Path:
    """A copy of a small corpus archive (its sidecar is written beside it)."""
    target = tmp_path / "in" / "warcfile.warc.gz"
    target.parent.mkdir()
    shutil.copyfile(corpus / "warcs" / "resiliparse" / "warcfile.warc.gz", target)
    return target


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=180)


def _tag(warc: Path, index: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _cli("tag", warc, "--index", index, "--workers", "1", "--no-progress", *extra, cwd=warc.parent)


def test_tag_into_an_index_of_another_extractor_is_refused_then_allowed_with_mix_extractors(warc, tmp_path):
    index = tmp_path / "index"
    _with_page(str(index), PRECISION)
    sidecar = warc.with_name(warc.name + ".simhash.warc.gz")

    refused = _tag(warc, index, "--extractor", "trafilatura")
    assert refused.returncode == 2, refused.stderr
    [line] = [line for line in refused.stderr.splitlines() if line.strip()]
    assert f"the index {index} stores pages fingerprinted by the extractor {PRECISION}" in line
    assert f"this run's is {TRAFILATURA} (precision=1 -> 0)" in line
    assert "Re-fingerprint into a new index (--index NEW_DIR), or pass --mix-extractors" in line
    assert "--extractor" not in line  # the name is the index's already: only options differ
    assert not sidecar.exists()
    with open_index(index, read_only=True) as stored:
        assert len(stored) == 1 and stored.notes() == {EXTRACTOR: PRECISION}

    allowed = _tag(warc, index, "--extractor", "trafilatura", "--mix-extractors")
    assert allowed.returncode == 0, allowed.stderr
    assert f"adds pages made by {TRAFILATURA}, as asked" in allowed.stderr
    assert sidecar.exists()
    with open_index(index, read_only=True) as stored:
        assert len(stored) > 1
        assert recorded_extractors(stored.notes()) == (PRECISION, (TRAFILATURA,))


@pytest.mark.parametrize("recorded", [TRAFILATURA, None])
def test_an_index_of_the_former_default_refuses_the_default_and_names_the_way_back(warc, tmp_path, recorded):
    """An index filled by trafilatura, the default until 2026-11-27 (recorded, or written before records):
    a run with today's default refuses it, says which --extractor reads it as before, and that one does."""
    index = tmp_path / "index"
    _with_page(str(index), recorded)
    refused = _tag(warc, index)
    assert refused.returncode == 2, refused.stderr
    assert f"this run's is {DEFAULT} (name trafilatura -> {DEFAULT_NAME})" in refused.stderr
    assert "Pass --extractor trafilatura (the index's extractor)" in refused.stderr
    with open_index(index, read_only=True) as stored:
        assert len(stored) == 1
    again = _tag(warc, index, "--extractor", "trafilatura")
    assert again.returncode == 0, again.stderr
    with open_index(index, read_only=True) as stored:
        assert len(stored) > 1 and recorded_extractors(stored.notes())[0] == TRAFILATURA


def test_dedupe_into_an_index_of_another_extractor_is_refused_then_allowed(warc, tmp_path):
    index, report = tmp_path / "index", tmp_path / "report.jsonl"
    _with_page(str(index), OTHER_NAME)
    command = ("dedupe", warc, "--index", index, "--report", report, "--workers", "1", "--no-progress")
    refused = _cli(*command, cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"stores pages fingerprinted by the extractor {OTHER_NAME}, and this run's is {DEFAULT}" in (
        refused.stderr
    )
    assert not report.exists()
    allowed = _cli(*command, "--mix-extractors", cwd=tmp_path)
    assert allowed.returncode == 0, allowed.stderr
    with open_index(index, read_only=True) as stored:
        assert recorded_extractors(stored.notes()) == (OTHER_NAME, (DEFAULT,))


def test_tag_into_an_index_of_another_version_warns_and_goes_on(warc, tmp_path):
    index = tmp_path / "index"
    _with_page(str(index), DEFAULT_OTHER_VERSION)
    done = _tag(warc, index)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "the same extractor and options at another version" in warnings[0]
    assert "files: 1 processed" in done.stdout
    with open_index(index, read_only=True) as stored:
        assert len(stored) > 1 and stored.notes() == {EXTRACTOR: DEFAULT_OTHER_VERSION}


def test_tag_records_its_extractor_in_a_new_index_and_index_info_shows_it(warc, tmp_path):
    index = tmp_path / "index"
    done = _tag(warc, index)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    info = _cli("index", "info", index, cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert f"extractor: {DEFAULT}\n" in info.stdout
    assert "mixed with" not in info.stdout
    _with_page(str(tmp_path / "old"), None)
    old = _cli("index", "info", tmp_path / "old", cwd=tmp_path)
    assert "extractor: not recorded (written before indexes recorded their extractor)" in old.stdout


def test_scrapy_simhash_tag_mixes_when_the_project_allows_it(warc, tmp_path):
    """Inside Scrapy the setting is the option: SIMHASH_EXTRACTOR_MIX = True is --mix-extractors."""
    index = tmp_path / "index"
    _with_page(str(index), PRECISION)
    scrapy = Path(sys.executable).with_name("scrapy")
    command = [str(scrapy), "simhash-tag", str(warc), "--index", str(index), "--workers", "1"]
    command.append("--no-progress")
    refused = subprocess.run(command, capture_output=True, text=True, cwd=warc.parent, timeout=180)
    assert refused.returncode == 2 and "pass --mix-extractors" in refused.stderr
    command += ["-s", "SIMHASH_EXTRACTOR_MIX=True"]
    mixed = subprocess.run(command, capture_output=True, text=True, cwd=warc.parent, timeout=180)
    assert mixed.returncode == 0, mixed.stderr
    with open_index(index, read_only=True) as stored:
        assert recorded_extractors(stored.notes()) == (PRECISION, (DEFAULT,))


# -- MinHash-kind indexes: the same record, the same outcomes ------------------------------------


def _minhash(path: Path, **options) -> MinHashIndex:
    return open_index(path, kind="minhash", **options)


def _with_sketch(path: Path, extractor: str | None) -> None:
    """A MinHash index holding one page, recording ``extractor`` (None: nothing, as before)."""
    with _minhash(path) as index:
        if extractor is not None:
            assert check_extractor(index, extractor).outcome == "recorded"
        index.add("https://example.org/a", minhash("one page of main text, made into a sketch"))


def test_a_minhash_index_records_its_extractor_with_the_same_outcomes(tmp_path):
    path = tmp_path / "minhash"
    _with_sketch(path, TRAFILATURA)
    with _minhash(path) as index:
        assert index.notes() == {EXTRACTOR: TRAFILATURA}
        assert check_extractor(index, TRAFILATURA).outcome == "same"
        assert check_extractor(index, OTHER_VERSION).outcome == "version"
        with pytest.raises(ExtractorMismatch) as refused:
            check_extractor(index, PRECISION)
        assert refused.value.differences == "precision=0 -> 1"
        check = check_extractor(index, PRECISION, mix=True)
        assert (check.outcome, check.recorded, check.mixed) == ("mixed", TRAFILATURA, (PRECISION,))
    with _minhash(path, read_only=True) as reader:  # durable, and seen by a reader
        assert recorded_extractors(reader.notes()) == (TRAFILATURA, (PRECISION,))
        with pytest.raises(SimhashIndexError, match="read-only"):
            reader.note(EXTRACTOR, OTHER_NAME)
    _minhash(path, reset=True).close()  # a reset is a new index: it forgets the record
    with _minhash(path) as index:
        assert index.notes() == {}


def test_a_minhash_index_written_before_records_is_taken_as_trafilatura(tmp_path):
    _with_sketch(tmp_path / "old", None)
    with _minhash(tmp_path / "old") as index:
        assert check_extractor(index, TRAFILATURA).outcome == "assumed"
        assert index.notes() == {EXTRACTOR: TRAFILATURA}
    _with_sketch(tmp_path / "other", None)
    with _minhash(tmp_path / "other") as index:
        with pytest.raises(ExtractorMismatch) as refused:
            check_extractor(index, OTHER_NAME)
        assert refused.value.before_records and refused.value.recorded == BEFORE_RECORDS
        assert check_extractor(index, OTHER_NAME, mix=True).outcome == "mixed"
        assert recorded_extractors(index.notes()) == (BEFORE_RECORDS, (OTHER_NAME,))


def test_a_minhash_note_is_an_acknowledged_write_under_the_settings_checksum(tmp_path):
    """The note moves the commit mark like any write, and the settings stay signed: the index reopens
    (verified) with its sketches and the note, and a write after the note gets a later seq."""
    import sqlite3

    from scrapy_simhash.index.embedded.integrity import read_mark

    path = tmp_path / "minhash"
    _with_sketch(path, None)
    before = read_mark(path)
    with _minhash(path) as index:
        assert index.note(EXTRACTOR, TRAFILATURA) == TRAFILATURA
        assert index.note(EXTRACTOR, OTHER_NAME) == TRAFILATURA  # compare-and-set: the first stays
        index.add("https://example.org/b", minhash("another page of main text"))
    after = read_mark(path)
    assert after.high == before.high + 2  # the note, then the insert
    with _minhash(path, read_only=True) as index:
        assert index.notes() == {EXTRACTOR: TRAFILATURA} and len(index) == 2
    with sqlite3.connect(path / "minhash.sqlite3") as db:  # a hand-edited note fails the checksum
        db.execute("UPDATE settings SET value = ? WHERE name = 'note:extractor'", (OTHER_NAME,))
    with pytest.raises(IndexCorruptError, match="checksum"):
        _minhash(path, read_only=True)


def test_dedupe_minhash_records_its_extractor_and_refuses_another(warc, tmp_path):
    index, report = tmp_path / "minhash", tmp_path / "report.jsonl"
    command = ("dedupe", warc, "--method", "minhash", "--index", index, "--report", report)
    command += ("--workers", "1", "--no-progress")
    first = _cli(*command, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "warning" not in first.stderr
    with _minhash(index, read_only=True) as stored:
        assert stored.notes() == {EXTRACTOR: DEFAULT} and len(stored) > 0
    info = _cli("index", "info", index, cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert f"index: {index} (minhash)\n" in info.stdout and f"extractor: {DEFAULT}\n" in info.stdout
    report.unlink()
    refused = _cli(*command, "--extractor", "resiliparse", cwd=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"the index {index} stores pages fingerprinted by the extractor {DEFAULT}" in refused.stderr
    assert f"this run's is {OTHER_NAME}" in refused.stderr and "--mix-extractors" in refused.stderr
    assert not report.exists()
    mixed = _cli(*command, "--extractor", "resiliparse", "--mix-extractors", cwd=tmp_path)
    assert mixed.returncode == 0, mixed.stderr
    assert f"adds pages made by {OTHER_NAME}, as asked" in mixed.stderr
    with _minhash(index, read_only=True) as stored:
        assert recorded_extractors(stored.notes()) == (DEFAULT, (OTHER_NAME,))
    assert f"mixed with: {OTHER_NAME}" in _cli("index", "info", index, cwd=tmp_path).stdout


def test_dedupe_minhash_into_redis_warns_that_it_cannot_record_the_extractor(warc, server, tmp_path):
    """The Redis MinHash index keeps no notes: the run goes on and says so, once."""
    uri = f"{server.url}?prefix=minhash-{uuid.uuid4().hex[:12]}"
    command = ("dedupe", warc, "--method", "minhash", "--index", uri, "--report", tmp_path / "r.jsonl")
    done = _cli(*command, "--workers", "1", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "cannot record the extractor of its pages" in warnings[0]
    assert f"this run's is {DEFAULT}" in warnings[0]
