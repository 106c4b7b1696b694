"""The report and calibration pages in a real headless Chromium (tests/browser.py): no console error,
no network request, charts drawn, counts shown, keys recorded, judgements exported; a screenshot of
each page lands in tests/artifacts/."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser import ARTIFACTS, Browser, chromium_or_skip

from scrapy_simhash.cli import main


@pytest.fixture(scope="module")
def browser():
    chromium_or_skip()
    with Browser() as b:
        yield b


@pytest.fixture(scope="module")
def pages(
    example_crawl_rows: dict[str, Path], example_crawl_sidecar: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """A dedupe report of a real crawl, its HTML report, and a judging page sampled from its tag sidecar
    (the report and the sidecar are the session's, made once for every test that reads them)."""
    tmp = tmp_path_factory.mktemp("pages")
    rows = example_crawl_rows["rows"]
    assert main(["report", str(rows), "-o", str(tmp / "report.html")]) == 0
    sidecar = example_crawl_sidecar
    assert main(["calibrate", "sample", str(sidecar), "-o", str(tmp / "judge.html"), "--pairs", "14"]) == 0
    return {"rows": rows, "report": tmp / "report.html", "judge": tmp / "judge.html", "dir": tmp}


def only_the_file(page, path: Path) -> None:
    assert page.requests == [path.resolve().as_uri()], page.requests


def test_the_report_draws_its_charts_and_clusters(browser: Browser, pages: dict[str, Path]) -> None:
    rows = [json.loads(line) for line in pages["rows"].read_text().splitlines()]
    page = browser.open(pages["report"])
    assert page.errors == []
    only_the_file(page, pages["report"])
    bars = page.evaluate(
        "[...document.querySelectorAll('#hist-pairs rect.bar')].map(r => r.getBoundingClientRect().height)"
    )
    assert bars and max(bars) > 10  # the histogram is drawn, not an empty frame
    assert page.evaluate("document.querySelectorAll('#hist-pairs line.marker').length") == 1  # threshold
    # the run's rule: its similarity drawn where the similarities are, and named in the header
    assert page.evaluate("document.querySelector('#hist-similarity text.mt').textContent") == "similarity 0.5"
    assert page.evaluate("document.getElementById('rule').textContent").startswith(
        "rule: verified, similarity >= 0.5"
    )
    clusters = len({r["cluster"] for r in rows})
    assert page.evaluate("document.getElementById('cluster-count').dataset.count") == str(clusters)
    assert page.evaluate("document.getElementById('cluster-count').textContent").startswith(
        f"{clusters} clusters"
    )
    shown = page.evaluate("[...document.querySelectorAll('.cluster')].map(c => +c.dataset.size)")
    assert len(shown) == clusters and sum(shown) == len(rows)
    assert (
        page.evaluate("document.querySelectorAll('.cluster tr.orig').length") == clusters
    )  # originals marked
    assert len(page.evaluate("document.getElementById('left').textContent")) > 100  # a pair's texts
    page.evaluate("document.querySelector('button[data-diff]').click()")
    assert page.errors == []
    page.screenshot(ARTIFACTS / "report.png")


def test_pressing_d_records_a_judgement_that_the_export_holds(
    browser: Browser, pages: dict[str, Path]
) -> None:
    page = browser.open(pages["judge"])
    assert page.errors == []
    only_the_file(page, pages["judge"])
    data = json.loads(page.evaluate("document.getElementById('judge-data').textContent"))
    first = data["pairs"][0]
    assert page.evaluate("document.getElementById('judged-count').dataset.value") == "0"
    page.press("d")
    assert page.evaluate("document.getElementById('judged-count').dataset.value") == "1"
    page.press("n")
    page.press("ArrowLeft")
    assert page.evaluate("document.getElementById('verdict').textContent") == "judged: not a duplicate"
    page.press("ArrowLeft")
    assert page.evaluate("document.getElementById('verdict').textContent") == "judged: duplicate"
    page.screenshot(ARTIFACTS / "judge.png")
    only_the_file(page, pages["judge"])  # judging made no request either
    exported = page.evaluate(
        "fetch(document.getElementById('export').href).then(r => r.text())", await_promise=True
    )
    lines = [json.loads(line) for line in exported.splitlines()]
    assert [(j["pair"], j["judgement"]) for j in lines] == [(0, "duplicate"), (1, "not")]
    assert lines[0]["distance"] == first["distance"] and lines[0]["weight"] == first["weight"]
    assert {j["extractor"] for j in lines} == {data["extractor"]}  # the texts' extractor, on every line
    assert page.evaluate("document.getElementById('export').download") == "judgements.jsonl"
    # kept in localStorage: a new tab on the same file starts where the person left off
    again = browser.open(pages["judge"])
    assert again.evaluate("document.getElementById('judged-count').dataset.value") == "2"
    assert again.evaluate("document.getElementById('position').textContent").startswith("3 of")
    judgements = pages["dir"] / "judgements.jsonl"
    judgements.write_text(exported)
    curve = pages["dir"] / "curve.html"
    assert main(["calibrate", "score", str(judgements), "-o", str(curve)]) == 0
    shown = browser.open(curve)
    assert shown.errors == []
    only_the_file(shown, curve)
    assert shown.evaluate("document.querySelectorAll('#curve-k polyline').length") >= 1
    shown.screenshot(ARTIFACTS / "curve.png")


def test_the_helper_sees_requests_and_errors(browser: Browser, tmp_path: Path) -> None:
    """The checks above mean something: a page that fetches or fails is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text(
        '<html><body><img src="http://127.0.0.1:9/pixel.png">'
        "<script>console.error('boom'); undefinedFunction();</script></body></html>"
    )
    page = browser.open(bad)
    assert "http://127.0.0.1:9/pixel.png" in page.requests
    assert any("boom" in e for e in page.errors)
    assert any("undefinedFunction" in e for e in page.errors)


def test_the_cluster_list_pages_through_a_large_report(browser: Browser, tmp_path: Path) -> None:
    from scrapy_simhash.report import write_report
    from scrapy_simhash.report.model import Cluster, Page, build

    pages, groups = [], []
    for n in range(45):
        members = [Page(f"k{n}-{i}", uri=f"http://h{n % 4}.example/{n}/{i}", simhash=(n << 8) + i,
                        distance=i, original=i == 0) for i in range(2 + (44 - n) // 10)]  # fmt: skip
        pages.extend(members)
        groups.append(Cluster(n, members))
    out = write_report(build("dedupe report", ["synthetic"], pages, groups, k=3, threshold=None),
                       tmp_path / "large.html", diffs=0).path  # fmt: skip
    page = browser.open(out)
    assert page.errors == []
    only_the_file(page, out)

    def shown() -> list[int]:
        return page.evaluate("[...document.querySelectorAll('.cluster')].map(c => +c.dataset.size)")

    first = shown()
    assert len(first) == 20 and first == sorted(first, reverse=True) and first[0] == 6
    assert page.evaluate("document.getElementById('cluster-page').textContent") == "page 1 of 3"
    page.evaluate("document.getElementById('next').click()")
    page.evaluate("document.getElementById('next').click()")
    assert (
        len(shown()) == 5
        and page.evaluate("document.getElementById('cluster-page').textContent") == "page 3 of 3"
    )
    page.evaluate("document.getElementById('next').click()")  # past the end: stays
    assert len(shown()) == 5
    assert page.evaluate("document.getElementById('pair').hidden") is True  # no pair: no empty selector
    assert page.errors == []


def test_the_judging_page_shows_the_pair_first_and_its_notes_folded_after(
    browser: Browser, tmp_path: Path
) -> None:
    from scrapy_simhash.report.calibrate.page import render_judge
    from scrapy_simhash.report.calibrate.sample import JudgePair
    from scrapy_simhash.report.model import Page

    pairs = [
        JudgePair(n, Page(f"a{n}", uri=f"http://a/{n}"), Page(f"b{n}", uri=f"http://b/{n}"), n, str(n), 1.0,
                  left=f"first text {n} " * 40, right=f"second text {n} " * 40)
        for n in range(3)
    ]  # fmt: skip
    notes = [f"/crawl/part-{i}.warc.gz: a read warning" for i in range(16)]
    out = tmp_path / "judge.html"
    out.write_text(render_judge(pairs, sources=["/crawl"], seed=0, notes=notes))
    page = browser.open(out)
    assert page.errors == []
    only_the_file(page, out)
    top = "(s => document.querySelector(s).getBoundingClientRect().top)"
    assert page.evaluate(f"{top}('#left') < {top}('#notes')")  # the pair comes first
    visible = "[...document.querySelectorAll('li.note')].filter(li => li.checkVisibility()).length"
    assert page.evaluate(visible) == 0  # folded: no warning stands between the judge and the pair
    assert page.evaluate("document.querySelector('#notes summary').textContent").startswith("16 notes")
    page.evaluate("document.querySelector('#notes').open = true")
    assert page.evaluate(visible) == 16
    assert page.errors == []
