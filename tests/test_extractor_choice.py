"""Choosing the extractor: ``SIMHASH_EXTRACTOR`` in a crawl, ``--extractor`` on the commands.

Every fingerprint's record names the extractor that made it; these tests choose one that is not the
default and check each record names it (a record naming the default would be a fingerprint nobody
can compare), and that a name nobody registered stops a run before it starts, naming the setting or
the option to fix.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from crawl_support import REPO, demo_site, run_crawl, scrapy_crawl
from scrapy.settings import Settings
from warcio.archiveiterator import ArchiveIterator

from scrapy_simhash.extract import extractor_names
from scrapy_simhash.extract.registry import DEFAULT_NAME
from scrapy_simhash.settings import SimhashConfigError, SimhashSettings
from scrapy_simhash.warc.records import TEXT_EXTRACTOR, parse_fields

OTHERS = [name for name in extractor_names() if name != DEFAULT_NAME]
needs_another = pytest.mark.skipif(not OTHERS, reason="only one extractor is registered")
OTHER = OTHERS[0] if OTHERS else DEFAULT_NAME
WARC = "resiliparse/warcfile.warc.gz"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` as a user runs it."""
    command = [str(Path(sys.executable).with_name("scrapy-simhash")), *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


def metadata_fields(path: Path) -> list[dict[str, str]]:
    """The fields of every metadata and warcinfo record of a WARC."""
    found = []
    with path.open("rb") as stream:
        for record in ArchiveIterator(stream):
            if record.rec_type in ("metadata", "warcinfo"):
                found.append(dict(parse_fields(record.content_stream().read())))
    return found


def extractors_named(path: Path) -> set[str]:
    return {
        fields[TEXT_EXTRACTOR].split("/")[0] for fields in metadata_fields(path) if TEXT_EXTRACTOR in fields
    }


@pytest.fixture()
def archive(corpus: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "in" / "warcfile.warc.gz"
    copy.parent.mkdir()
    shutil.copyfile(corpus / "warcs" / WARC, copy)
    return copy


# -- settings -------------------------------------------------------------------------------------


def test_the_setting_defaults_to_the_registrys_default() -> None:
    assert SimhashSettings.from_settings(Settings()).extractor.name == DEFAULT_NAME


@needs_another
def test_the_setting_chooses_a_registered_extractor_with_the_body_size_cap() -> None:
    config = SimhashSettings.from_settings(
        Settings({"SIMHASH_EXTRACTOR": OTHER, "SIMHASH_MAX_BODY_SIZE": 1234})
    )
    assert config.extractor.name == OTHER and config.extractor.max_bytes == 1234
    assert config.extractor.description.startswith(f"{OTHER}/")


def test_an_unknown_extractor_is_refused_naming_the_setting_and_the_known_ones() -> None:
    with pytest.raises(SimhashConfigError) as error:
        SimhashSettings.from_settings(Settings({"SIMHASH_EXTRACTOR": "readability"}))
    assert "SIMHASH_EXTRACTOR" in str(error.value) and "'readability'" in str(error.value)
    for name in extractor_names():
        assert name in str(error.value)


def test_trafilatura_options_configure_the_trafilatura_extractor() -> None:
    config = SimhashSettings.from_settings(
        Settings({"SIMHASH_EXTRACTOR": "trafilatura", "SIMHASH_EXTRACTOR_FAVOR_PRECISION": True})
    )
    assert "precision=1" in config.extractor.description


@needs_another
@pytest.mark.skipif(OTHER == "trafilatura", reason="needs an extractor other than trafilatura")
@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("SIMHASH_EXTRACTOR_FAST", False),
        ("SIMHASH_EXTRACTOR_FAVOR_PRECISION", True),
        ("SIMHASH_EXTRACTOR_FAVOR_RECALL", True),
        ("SIMHASH_EXTRACTOR_TABLES", False),
        ("SIMHASH_EXTRACTOR_FALLBACK", "visible"),
    ],
)
def test_trafilatura_options_with_another_extractor_are_refused_not_ignored(name: str, value: object) -> None:
    with pytest.raises(SimhashConfigError) as error:
        SimhashSettings.from_settings(Settings({"SIMHASH_EXTRACTOR": OTHER, name: value}))
    assert name in str(error.value) and "SIMHASH_EXTRACTOR" in str(error.value)
    # at their defaults (as the add-on sets them) they are no reason to refuse
    default = {
        "SIMHASH_EXTRACTOR_FAST": True,
        "SIMHASH_EXTRACTOR_TABLES": True,
        "SIMHASH_EXTRACTOR_FALLBACK": "none",
    }
    SimhashSettings.from_settings(Settings({"SIMHASH_EXTRACTOR": OTHER, name: default.get(name, False)}))


