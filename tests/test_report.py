"""``scrapy-simhash report``: the data side (inputs to one model, totals, clusters, texts, the HTML).

The browser side (what the page shows, no network request) is tests/test_report_browser.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scrapy_simhash.report as report_package
from scrapy_simhash.cli import main
from scrapy_simhash.fingerprint import to_base32
from scrapy_simhash.index import open_index
from scrapy_simhash.index.tables.batch import cluster_groups, clusters
from scrapy_simhash.report import report
from scrapy_simhash.report.data import load
from scrapy_simhash.report.html import TOP_CLUSTERS
from scrapy_simhash.report.model import Cluster, Page, build
from scrapy_simhash.report.textdiff import diff_words


@pytest.fixture(scope="module")
def aut_rows(example_crawl_rows: dict[str, Path]) -> Path:
    """A real ``dedupe --report`` over a real crawl (aut's example.warc.gz), shared by the session."""
    return example_crawl_rows["rows"]


@pytest.fixture(scope="module")
def aut_sidecar(example_crawl_sidecar: Path) -> Path:
    """``tag``'s sidecar of the same crawl, shared by the session: the tests only read it."""
    return example_crawl_sidecar


def payload_of(page: str) -> dict:
    """The clusters and diffs the page's script renders."""
    return json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.S).group(1))


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_clusters_and_totals_equal_the_dedupe_report(aut_rows: Path) -> None:
    rows = rows_of(aut_rows)
    data = load([str(aut_rows)])
    assert data.totals.clusters == len({r["cluster"] for r in rows}) > 0
    assert data.totals.near_duplicates == sum(r["role"] == "duplicate" for r in rows)
    assert data.totals.in_clusters == len(rows)
    by_cluster: dict[int, list[dict]] = {}
    for row in rows:
        by_cluster.setdefault(row["cluster"], []).append(row)
    expected = sorted((len(m), m[0]["file"], m[0]["offset"]) for m in by_cluster.values())
    got = sorted((c.size, c.members[0].file, c.members[0].offset) for c in data.clusters)
    assert got == expected  # same clusters, the original first
    assert [c.size for c in data.clusters] == sorted((c.size for c in data.clusters), reverse=True)
    assert data.totals.pages is None and data.totals.unique is None  # a report does not know them
    assert Counter(data.pair_distances.tolist()) == Counter(
        r["distance"] for r in rows if r["role"] == "duplicate"
    )


def test_the_page_holds_the_counts_and_the_re_extracted_texts(aut_rows: Path, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    assert main(["report", str(aut_rows), "-o", str(out)]) == 0
    page = out.read_text()
    rows = rows_of(aut_rows)
    assert f'data-count="{len({r["cluster"] for r in rows})}"' in page
    payload = payload_of(page)
    assert payload["diffs"] and all(d["reason"] is None for d in payload["diffs"])
    assert all(len(d["left"]) > 100 and len(d["right"]) > 100 for d in payload["diffs"])
    # self-contained: nothing is fetched from anywhere
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    assert "<svg" in page and 'id="hist-pairs"' in page


def test_a_missing_warc_is_named_and_the_rest_is_shown(aut_rows: Path, tmp_path: Path) -> None:
    rows = rows_of(aut_rows)
    gone = str(tmp_path / "moved-away.warc.gz")
    for row in rows:
        row["file"] = gone
    moved = tmp_path / "moved.jsonl"
    moved.write_text("".join(json.dumps(r) + "\n" for r in rows))
    written = report([str(moved)], tmp_path / "r.html")
    page = written.path.read_text()
    assert f"file missing: {gone}" in page
    assert written.data.totals.clusters == len({r["cluster"] for r in rows})


def test_a_pair_without_a_record_says_why(tmp_path: Path) -> None:
    rows = [
        {"cluster": 0, "role": "original", "uri": "http://a/", "file": None, "offset": None,
         "simhash": to_base32(7), "distance": 0},
        {"cluster": 0, "role": "duplicate", "uri": "http://a/x", "file": None, "offset": None,
         "simhash": to_base32(5), "distance": 1},
    ]  # fmt: skip
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    page = report([str(path)], tmp_path / "r.html").path.read_text()
    assert "the input does not say which WARC record holds this page" in page


def test_bad_rows_are_counted_and_passed_over(aut_rows: Path, tmp_path: Path, capsys) -> None:
    damaged = tmp_path / "damaged.jsonl"
    lines = aut_rows.read_text().splitlines()
    damaged.write_text("\n".join([lines[0], "{not json", *lines[1:], '{"cluster": 0, "offset": "x"}']) + "\n")
    out = tmp_path / "r.html"
    assert main(["report", str(damaged), "-o", str(out), "--diffs", "0"]) == 1
    assert "2 row(s) passed over" in capsys.readouterr().err
    data = load([str(damaged)])
    assert data.totals.in_clusters == len(lines)


def index_values() -> list[int]:
    """40 pages, 10 of them with a copy 2 bits away and one a third member 1 bit from the first."""
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2**63, size=40, dtype=np.uint64)
    return [int(v) for v in base] + [int(v) ^ 0b101 for v in base[:10]] + [int(base[0]) ^ (1 << 40)]


