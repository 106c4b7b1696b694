"""The report's capture timeline: two real crawls of a local site whose pages change in known ways
(tests/change_support.py), then ``scrapy-simhash report`` over both crawls' WARCs as a subprocess from a
clean environment; the timeline data the page embeds, the word diffs, ``--timeline URL``, bad input,
and the view in headless Chromium (tests/browser.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from browser import ARTIFACTS, Browser, chromium_or_skip
from change_support import (
    EDIT_2,
    EXPECTED,
    REWRITTEN,
    article,
    changing_site,
    metadata_by_path,
    run_crawl,
    version,
)
from hypothesis import given
from hypothesis import strategies as st
from test_report import run_cli

from scrapy_simhash.report.textdiff import inline_diff
from scrapy_simhash.report.timeline.diffs import diff_steps
from scrapy_simhash.report.timeline.model import NOT_RECORDED, Capture, build_timelines, timeline_of
from scrapy_simhash.warc.read.reader import ArchiveReader

ARTICLES = ["/same.html", "/ad.html", "/edit.html", "/rewrite.html"]


@pytest.fixture(scope="module")
def crawls(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """Versions 1 and 2 of the site crawled in turn through one index; the WARC directories, the
    second crawl's records and the site's base URL."""
    root = tmp_path_factory.mktemp("timeline")
    with changing_site() as site:
        first = run_crawl(site, root / "v1", str(root / "index"))
        site["pages"] = version(2)
        second = run_crawl(site, root / "v2", str(root / "index"))
        base = str(site["url"])
    return {
        "root": root,
        "v1": root / "v1" / "warcs",
        "v2": root / "v2" / "warcs",
        "first": first,
        "second": second,
        "base": base,
    }


def timeline_data(page: Path) -> list[dict[str, object]]:
    """The timelines a page embeds (the JSON its script lists)."""
    match = re.search(
        r'<script type="application/json" id="timeline-data">(.*?)</script>', page.read_text(), re.S
    )
    assert match, "no timeline data in the page"
    return json.loads(match.group(1))["timelines"]


def by_path(timelines: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {urlsplit(str(t["uri"])).path: t for t in timelines}


def step_kinds(timeline: dict[str, object]) -> list[str]:
    return [s["kind"] for s in timeline["steps"] if s is not None]  # type: ignore[union-attr]


def changed_words(step: dict[str, object], tag: str) -> set[str]:
    return {w for run in step["diff"] if run[0] == tag for w in str(run[1]).split()}  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def report(crawls: dict[str, object]) -> Path:
    out = Path(str(crawls["root"])) / "report.html"
    done = run_cli("report", str(crawls["v1"]), str(crawls["v2"]), "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_the_timeline_lists_exactly_the_urls_captured_twice_with_their_recorded_kinds(
    crawls: dict[str, object], report: Path
) -> None:
    timelines = by_path(timeline_data(report))
    assert set(timelines) == set(ARTICLES)  # the front page has no main text: not fingerprinted, no timeline
    fields = metadata_by_path(crawls["second"])  # type: ignore[arg-type]
    for path, kind in EXPECTED[2].items():
        timeline = timelines[path]
        assert step_kinds(timeline) == [kind]
        first, second = timeline["captures"]  # type: ignore[misc]
        assert first[0] < second[0]  # oldest first
        (step,) = [s for s in timeline["steps"] if s]  # type: ignore[union-attr]
        assert step["sim"] == pytest.approx(float(fields[path]["text-similarity"]))
    # the second crawl wrote a revisit for the identical page: it is a capture like any other
    assert [c[3] for c in timelines["/same.html"]["captures"]] == ["response", "revisit"]  # type: ignore[index]
    summary = re.search(r'id="timeline-summary" data-urls="(\d+)"', report.read_text())
    assert summary and summary.group(1) == "4"


def test_the_diffs_hold_the_removed_and_added_words_and_identical_texts_none(report: Path) -> None:
    timelines = by_path(timeline_data(report))
    (edit,) = [s for s in timelines["/edit.html"]["steps"] if s]  # type: ignore[union-attr]
    old_words = {w for sentence in article(9) for w in sentence.split()}
    new_words = set(" ".join(article(9, edits={4: EDIT_2})).split())
    added, removed = changed_words(edit, "+"), changed_words(edit, "-")
    assert {w for w in EDIT_2.split() if w not in old_words} <= added
    assert {w for w in article(9)[4].split() if w not in new_words} <= removed
    assert not added & {"Council", "plans"}  # the title and the unchanged sentences are not marked
    assert any(run[0] == "…" for run in edit["diff"])  # long unchanged runs are folded
    (rewrite,) = [s for s in timelines["/rewrite.html"]["steps"] if s]  # type: ignore[union-attr]
    assert set(REWRITTEN[0].split()) - old_words <= changed_words(rewrite, "+")
    for path in ("/same.html", "/ad.html"):
        (step,) = [s for s in timelines[path]["steps"] if s]  # type: ignore[union-attr]
        assert step["diff"] is None and step["why"] == "main text identical (as recorded)"


def test_timeline_diffs_are_capped_and_the_page_says_so(crawls: dict[str, object], tmp_path: Path) -> None:
    out = tmp_path / "capped.html"
    done = run_cli("report", str(crawls["v1"]), str(crawls["v2"]), "-o", str(out), "--timeline-diffs", "1")
    assert done.returncode == 0, done.stderr
    timelines = timeline_data(out)
    assert [urlsplit(str(t["uri"])).path for t in timelines[:2]] == [
        "/rewrite.html",
        "/edit.html",
    ]  # most changed
    (first,) = [s for s in timelines[0]["steps"] if s]  # type: ignore[union-attr]
    (second,) = [s for s in timelines[1]["steps"] if s]  # type: ignore[union-attr]
    assert first["diff"] and second["diff"] is None
    assert second["why"].startswith("word diff not embedded")
    assert "Word diffs are\nembedded for the 1 most changed" in out.read_text()


def test_timeline_url_writes_that_url_s_history(crawls: dict[str, object], tmp_path: Path) -> None:
    out = tmp_path / "edit.html"
    url = f"{crawls['base']}edit.html"
    done = run_cli("report", str(crawls["v2"]), str(crawls["v1"]), "-o", str(out), "--timeline", url)
    assert done.returncode == 0, done.stderr
    assert f"{url}: 2 captures, 1 text changes" in done.stderr
    (timeline,) = timeline_data(out)
    assert timeline["uri"] == url and step_kinds(timeline) == [
        "minor"
    ]  # inputs given newest first: dates order
    assert "pontoon" in changed_words(next(s for s in timeline["steps"] if s), "+")  # type: ignore[arg-type]
    wrong = run_cli("report", str(crawls["v1"]), "-o", str(tmp_path / "x.html"), "--timeline", url[:-1])
    assert wrong.returncode == 2
    assert f"no capture of {url[:-1]} in the inputs; captured URLs like it: {url}" in wrong.stderr


def test_a_raw_archive_gets_the_advice_to_tag_it_first(corpus: Path, tmp_path: Path) -> None:
    """A URL captured in an archive that no crawl or ``tag`` fingerprinted: not "no capture" (there is
    one) but what to do to get its timeline."""
    warc = corpus / "warcs/aut/warc/example.warc.gz"
    url = next(
        r.target_uri for r in ArchiveReader().read(warc) if getattr(r, "record_type", "") == "response"
    )
    done = run_cli("report", str(warc), "-o", str(tmp_path / "t.html"), "--timeline", url)
    assert done.returncode == 2
    assert "no fingerprinted capture" in done.stderr and "scrapy-simhash tag ARCHIVES" in done.stderr


# -- bad input ---------------------------------------------------------------------------------------


def test_a_url_captured_once_has_a_timeline_of_one_capture(crawls: dict[str, object], tmp_path: Path) -> None:
    out = tmp_path / "one.html"
    done = run_cli("report", str(crawls["v1"]), "-o", str(out), "--timeline", f"{crawls['base']}edit.html")
    assert done.returncode == 0, done.stderr
    (timeline,) = timeline_data(out)
    assert len(timeline["captures"]) == 1 and timeline["steps"] == [None]  # type: ignore[arg-type]
    assert "one capture of this URL in the inputs: nothing to compare" in out.read_text()
    overview = tmp_path / "overview.html"
    assert run_cli("report", str(crawls["v1"]), "-o", str(overview)).returncode == 0
    assert timeline_data(overview) == []
    assert 'data-urls="0">0 URLs captured more than once' in overview.read_text()


def test_a_crawl_s_revisited_pages_are_pages_at_their_revisit_records(crawls: dict[str, object]) -> None:
    """The second crawl writes a revisit record for a page whose bytes it archived before, and a metadata
    record describing the page: the report's page is at that revisit record (it was at ``file#None``,
    and two revisited pages of one file were taken for one)."""
    from scrapy_simhash.report.warcs import read_pages

    pages, _, _ = read_pages([str(crawls["v1"]), str(crawls["v2"])])
    second = crawls["second"]["records"]  # type: ignore[index]
    revisits = {
        r["headers"]["WARC-Target-URI"]
        for r in second
        if r["type"] == "revisit"  # type: ignore[index]
    }
    described = [
        r for crawl in ("first", "second") for r in crawls[crawl]["records"] if r["fields"].get("simhash")
    ]  # type: ignore[index]
    assert revisits and len(pages) == len(described)
    assert all(page.offset is not None for page in pages)
    assert len({page.key for page in pages}) == len(pages)


def test_captures_of_the_same_date_keep_the_input_order_and_say_so() -> None:
    date = "2026-11-20T08:00:00Z"
    captures = [
        Capture("http://a/", date, "/w/b.warc.gz", 10, "<b>", order=1, kind="minor", previous_id="<a>"),
        Capture("http://a/", date, "/w/a.warc.gz", 10, "<a>", order=0),
        Capture("http://a/", "2026-11-20T07:59:59.5Z", "/w/c.warc.gz", 10, "<c>", order=2),
        Capture("http://a/", None, "/w/d.warc.gz", 10, "<d>", order=3),
    ]
    timeline = timeline_of("http://a/", captures)
    assert [c.record_id for c in timeline.captures] == ["<c>", "<a>", "<b>", "<d>"]  # no date: last
    steps = timeline.steps
    assert steps[0] is None and steps[1] is not None and steps[1].kind == NOT_RECORDED
    assert steps[2] is not None and steps[2].kind == "minor"
    assert steps[2].note == "the same date as the capture before"


def test_captures_are_ordered_by_the_instant_of_their_dates_as_dedupe_orders_them() -> None:
    """Offsets, precisions and ARC's 14 digits are compared as times: 10:00+02:00 is before 09:00Z."""
    captures = [
        Capture("http://a/", "2026-01-01T09:00:00Z", "/w/1", 0, "<utc>", order=0),
        Capture("http://a/", "2026-01-01T10:00:00+02:00", "/w/2", 0, "<plus-two>", order=1),
        Capture("http://a/", "20260101083000", "/w/3.arc", 0, "<arc>", order=2),
        Capture("http://a/", "2026-01-01T08:30:00.5Z", "/w/4", 0, "<fraction>", order=3),
    ]
    timeline = timeline_of("http://a/", captures)
    assert [c.record_id for c in timeline.captures] == ["<plus-two>", "<arc>", "<fraction>", "<utc>"]