# -- a crawl --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site():
    with demo_site.serve(demo_site.build_site(4)) as url:
        yield url


@needs_another
def test_a_crawl_fingerprints_with_the_chosen_extractor_and_its_records_name_it(site, tmp_path) -> None:
    warcs = tmp_path / "warcs"
    settings = {
        "SIMHASH_EXTRACTOR": OTHER,
        "SIMHASH_INDEX": str(tmp_path / "index"),
        "SIMHASH_WORKERS": 1,  # through a worker process: the extractor travels there pickled
        "SIMHASH_WARC_ENABLED": True,
        "SIMHASH_WARC_DIR": str(warcs),
        "SIMHASH_REPORT": str(tmp_path / "report.html"),
    }
    result = run_crawl(site + "/", tmp_path / "run", settings)
    assert result.stat("simhash/computed") > 5
    files = sorted(warcs.glob("*.warc.gz"))
    assert files
    fields = [f for path in files for f in metadata_fields(path)]
    named = [f[TEXT_EXTRACTOR] for f in fields if TEXT_EXTRACTOR in f]
    assert len(named) > result.stat("simhash/computed")  # every metadata record, and warcinfo
    assert all(value.startswith(f"{OTHER}/") for value in named), set(named)
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert f'<span id="extractor">{OTHER}/' in report  # the report names the crawl's extractor


def test_an_unknown_extractor_refuses_the_crawl_naming_the_setting(site, tmp_path) -> None:
    done = scrapy_crawl(
        site + "/", tmp_path, {"SIMHASH_INDEX": tmp_path / "index", "SIMHASH_EXTRACTOR": "nope"}
    )
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "SIMHASH_EXTRACTOR must name" in line]
    assert lines and "ERROR: simhash: " in lines[0], done.stderr[-3000:]
    assert "Spider opened" not in done.stderr


# -- the commands ---------------------------------------------------------------------------------