def fill(index, values: list[int]) -> None:
    index.add_many((v, f"http://h{i % 3}.example/{i}", {"url": f"http://h{i % 3}.example/{i}"})
                   for i, v in enumerate(values))  # fmt: skip


def test_a_redis_index_gives_the_same_report(tmp_path: Path) -> None:
    import uuid

    from redis_server import RedisServer

    values = index_values()
    with open_index(tmp_path / "idx", k=3) as index:
        fill(index, values)
    server = RedisServer(tmp_path / "redis").start()
    try:
        uri = f"{server.url}?prefix=report-{uuid.uuid4().hex[:8]}"
        index = open_index(uri, k=3)
        fill(index, values)
        index.close()
        out = tmp_path / "redis.html"
        assert main(["report", uri, "-o", str(out), "--diffs", "0"]) == 0
        from_redis, embedded = load([uri]), load([str(tmp_path / "idx")])
    finally:
        server.stop()
    assert from_redis.totals == embedded.totals
    keys = [[m.key for m in c.members] for c in from_redis.clusters]
    assert keys == [[m.key for m in c.members] for c in embedded.clusters]
    assert f'data-count="{embedded.totals.clusters}"' in out.read_text()


def test_an_index_gives_the_clusters_of_its_fingerprints(tmp_path: Path) -> None:
    values = index_values()
    with open_index(tmp_path / "idx", k=3) as index:
        fill(index, values)
    data = load([str(tmp_path / "idx")])
    expected = cluster_groups(clusters(np.array(values, dtype=np.uint64), 3))
    assert data.totals.clusters == len(expected) == 10
    assert data.totals.fingerprinted == len(values)
    assert data.totals.near_duplicates == sum(len(g) - 1 for g in expected)
    assert data.totals.unique == len(values) - data.totals.near_duplicates
    assert data.clusters[0].size == 3 and data.clusters[0].members[0].key == "http://h0.example/0"
    assert data.no_neighbour == len(values) - sum(len(g) for g in expected)
    assert sum(n for _, n, _ in data.hosts) == len(values)
    page = report([str(tmp_path / "idx")], tmp_path / "r.html").path.read_text()
    assert "the input does not say which WARC record holds this page" in page  # a crawl's index


def test_a_large_report_lists_the_top_clusters_only(tmp_path: Path) -> None:
    pages, groups = [], []
    for n in range(TOP_CLUSTERS + 50):
        members = [Page(f"k{n}-{i}", uri=f"http://x/{n}/{i}", simhash=n * 1000 + i, distance=i % 3,
                        original=i == 0) for i in range(2 + n % 5)]  # fmt: skip
        pages.extend(members)
        groups.append(Cluster(n, members))
    data = build("dedupe report", ["synthetic"], pages, groups, k=3, threshold=None)
    from scrapy_simhash.report import write_report

    page = write_report(data, tmp_path / "r.html", diffs=0).path.read_text()
    payload = payload_of(page)
    assert len(payload["clusters"]) == TOP_CLUSTERS
    assert payload["clusters"][0]["size"] == 6
    assert f'data-count="{TOP_CLUSTERS + 50}"' in page


_text = st.lists(st.sampled_from(["a", "b", "cd", "é", "x1", " ", "\n", "  "]), max_size=40).map("".join)