def test_a_change_recorded_against_a_capture_not_in_the_inputs_is_not_taken_for_this_pair() -> None:
    first = Capture("http://a/", "2026-01-01T00:00:00Z", "/w/1", 0, "<1>")
    third = Capture(
        "http://a/", "2026-03-01T00:00:00Z", "/w/3", 0, "<3>", kind="unchanged", previous_id="<2>"
    )
    (_, step) = timeline_of("http://a/", [third, first]).steps
    assert step is not None and step.kind == NOT_RECORDED
    assert step.note and "its record says unchanged since the capture <2>" in step.note


def test_the_list_is_capped_most_changed_first() -> None:
    captures = [
        Capture(
            f"http://a/{n}",
            f"2026-01-0{day}T00:00:00Z",
            "/w",
            n * 10 + day,
            order=n * 10 + day,
            kind="changed" if day > 1 and day <= n else "unchanged" if day > 1 else None,
        )
        for n in range(1, 5)
        for day in range(1, 5)
    ]
    timelines = build_timelines(captures, listed=2)
    assert timelines.urls == 4
    assert [t.uri for t in timelines.listed] == ["http://a/4", "http://a/3"]
    assert timelines.counts["changed"] == 0 + 1 + 2 + 3


def test_a_record_whose_text_cannot_be_read_is_said_and_the_rest_is_shown(
    crawls: dict[str, object], tmp_path: Path
) -> None:
    """Dedupe rows as input (the kinds from their change columns, the diffs made from the WARCs the rows
    name); one WARC moved away: its steps say so, the others are diffed."""
    v1, v2 = tmp_path / "v1", tmp_path / "v2"
    shutil.copytree(Path(str(crawls["v1"])), v1)
    shutil.copytree(Path(str(crawls["v2"])), v2)
    rows = tmp_path / "rows.jsonl"
    done = run_cli("dedupe", "--workers", "1", "--no-progress", "--report", str(rows), str(v1), str(v2))
    assert done.returncode == 0, done.stderr
    out = tmp_path / "rows.html"
    assert run_cli("report", str(rows), "-o", str(out)).returncode == 0
    timelines = by_path(timeline_data(out))
    assert {"/edit.html", "/same.html", "/ad.html"} <= set(timelines)  # in clusters: near-duplicates
    assert step_kinds(timelines["/edit.html"]) == ["minor"]
    assert step_kinds(timelines["/ad.html"]) == ["same-text"]
    (edit,) = [s for s in timelines["/edit.html"]["steps"] if s]  # type: ignore[union-attr]
    assert {w for w in EDIT_2.split() if w not in " ".join(article(9))} <= changed_words(edit, "+")
    assert "the rows carry no text_change column" not in out.read_text()
    (warc,) = v1.glob("*.warc.gz")
    warc.rename(tmp_path / "elsewhere.warc.gz")
    done = run_cli("report", str(rows), "-o", str(out))
    assert done.returncode == 0, done.stderr
    timelines = by_path(timeline_data(out))
    (edit,) = [s for s in timelines["/edit.html"]["steps"] if s]  # type: ignore[union-attr]
    assert edit["diff"] is None and f"file missing: {warc}" in edit["why"]
    assert len(timelines["/edit.html"]["captures"]) == 2  # type: ignore[arg-type]