@needs_another
def test_tag_extractor_names_the_chosen_one_in_every_sidecar_record(archive: Path, tmp_path: Path) -> None:
    done = cli("tag", str(archive), "--extractor", OTHER, "--workers", "2", "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sidecar = archive.with_name(archive.name + ".simhash.warc.gz")
    assert extractors_named(sidecar) == {OTHER}
    assert sum(1 for f in metadata_fields(sidecar) if "simhash" in f) > 10


@pytest.mark.parametrize(
    "command",
    [
        ["tag"],
        ["dedupe"],
        ["fingerprint", "--html"],
        ["cdxj", "--compute"],
        ["spark", "tag"],
        ["spark", "dedupe"],
    ],
)
def test_an_unknown_extractor_is_a_usage_error_naming_the_option(
    command: list[str], archive: Path, tmp_path: Path
) -> None:
    done = cli(*command, str(archive), "--extractor", "nope", cwd=tmp_path)
    assert done.returncode == 2
    assert "--extractor" in done.stderr and "nope" in done.stderr, done.stderr
    assert all(name in done.stderr for name in extractor_names()), done.stderr  # the known names
    assert "Traceback" not in done.stderr


@needs_another
def test_dedupe_fingerprint_and_cdxj_use_the_chosen_extractor(archive: Path, tmp_path: Path, corpus) -> None:
    page = tmp_path / "page.html"
    page.write_text(
        "<html><body><article>"
        + "".join(f"<p>Paragraph {n} about the harbour and its lighthouse keepers.</p>" for n in range(9))
        + "</article></body></html>"
    )
    printed = cli("fingerprint", "--html", "--format", "json", "--extractor", OTHER, str(page), cwd=tmp_path)
    assert printed.returncode == 0, printed.stderr
    assert json.loads(printed.stdout)["extractor"].startswith(f"{OTHER}/")
    without_html = cli("fingerprint", "--extractor", OTHER, str(page), cwd=tmp_path)
    assert without_html.returncode == 2 and "--extractor applies to --html" in without_html.stderr

    cdxj = cli("cdxj", "--compute", "--extractor", OTHER, str(archive), cwd=tmp_path)
    assert cdxj.returncode == 0, cdxj.stderr
    rows = [json.loads(line.split(" ", 2)[2]) for line in cdxj.stdout.splitlines()]
    named = {row[TEXT_EXTRACTOR].split("/")[0] for row in rows if TEXT_EXTRACTOR in row}
    assert named == {OTHER}
    not_computed = cli("cdxj", "--extractor", OTHER, str(archive), cwd=tmp_path)
    assert not_computed.returncode == 2 and "--compute" in not_computed.stderr

    reports = {}
    for name in (DEFAULT_NAME, OTHER):
        report = tmp_path / f"{name}.jsonl"
        inputs = [str(archive), str(corpus / "warcs" / "resiliparse/warcfile.warc")]
        done = cli("dedupe", *inputs, "--extractor", name, "--workers", "2", "--no-progress",
                   "--report", str(report), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        reports[name] = [json.loads(line) for line in report.read_text().splitlines()]
    for name, rows in reports.items():  # every row names the extractor of the run
        assert rows and {row["extractor"].split("/")[0] for row in rows} == {name}
    # the fingerprints differ with the extractor: the chosen one reached the worker processes
    assert {r["simhash"] for r in reports[OTHER]} != {r["simhash"] for r in reports[DEFAULT_NAME]}
    # the HTML report of the rows names their extractor
    done = cli("report", str(tmp_path / f"{OTHER}.jsonl"), "-o", str(tmp_path / "r.html"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f'<span id="extractor">{OTHER}/' in (tmp_path / "r.html").read_text(encoding="utf-8")


@needs_another
def test_scrapy_simhash_tag_in_a_project_uses_the_projects_extractor(archive: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(
        REPO / "example_project", project, ignore=shutil.ignore_patterns(".scrapy", "__pycache__")
    )
    settings = project / "demo_crawler" / "settings.py"
    settings.write_text(settings.read_text() + f"\nSIMHASH_EXTRACTOR = {OTHER!r}\n")
    scrapy = str(Path(sys.executable).with_name("scrapy"))
    out = tmp_path / "out"
    common = ["--out", str(out), "--workers", "1", "--no-progress", "--index", str(tmp_path / "ix")]
    done = subprocess.run([scrapy, "simhash-tag", str(archive), *common], capture_output=True, text=True,
                          cwd=project, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert extractors_named(out / (archive.name + ".simhash.warc.gz")) == {OTHER}
    # the command line wins over the project
    again = tmp_path / "again"
    common = ["--out", str(again), "--workers", "1", "--no-progress", "--extractor", DEFAULT_NAME]
    done = subprocess.run([scrapy, "simhash-tag", str(archive), *common], capture_output=True, text=True,
                          cwd=project, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert extractors_named(again / (archive.name + ".simhash.warc.gz")) == {DEFAULT_NAME}


# -- the HTML report ------------------------------------------------------------------------------


@needs_another
def test_the_report_re_extracts_pair_texts_with_the_extractor_the_rows_name(corpus: Path) -> None:
    from scrapy_simhash.extract import extractor_for, get_extractor
    from scrapy_simhash.report.texts import fetch_texts
    from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord

    chosen = get_extractor(OTHER)
    assert extractor_for(chosen.description) == chosen
    assert extractor_for(None) is None and extractor_for("no-such-extractor/1.0;x=1") is None
    path = str(corpus / "warcs" / WARC)
    offsets = [r.offset for r in ArchiveReader("warcio").read(path) if isinstance(r, ArchiveRecord)]
    locators = [(path, offset) for offset in offsets]
    by_default = fetch_texts(locators)
    by_chosen = fetch_texts(locators, extractor=chosen)
    differ = [where for where in locators if by_chosen[where].text != by_default[where].text]
    assert differ  # the two extractors read these pages differently, and the chosen one was used
    for where in differ:
        text = by_chosen[where].text
        assert text is None or chosen(*_page_of(where)).text.startswith(text)


def _page_of(where: tuple[str, int]) -> tuple[bytes, str | None, str | None]:
    from scrapy_simhash.warc.read.payload import html_page
    from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord

    path, offset = where
    record = next(
        r for r in ArchiveReader("warcio").read(path) if isinstance(r, ArchiveRecord) and r.offset == offset
    )
    page = html_page(record)
    assert page is not None
    return page.body, page.url, page.encoding