@settings(max_examples=200, deadline=None)
@given(_text, _text)
def test_the_diff_runs_give_back_both_texts(a: str, b: str) -> None:
    left, right = diff_words(a, b)
    assert "".join(t for _, t in left) == a
    assert "".join(t for _, t in right) == b
    assert [t for tag, t in left if tag == "same"] == [t for tag, t in right if tag == "same"]
    assert all(tag in ("same", "del") for tag, _ in left) and all(tag in ("same", "ins") for tag, _ in right)


def test_tag_sidecars_give_the_clusters_dedupe_found(
    corpus: Path, aut_rows: Path, aut_sidecar: Path, tmp_path: Path
) -> None:
    warc = corpus / "warcs/aut/warc/example.warc.gz"
    sidecar = aut_sidecar
    rows = rows_of(aut_rows)
    from_sidecar = load([str(sidecar)])
    assert from_sidecar.totals.pages is None  # a sidecar holds no responses
    assert from_sidecar.totals.clusters == len({r["cluster"] for r in rows})
    assert from_sidecar.totals.near_duplicates == sum(r["role"] == "duplicate" for r in rows)
    members = {(m.file, m.offset) for c in from_sidecar.clusters for m in c.members}
    assert members == {(r["file"], r["offset"]) for r in rows}
    originals = {(c.members[0].file, c.members[0].offset) for c in from_sidecar.clusters}
    assert originals == {(r["file"], r["offset"]) for r in rows if r["role"] == "original"}
    # the sidecar record's date is when tag ran: not shown as the capture's date
    assert all(m.date is None for c in from_sidecar.clusters for m in c.members)
    twice = load([str(sidecar), str(sidecar)])  # one record described twice is one page
    assert twice.totals == from_sidecar.totals
    with_responses = load([str(sidecar), str(warc)])
    # no_text, too_few_tokens, and 10 pages that are mostly the site's template (boilerplate)
    assert with_responses.totals.pages == with_responses.totals.fingerprinted + 12
    written = report([str(sidecar)], tmp_path / "r.html")
    diffs = payload_of(written.path.read_text())["diffs"]
    assert diffs and all(d["reason"] is None and d["left"] for d in diffs)  # texts found via source-file


@given(st.integers(0, 2**64 - 1))
def test_the_fast_simhash_parse_agrees_with_from_base32(value: int) -> None:
    from scrapy_simhash.fingerprint import from_base32
    from scrapy_simhash.report.values import parse_simhash

    text = to_base32(value)
    assert parse_simhash(text) == from_base32(text) == value
    assert parse_simhash(text.upper()) == value


def test_a_bad_simhash_is_refused_as_from_base32_does() -> None:
    from scrapy_simhash.report.values import parse_simhash

    last_bit_set = to_base32(0)[:-1] + "b"
    for bad in (last_bit_set, "short", "a" * 12 + "1"):
        with pytest.raises(ValueError):
            parse_simhash(bad)


def test_similarity_is_drawn_whenever_rows_carry_it(tmp_path: Path) -> None:
    minhash_rows = [
        {"cluster": 0, "role": "original", "uri": "http://a/1", "file": None, "offset": None,
         "scheme": "minhash-doc/1", "similarity": 1.0},
        {"cluster": 0, "role": "duplicate", "uri": "http://a/2", "file": None, "offset": None,
         "scheme": "minhash-doc/1", "similarity": 0.83},
        {"cluster": 0, "role": "duplicate", "uri": "http://b/3", "file": None, "offset": None,
         "scheme": "minhash-doc/1", "similarity": 0.91},
    ]  # fmt: skip
    path = tmp_path / "minhash.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in minhash_rows))
    data = load([str(path)])
    assert sorted(data.pair_similarities.tolist()) == [0.83, 0.91]
    assert data.k is None and data.threshold == 0.8
    page = report([str(path)], tmp_path / "r.html").path.read_text()
    assert 'id="hist-similarity"' in page and 'id="hist-pairs"' not in page
    assert "nearest-neighbour similarity needs every page" in page
    both = [dict(r, simhash=to_base32(1 + i), distance=i) for i, r in enumerate(minhash_rows)]
    path.write_text("".join(json.dumps(r) + "\n" for r in both))
    page = report([str(path)], tmp_path / "r.html").path.read_text()
    assert 'id="hist-similarity"' in page and 'id="hist-pairs"' in page and 'id="hist-nearest"' in page