def test_tag_sidecars_give_the_timelines_with_the_captures_dates(
    crawls: dict[str, object], tmp_path: Path
) -> None:
    """Sidecars name their records by file and offset: the dates are read from the records, a revisit's
    text from its original; the kinds are the ones ``tag`` wrote in the sidecars."""
    sidecars = tmp_path / "sidecars"
    done = run_cli(
        "tag", "--workers", "1", "--no-progress", "--out", str(sidecars), str(crawls["v1"]), str(crawls["v2"])
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "sidecars.html"
    done = run_cli("report", str(sidecars), "-o", str(out))
    assert done.returncode == 0, done.stderr
    timelines = by_path(timeline_data(out))
    assert set(timelines) == set(ARTICLES)
    dates = {
        urlsplit(str(r["headers"]["WARC-Target-URI"])).path: r["headers"]["WARC-Date"]
        for crawl in (crawls["first"], crawls["second"])
        for r in crawl["records"]  # type: ignore[union-attr]
        if r["type"] in ("response", "revisit")
    }
    assert timelines["/edit.html"]["captures"][1][0] == dates["/edit.html"]  # type: ignore[index]
    assert [c[3] for c in timelines["/same.html"]["captures"]] == ["response", "revisit"]  # type: ignore[index]
    (same,) = [s for s in timelines["/same.html"]["steps"] if s]  # type: ignore[union-attr]
    assert {path: step_kinds(t) for path, t in timelines.items()} == {p: [k] for p, k in EXPECTED[2].items()}
    assert same["kind"] == "unchanged" and same["why"] == "main text identical (as recorded)"
    (edit,) = [s for s in timelines["/edit.html"]["steps"] if s]  # type: ignore[union-attr]
    assert "pontoon" in changed_words(edit, "+")


def test_a_wacz_of_both_crawls_gives_the_same_timelines(crawls: dict[str, object], tmp_path: Path) -> None:
    """Captures read in place from a WACZ package, named ``pack.wacz#archive/<warc>``, texts re-extracted
    from inside it."""
    plain = tmp_path / "plain"
    plain.mkdir()
    for folder in (crawls["v1"], crawls["v2"]):
        for warc in Path(str(folder)).glob("*.warc.gz"):
            shutil.copyfile(warc, plain / warc.name)
    package = tmp_path / "pack.wacz"
    names = sorted(p.name for p in plain.iterdir())
    wacz = Path(sys.executable).with_name("wacz")
    made = subprocess.run(
        [str(wacz), "create", "-o", str(package), *names], cwd=plain, capture_output=True, text=True
    )
    assert made.returncode == 0, made.stderr
    out = tmp_path / "wacz.html"
    done = run_cli("report", str(package), "-o", str(out))
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    timelines = by_path(timeline_data(out))
    assert {path: step_kinds(t) for path, t in timelines.items()} == {p: [k] for p, k in EXPECTED[2].items()}
    assert f'"{package}#archive/' in text
    (edit,) = [s for s in timelines["/edit.html"]["steps"] if s]  # type: ignore[union-attr]
    assert "pontoon" in changed_words(edit, "+")


def test_dedupe_rows_give_the_kinds_of_their_change_columns_and_older_rows_none(
    crawls: dict[str, object], tmp_path: Path
) -> None:
    """Rows as ``dedupe --report`` writes them (``text_change``, ``text_similarity``, ``previous_capture``,
    ``previous_capture_date``): the kinds shown are theirs, the crawl's own; rows of an older dedupe,
    without those columns, give kinds that are not recorded, and the page says why."""
    rows = tmp_path / "rows.jsonl"
    done = run_cli(
        "dedupe",
        "--workers",
        "1",
        "--no-progress",
        "--report",
        str(rows),
        str(crawls["v1"]),
        str(crawls["v2"]),
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "rows.html"
    assert run_cli("report", str(rows), "-o", str(out)).returncode == 0
    timelines = by_path(timeline_data(out))
    fields = metadata_by_path(crawls["second"])  # type: ignore[arg-type]
    for path in ("/same.html", "/ad.html", "/edit.html"):
        assert step_kinds(timelines[path]) == [EXPECTED[2][path]] == [fields[path]["text-change"]]
    older = tmp_path / "older.jsonl"
    columns = ("text_change", "text_similarity", "previous_capture", "previous_capture_date")
    older.write_text(
        "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if k not in columns}) + "\n"
            for line in rows.read_text().splitlines()
        )
    )
    assert run_cli("report", str(older), "-o", str(out)).returncode == 0
    timelines = by_path(timeline_data(out))
    assert all(
        step_kinds(timelines[path]) == [NOT_RECORDED] for path in ("/same.html", "/ad.html", "/edit.html")
    )
    assert "the rows carry no text_change column" in out.read_text()
    (ad,) = [s for s in timelines["/ad.html"]["steps"] if s]  # type: ignore[union-attr]
    assert ad["why"] == "main text identical (compared here)"  # not recorded, but the texts were read


# -- in the browser ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    chromium_or_skip()
    with Browser() as b:
        yield b


def test_the_timeline_renders_in_chromium(browser: Browser, report: Path) -> None:
    page = browser.open(report)
    assert page.errors == []
    assert page.requests == [report.resolve().as_uri()]
    shown = page.evaluate("[...document.querySelectorAll('details.timeline')].map(d => d.dataset.uri)")
    assert {urlsplit(u).path for u in shown} == set(ARTICLES)
    kinds = page.evaluate(
        "Object.fromEntries([...document.querySelectorAll('details.timeline')].map(d => [d.dataset.uri, "
        "[...d.querySelectorAll('tr.capture')].map(r => r.dataset.kind)]))"
    )
    assert {urlsplit(u).path: k for u, k in kinds.items()} == {
        p: ["", kind] for p, kind in EXPECTED[2].items()
    }
    edit = "document.querySelector('details.timeline[data-uri$=\"/edit.html\"]')"
    page.evaluate(f"{edit}.open = true")
    inserted = page.evaluate(f"[...{edit}.querySelectorAll('.tdiff ins')].map(e => e.textContent).join(' ')")
    deleted = page.evaluate(f"[...{edit}.querySelectorAll('.tdiff del')].map(e => e.textContent).join(' ')")
    assert "pontoon" in inserted and deleted.strip()
    assert page.evaluate(f"{edit}.querySelector('.tdiff ins').getBoundingClientRect().height") > 0  # drawn
    same = "document.querySelector('details.timeline[data-uri$=\"/same.html\"]')"
    assert page.evaluate(f"{same}.querySelector('.why').textContent") == "main text identical (as recorded)"
    # filter by kind, then sort by URL
    page.evaluate("const k = document.getElementById('timeline-kind'); k.value = 'changed'; k.onchange()")
    shown = page.evaluate("[...document.querySelectorAll('details.timeline')].map(d => d.dataset.uri)")
    assert [urlsplit(u).path for u in shown] == ["/rewrite.html"]
    page.evaluate(
        "document.getElementById('timeline-kind').value = '';"
        "const s = document.getElementById('timeline-sort'); s.value = 'uri'; s.onchange()"
    )
    shown = page.evaluate("[...document.querySelectorAll('details.timeline')].map(d => d.dataset.uri)")
    assert shown == sorted(shown) and len(shown) == 4
    page.evaluate(f"{edit}.open = true")
    assert page.errors == []
    page.screenshot(ARTIFACTS / "timeline.png")


def test_one_url_s_history_renders_in_chromium(
    browser: Browser, crawls: dict[str, object], tmp_path: Path
) -> None:
    out = tmp_path / "rewrite.html"
    done = run_cli(
        "report",
        str(crawls["v1"]),
        str(crawls["v2"]),
        "-o",
        str(out),
        "--timeline",
        f"{crawls['base']}rewrite.html",
    )
    assert done.returncode == 0, done.stderr
    page = browser.open(out)
    assert page.errors == [] and page.requests == [out.resolve().as_uri()]
    assert page.evaluate("document.querySelector('details.timeline').open") is True
    assert page.evaluate("document.querySelectorAll('tr.capture').length") == 2
    assert page.evaluate("[...document.querySelectorAll('tr.capture')].map(r => r.dataset.kind)") == [
        "",
        "changed",
    ]
    assert page.evaluate("document.querySelectorAll('.tdiff ins').length") > 0
    assert page.evaluate("document.querySelector('.tdiff ins').getBoundingClientRect().height") > 0
    page.screenshot(ARTIFACTS / "timeline-url.png")


# -- the inline word diff ----------------------------------------------------------------------------

_words = st.lists(
    st.sampled_from(["the", "cat", "sat", "on", "mat", "a", "dog", "ran", "\n", "  "]), max_size=40
)


@given(_words, _words)
def test_the_inline_diff_gives_back_both_texts_words(a: list[str], b: list[str]) -> None:
    old, new = " ".join(a), " ".join(b)
    runs = inline_diff(old, new, context=10_000, max_changed=10**9)
    assert "".join(str(t) for tag, t in runs if tag in "=-") == old or not runs
    assert "".join(str(t) for tag, t in runs if tag in "=+").split() == new.split() or not runs
    assert (runs == []) == (old.split() == new.split())
    assert {tag for tag, _ in runs} <= {"=", "-", "+"}


def test_the_inline_diff_folds_long_unchanged_runs_and_cuts_long_changes() -> None:
    old = " ".join(f"w{i}" for i in range(300))
    runs = inline_diff(old, old.replace("w150 ", "new "), context=5)
    assert runs[0] == ["…", 145] and runs[-1] == ["…", 144]
    assert ["-", "w150"] in runs and ["+", "new"] in runs
    cut = inline_diff(old, "entirely different", max_changed=100)
    assert cut[-1] == ["!", 100] and sum(len(str(t)) for tag, t in cut if tag in "-+") == 100


def test_the_overview_diffs_a_url_s_latest_steps_and_says_why_the_others_have_none() -> None:
    captures = [
        Capture(
            "http://a/",
            f"2026-01-{day:02d}T00:00:00Z",
            None,
            None,
            f"<{day}>",
            kind="changed" if day > 1 else None,
        )
        for day in range(1, 13)
    ]
    timeline = timeline_of("http://a/", captures)
    diff_steps([timeline], count=1, steps_per_url=10)
    notes = [step.diff_note for step in timeline.steps if step is not None]
    assert len(notes) == 11
    assert (
        notes[0]
        == "word diff not embedded: only a URL's latest 10 steps are; every diff of this URL: --timeline URL"
    )
    assert all(
        n
        and n.startswith("texts not shown: the capture of 2026-01-")
        and "the input does not say which WARC record" in n
        for n in notes[1:]
    )
    other = timeline_of(
        "http://b/", [Capture("http://b/", c.date, None, None, c.record_id, kind=c.kind) for c in captures]
    )
    diff_steps([timeline, other], count=1)
    assert {s.diff_note for s in other.steps if s} == {
        "word diff not embedded: only the 1 most changed URLs' are (--timeline-diffs N); "
        "every diff of this URL: --timeline URL"
    }