def test_a_minhash_index_is_refused_by_name(tmp_path: Path) -> None:
    index = open_index(tmp_path / "mh", kind="minhash")
    index.close()
    assert main(["report", str(tmp_path / "mh"), "-o", str(tmp_path / "r.html")]) == 2
    with pytest.raises(ValueError, match="is a MinHash index"):
        load([str(tmp_path / "mh")])


def test_odd_rows_one_original_per_cluster_and_unhashable_cluster_ids(tmp_path: Path) -> None:
    rows = [
        {"cluster": 0, "role": "duplicate", "uri": "http://a/2", "simhash": to_base32(3), "distance": 1},
        {"cluster": 0, "role": "original", "uri": "http://a/1", "simhash": to_base32(1), "distance": 0},
        {"cluster": 0, "role": "original", "uri": "http://a/3", "simhash": to_base32(7), "distance": 2},
        {"cluster": [1], "role": "original", "uri": "http://a/4", "simhash": to_base32(7), "distance": 0},
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load([str(path)])
    (cluster,) = data.clusters
    assert cluster.members[0].uri == "http://a/1"
    assert [m.original for m in cluster.members] == [True, False, False]
    assert any("line 4: bad row" in n for n in data.notes)
    assert data.k == 3 and any("the thresholds drawn are k = 3" in n for n in data.notes)
    assert load([str(path)], k=5).k == 5


def test_records_that_are_not_pages_are_said(corpus: Path, tmp_path: Path) -> None:
    from scrapy_simhash.report.texts import fetch_texts

    warc = str(corpus / "warcs/aut/warc/example.warc.gz")
    texts = fetch_texts([(warc, 0), (warc, 1)])
    assert texts[(warc, 0)].reason == "the record is not an HTML page (warcinfo)"
    assert texts[(warc, 1)].reason == f"no record starts at offset 1 of {warc}"


def test_a_revisit_shows_the_text_of_the_record_it_repeats(tmp_path: Path) -> None:
    """A crawl writes a page served byte for byte under a second URL as a revisit (no payload): the
    report's diff shows the original's text for it, found by ``WARC-Refers-To`` in the revisit's own
    file or beside it; a revisit whose original is not there keeps its reason."""
    import io

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    from scrapy_simhash.report.texts import fetch_texts
    from scrapy_simhash.warc.read.reader import ArchiveReader, ArchiveRecord

    words = [
        "harbour",
        "lantern",
        "meadow",
        "treaty",
        "weaver",
        "council",
        "orchard",
        "furnace",
        "almanac",
        "quarry",
    ]
    body = (
        "<html><head><title>Tram</title></head><body><article>"
        + "".join(f"<p>{' '.join(words[(p + i) % 10] for i in range(30))}.</p>" for p in range(6))
        + "</article></body></html>"
    ).encode()
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    date = "2026-11-20T08:00:00Z"

    def write(path: Path, records: list[tuple[str, str, dict[str, str]]]) -> None:
        with open(path, "wb") as out:
            writer = WARCWriter(out, gzip=True, warc_version="1.1")
            for uri, kind, headers in records:
                payload = io.BytesIO(body if kind == "response" else b"")
                fields = {"WARC-Date": date, **headers}
                record = writer.create_warc_record(
                    uri, kind, payload=payload, http_headers=http, warc_headers_dict=fields
                )
                writer.write_record(record)

    original_id = "<urn:uuid:00000000-0000-4000-8000-000000000001>"
    refers = {"WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"}
    write(tmp_path / "a.warc.gz", [("http://a/story", "response", {"WARC-Record-ID": original_id})])
    write(
        tmp_path / "b.warc.gz",
        [
            ("http://a/story?utm_source=x", "revisit", {**refers, "WARC-Refers-To": original_id}),
            ("http://a/gone", "revisit", {**refers, "WARC-Refers-To": "<urn:uuid:not-in-these-files>"}),
        ],
    )
    records = {
        r.target_uri: (r.file, r.offset)
        for path in ("a.warc.gz", "b.warc.gz")
        for r in ArchiveReader("auto").read(str(tmp_path / path))
        if isinstance(r, ArchiveRecord)
    }
    texts = fetch_texts(list(records.values()))
    original = texts[records["http://a/story"]]
    assert original.text and "harbour lantern" in original.text
    assert texts[records["http://a/story?utm_source=x"]] == original
    assert texts[records["http://a/gone"]].reason == "the record is not an HTML page (revisit)"


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` in a subprocess with a clean environment (no variable the tests set)."""
    tool = Path(sys.executable).with_name("scrapy-simhash")
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return subprocess.run([str(tool), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_malformed_rows_are_counted_and_passed_over_never_a_traceback(aut_rows: Path, tmp_path: Path) -> None:
    lines = aut_rows.read_text().splitlines()
    good = json.loads(lines[1])
    malformed = [
        dict(good, uri=5),  # a number where a text belongs
        dict(good, date=["2026"]),
        dict(good, record_id={"id": 1}),
        dict(good, file=7),
        dict(good, distance=-5),
        dict(good, distance=65),
        dict(good, distance=2.5),
        dict(good, distance=True),
        dict(good, offset=-1),
        dict(good, similarity=1.5),
        dict(good, similarity="high"),
    ]
    text = "\n".join([*lines, *(json.dumps(r) for r in malformed)])
    text += '\n{"cluster": 0, "role": "duplicate", "uri": "http://a/", "distance": 1e400}'  # inf
    text += '\n{"cluster": 0, "role": "duplicate", "uri": "http://a/", "similarity": NaN}\n'
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_text(text)
    out = tmp_path / "r.html"
    done = run_cli("report", str(damaged), "-o", str(out), "--diffs", "0")
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    passed_over = len(malformed) + 2
    assert f"{passed_over} row(s) passed over" in done.stderr
    page = out.read_text()
    assert f'id="total-in-clusters" data-value="{len(lines)}"' in page  # every good row kept
    data = load([str(damaged)])
    assert data.totals.in_clusters == len(lines)
    for line in (len(lines) + 1, len(lines) + 5, len(lines) + 12):
        assert any(f"line {line}: bad row" in n for n in data.notes), (line, data.notes)


def test_the_report_modules_import_each_other_one_way() -> None:
    """Inputs -> model -> diffs -> page: no module of the report package imports one that imports it
    back, not even inside a function."""
    from graphlib import CycleError, TopologicalSorter

    from test_layers import imported

    package = Path(report_package.__file__).parent
    graph = {}
    for path in sorted(package.glob("*.py")):
        name = "scrapy_simhash.report" + ("" if path.stem == "__init__" else f".{path.stem}")
        found = imported(name, path.stem == "__init__", path.read_text("utf-8"))
        graph[name] = {m for m in found if m.startswith("scrapy_simhash.report.") and m.count(".") == 2}
        graph[name].discard(name)
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"the report modules import each other in a circle: {exc.args[1]}")


def chart(page: str, chart_id: str) -> str:
    match = re.search(rf'<svg[^>]*id="{chart_id}".*?</svg>', page, re.S)
    assert match, f"no chart {chart_id}"
    return match.group(0)


def marker_label(svg: str) -> str | None:
    match = re.search(r'<line class="marker"[^>]*/><text[^>]*class="mt">([^<]*)</text>', svg)
    return None if match is None else match.group(1)


def test_a_dedupe_report_draws_the_run_s_own_rule(corpus: Path, aut_rows: Path, tmp_path: Path) -> None:
    """The rows say which rule made them; the report draws it: the run's similarity (not 0.8) with
    every verified near-duplicate on or above it, and k as the rule for pages without a sketch."""
    rows = rows_of(aut_rows)
    assert {r["rule"] for r in rows} == {"verified similarity=0.5 distance=3"}
    out = tmp_path / "default.html"
    done = run_cli("report", str(aut_rows), "-o", str(out), "--diffs", "0")
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert marker_label(chart(page, "hist-similarity")) == "similarity 0.5"
    assert marker_label(chart(page, "hist-pairs")) == "k = 3 (pages without a sketch)"
    verified = [r["similarity"] for r in rows if r["role"] == "duplicate" and r["method"] == "verified"]
    assert verified and min(verified) >= 0.5  # none below the line drawn
    assert "rule: verified, similarity &gt;= 0.5; pages without a sketch: distance &lt;= 3" in page
    # another run's rule is drawn as that run's
    stricter = tmp_path / "stricter.jsonl"
    # the example crawl's first page as WARC and as ARC: a cluster of two is all the drawing needs
    folder = corpus / "warcs/ukwa-webarchive-test-suite/small-arcs-and-warcs"
    small = folder / "IAH-20080430204825-00000-blackbook-truncated"
    dedupe = ["dedupe", "--workers", "1", "--no-progress", "--similarity", "0.7", "--report", str(stricter)]
    done = run_cli(*dedupe, f"{small}.warc.gz", f"{small}.arc.gz")
    assert done.returncode == 0, done.stderr
    done = run_cli("report", str(stricter), "-o", str(out), "--diffs", "0")
    assert done.returncode == 0, done.stderr
    assert marker_label(chart(out.read_text(), "hist-similarity")) == "similarity 0.7"
    # the command line still chooses what to draw when it says
    done = run_cli("report", str(stricter), "-o", str(out), "--diffs", "0", "--threshold", "0.9", "-k", "4")
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert marker_label(chart(page, "hist-similarity")) == "similarity 0.9"
    assert marker_label(chart(page, "hist-pairs")) == "k = 4 (pages without a sketch)"


def test_warcs_draw_the_rule_they_were_clustered_by(aut_sidecar: Path, tmp_path: Path) -> None:
    """Without a flag the similarity the clusters were made with is drawn (the help's default)."""
    out = tmp_path / "r.html"
    done = run_cli("report", str(aut_sidecar), "-o", str(out), "--diffs", "0")
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert marker_label(chart(page, "hist-similarity")) == "similarity 0.5"
    assert marker_label(chart(page, "hist-nearest")) == "k = 3 (pages without a sketch)"


@pytest.fixture(scope="module")
def resiliparse_inputs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every report input kind, made by a run with another extractor than the default."""
    work = tmp_path_factory.mktemp("resiliparse")
    warc = corpus / "warcs/aut/warc/example.warc.gz"
    common = ("--extractor", "resiliparse", "--workers", "1", "--no-progress")
    rows, index, sidecars = work / "rows.jsonl", work / "index", work / "sidecars"
    done = run_cli("dedupe", str(warc), "--index", str(index), "--report", str(rows), *common, cwd=work)
    assert done.returncode == 0, done.stderr
    done = run_cli("tag", str(warc), "--out", str(sidecars), *common, cwd=work)
    assert done.returncode == 0, done.stderr
    [sidecar] = sidecars.glob("*.simhash.warc.gz")
    assert rows.read_text().strip(), "no cluster: the rows would name no extractor"
    return {"rows": rows, "index": index, "sidecar": sidecar, "directory": sidecars}


@pytest.mark.parametrize("kind", ["rows", "index", "sidecar", "directory"])
def test_the_report_names_the_extractor_of_every_input_kind(resiliparse_inputs, kind, tmp_path) -> None:
    from scrapy_simhash.extract.resiliparse import ResiliparseExtractor

    page = tmp_path / "r.html"
    done = run_cli("report", str(resiliparse_inputs[kind]), "-o", str(page), "--diffs", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    shown = re.search(r'<span id="extractor">(.*?)</span>', page.read_text()).group(1)
    assert shown == ResiliparseExtractor().description
    assert load([str(resiliparse_inputs[kind])]).extractor == shown


def test_the_report_says_when_the_input_does_not_record_its_extractor_or_mixes_several(tmp_path) -> None:
    from scrapy_simhash.index.extractor_record import check_extractor
    from scrapy_simhash.report import write_report

    values = index_values()
    with open_index(tmp_path / "old", k=3) as index:  # written before indexes recorded their extractor
        fill(index, values)
    old = load([str(tmp_path / "old")])
    # trafilatura was the only extractor then: the pair texts are re-extracted with it, not the default
    assert old.extractor == "trafilatura"
    assert any("does not record its extractor" in note for note in old.notes)
    page = write_report(old, tmp_path / "old.html", diffs=0).path.read_text()
    assert '<span id="extractor">trafilatura</span>' in page

    with open_index(tmp_path / "mixed", k=3) as index:
        check_extractor(index, "trafilatura/2.3.1;fast=1")
        check_extractor(index, "resiliparse/2.0.1;main=1", mix=True)
        fill(index, values)
    mixed = load([str(tmp_path / "mixed")])
    assert mixed.extractor == "trafilatura/2.3.1;fast=1"
    assert any("also holds pages of other extractors (resiliparse/2.0.1;main=1)" in n for n in mixed.notes)
    page = write_report(mixed, tmp_path / "mixed.html", diffs=0).path.read_text()
    assert "trafilatura/2.3.1;fast=1 (mixed with resiliparse/2.0.1;main=1)" in page
