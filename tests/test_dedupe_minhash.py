"""``dedupe --method minhash --threshold J``: MinHash clusters over WARC inputs with planted near-duplicates.

The inputs are built in tmp_path from real corpus pages: originals as they are, exact copies,
and copies whose main text was edited (every n-th word replaced), rebuilt as plain HTML. The
rebuilt page of an unedited text has the very sketch of the original (checked below), so the
planted similarities are those of the edits alone.
"""

from __future__ import annotations

import csv
import gzip
import html
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_simhash.cli import main
from scrapy_simhash.extract import DEFAULT_EXTRACTOR
from scrapy_simhash.fingerprint import simhash_with_count
from scrapy_simhash.fingerprint.minhash import SCHEME, MinHash, simhash_and_minhash
from scrapy_simhash.page import PageFingerprint, fingerprint_page
from scrapy_simhash.warc import commandline
from scrapy_simhash.warc import dedupe as dedupe_module
from scrapy_simhash.warc.records import http_head, response_record
from scrapy_simhash.warc.reprocess import Options, dedupe, plan_inputs
from scrapy_simhash.warc.write.writer import gzip_member

HEAD = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html; charset=utf-8")])
RULE_COLUMNS = [
    "cluster",
    "role",
    "record_id",
    "uri",
    "date",
    "file",
    "offset",
    "simhash",
    "distance",
    "similarity",
    "method",
    "rule",
    "keep",
    "extractor",
    "revisit",
    "revisit_of",
    "text_change",
    "text_similarity",
    "previous_capture",
    "previous_capture_date",
]
MINHASH_COLUMNS = [
    "cluster",
    "role",
    "record_id",
    "uri",
    "date",
    "file",
    "offset",
    "scheme",
    "similarity",
    "rule",
    "keep",
    "extractor",
    "revisit",
    "revisit_of",
    "text_change",
    "text_similarity",
    "previous_capture",
    "previous_capture_date",
]
EARLY, LATE = "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"


def _as_html(text: str) -> bytes:
    paragraphs = [p for p in text.split("\n") if p.strip()]
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return f"<html><head><title>page</title></head><body><article>{body}</article></body></html>".encode()


def _edited(text: str, every: int) -> str:
    """The text with every ``every``-th word of each paragraph replaced: a planted edit."""
    lines = []
    for line in text.split("\n"):
        words = line.split(" ")
        for i in range(every // 2, len(words), every):
            words[i] = "zzedited"
        lines.append(" ".join(words))
    return "\n".join(lines)


def _warc(path: Path, records: list[tuple[str, str, bytes]]) -> Path:
    with open(path, "wb") as out:
        for uri, date, body in records:
            out.write(gzip_member(response_record(uri, date, HEAD, body).to_bytes()))
    return path


def _sketch(body: bytes) -> MinHash:
    fp = fingerprint_page(body, minhash=True)
    assert fp.minhash is not None, fp
    return fp.minhash


@pytest.fixture(scope="module")
def planted(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Two WARCs: originals and unrelated pages in a.warc.gz, their copies (exact, edited) in b.warc.gz."""
    aeb = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))
    pages = [gzip.decompress(f.read_bytes()) for f in aeb[:12]]
    template = [
        gzip.decompress((corpus / "pages" / "mozilla-readability" / name / "source.html.gz").read_bytes())
        for name in ("nytimes-1", "nytimes-2")
    ]
    text = {i: DEFAULT_EXTRACTOR(pages[i], None, None).text for i in (4, 6, 10)}
    bodies = {
        "http://a/p1": pages[1],
        "http://a/p2": pages[4],
        "http://a/p3": pages[6],
        "http://a/p4": pages[10],
        "http://a/u1": pages[2],
        "http://a/u2": pages[3],
        "http://a/u3": pages[7],
        "http://a/nyt1": template[0],
        "http://a/nyt2": template[1],
        "http://b/p1-copy": pages[1],
        "http://b/p2-edit": _as_html(_edited(text[4], 60)),
        "http://b/p3-edit": _as_html(_edited(text[6], 60)),
        "http://b/p4-heavy": _as_html(_edited(text[10], 8)),
    }
    base = tmp_path_factory.mktemp("planted")
    first = [(uri, EARLY, body) for uri, body in bodies.items() if uri.startswith("http://a/")]
    second = [(uri, LATE, body) for uri, body in bodies.items() if uri.startswith("http://b/")]
    inputs = [_warc(base / "a.warc.gz", first), _warc(base / "b.warc.gz", second)]
    return {"inputs": inputs, "bodies": bodies, "rebuilt": _as_html(text[4]), "original4": pages[4]}


def _clusters(rows: list[dict]) -> dict[frozenset, list[dict]]:
    by_number: dict[int, list[dict]] = {}
    for row in rows:
        by_number.setdefault(row["cluster"], []).append(row)
    return {frozenset(r["uri"] for r in members): members for members in by_number.values()}


def _run(planted: dict, workers: int = 1, **kwargs) -> tuple:
    return dedupe(plan_inputs(planted["inputs"]), Options(workers=workers), method="minhash", **kwargs)


def test_a_rebuilt_unedited_page_has_the_sketch_of_its_original(planted: dict) -> None:
    assert _sketch(planted["rebuilt"]) == _sketch(planted["original4"])


def test_minhash_dedupe_finds_the_planted_clusters_and_nothing_else(planted: dict) -> None:
    summary, rows = _run(planted)
    assert summary.exit_status == 0
    clusters = _clusters(rows)
    assert set(clusters) == {
        frozenset({"http://a/p1", "http://b/p1-copy"}),
        frozenset({"http://a/p2", "http://b/p2-edit"}),
        frozenset({"http://a/p3", "http://b/p3-edit"}),
    }
    assert summary.near_duplicates == 3
    for members in clusters.values():
        original, duplicate = members
        assert (original["role"], duplicate["role"]) == ("original", "duplicate")
        assert original["uri"].startswith("http://a/") and original["date"] == EARLY  # the earliest record
        assert original["file"].endswith("a.warc.gz") and duplicate["file"].endswith("b.warc.gz")
        assert list(original) == MINHASH_COLUMNS and original["scheme"] == SCHEME


def test_report_similarity_is_the_jaccard_of_the_two_pages_sketches(planted: dict) -> None:
    _, rows = _run(planted)
    bodies = planted["bodies"]
    for members in _clusters(rows).values():
        original, duplicate = members
        expected = _sketch(bodies[duplicate["uri"]]).jaccard(_sketch(bodies[original["uri"]]))
        assert duplicate["similarity"] == expected >= 0.8
        assert original["similarity"] == 1.0
    similarity = {row["uri"]: row["similarity"] for row in rows}
    assert similarity["http://b/p1-copy"] == 1.0  # an exact copy
    assert similarity["http://b/p2-edit"] < 1.0 and similarity["http://b/p3-edit"] < 1.0  # real edits


def test_the_threshold_decides_which_planted_pairs_join(planted: dict) -> None:
    bodies = planted["bodies"]
    heavy = _sketch(bodies["http://b/p4-heavy"]).jaccard(_sketch(bodies["http://a/p4"]))
    assert 0.3 < heavy < 0.8  # the planted heavy edit: below the default threshold
    _, strict = _run(planted, threshold=1.0)
    assert set(_clusters(strict)) == {frozenset({"http://a/p1", "http://b/p1-copy"})}
    _, loose = _run(planted, threshold=0.3)
    assert frozenset({"http://a/p4", "http://b/p4-heavy"}) in _clusters(loose)
    assert not any(uri.startswith(("http://a/u", "http://a/nyt")) for row in loose for uri in [row["uri"]])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(threshold=st.floats(min_value=0.05, max_value=1.0))
def test_every_pair_reported_meets_the_threshold(planted: dict, threshold: float) -> None:
    """Two-member clusters are pairs: their similarity is at least the threshold; exact copies always pair."""
    _, rows = _run(planted, threshold=threshold)
    clusters = _clusters(rows)
    assert frozenset({"http://a/p1", "http://b/p1-copy"}) in clusters
    for members in clusters.values():
        assert members[0]["role"] == "original" and members[0]["similarity"] == 1.0
        if len(members) == 2:
            assert members[1]["similarity"] >= threshold


def test_worker_count_does_not_change_the_minhash_report(planted: dict) -> None:
    assert _run(planted, workers=2)[1] == _run(planted, workers=1)[1]


def test_cli_minhash_report_as_csv(planted: dict, tmp_path: Path, capsys) -> None:
    report = tmp_path / "clusters.csv"
    args = ["dedupe", *map(str, planted["inputs"]), "--method", "minhash", "--threshold", "0.8"]
    status = main([*args, "--workers", "1", "--report", str(report), "--no-progress"])
    assert status == 0
    rows = list(csv.DictReader(report.open()))
    assert list(rows[0]) == MINHASH_COLUMNS and len(rows) == 6
    assert {float(r["similarity"]) for r in rows if r["uri"] == "http://b/p1-copy"} == {1.0}
    out = capsys.readouterr().out
    assert "clusters: 3 covering 6 records (3 redundant)" in out and "3 near-duplicates" in out


def test_an_empty_minhash_report_still_has_the_minhash_columns(planted: dict, tmp_path: Path) -> None:
    report = tmp_path / "none.csv"
    args = ["dedupe", str(planted["inputs"][0]), "--method", "minhash", "--workers", "1", "--no-progress"]
    status = main([*args, "--report", str(report)])
    assert status == 0
    assert report.read_text().splitlines() == [",".join(MINHASH_COLUMNS)]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--threshold", "0.8"], "--threshold applies to --method minhash only"),
        (["--method", "simhash", "--threshold", "0.9"], "--threshold applies to --method minhash only"),
        (["--method", "minhash", "--threshold", "0"], "greater than 0"),
        (["--method", "minhash", "--threshold", "1.5"], "at most 1"),
        (["--method", "minhash", "--threshold", "high"], "not a number"),
        (["--method", "jaccard"], "invalid choice"),
    ],
)
def test_meaningless_options_are_a_clear_usage_error(
    planted: dict, tmp_path: Path, capsys, extra: list[str], message: str
) -> None:
    extra = [str(tmp_path / "ix") if e == "IX" else e for e in extra]
    args = ["dedupe", str(planted["inputs"][0]), "--workers", "1", "--no-progress", *extra]
    try:
        status = main(args)
    except SystemExit as exc:  # argparse rejects bad values itself, with status 2
        status = exc.code
    assert status == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "ix").exists()  # refused before anything was opened


def test_the_scrapy_command_takes_the_same_options(planted: dict, tmp_path: Path) -> None:
    scrapy = Path(sys.executable).with_name("scrapy")
    report = tmp_path / "r.jsonl"
    common = [str(scrapy), "simhash-dedupe", *map(str, planted["inputs"]), "--workers", "1", "--no-progress"]
    run = subprocess.run(
        [*common, "--method", "minhash", "--threshold", "0.8", "--report", str(report)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in report.read_text().splitlines()]
    assert rows == [{k: r[k] for k in MINHASH_COLUMNS} for r in _run(planted)[1]]
    refused = subprocess.run(
        [*common, "--threshold", "0.8"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert refused.returncode == 2 and "--threshold applies to --method minhash only" in refused.stderr


def test_in_a_project_the_settings_index_is_not_forced_on_minhash(planted: dict, tmp_path: Path) -> None:
    """``SIMHASH_INDEX`` is the simhash index the crawl fills: the default for simhash runs only."""
    (tmp_path / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "__init__.py").write_text("")
    (tmp_path / "proj" / "settings.py").write_text(f"SIMHASH_INDEX = {str(tmp_path / 'ix')!r}\n")
    scrapy = Path(sys.executable).with_name("scrapy")
    report = tmp_path / "r.jsonl"
    inputs = [str(path) for path in planted["inputs"]]
    run = subprocess.run(
        [
            str(scrapy),
            "simhash-dedupe",
            *inputs,
            "--method",
            "minhash",
            "--report",
            str(report),
            "--workers",
            "1",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert len(report.read_text().splitlines()) == 6 and not (tmp_path / "ix").exists()


def _cli(inputs: list[Path], *extra: str) -> int:
    return main(["dedupe", *map(str, inputs), "--workers", "1", "--no-progress", *extra])


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory: pytest.TempPathFactory):
    from redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server.url
    server.stop()


@pytest.mark.parametrize("where", ["directory", "redis"])
def test_with_a_minhash_index_pages_of_earlier_runs_join_the_clusters(
    planted: dict, tmp_path: Path, capsys, request: pytest.FixtureRequest, where: str
) -> None:
    first, second = planted["inputs"]
    if where == "redis":  # the Redis MinHash index, as shared by several machines
        index = f"{request.getfixturevalue('redis_url')}?prefix=dedupe-{tmp_path.name}"
    else:
        index = str(tmp_path / "ix")
    assert _cli([first], "--method", "minhash", "--index", index, "--report", str(tmp_path / "1.jsonl")) == 0
    assert (tmp_path / "1.jsonl").read_text() == ""  # a.warc.gz alone has no near-duplicates
    assert _cli([second], "--method", "minhash", "--index", index, "--report", str(tmp_path / "2.jsonl")) == 0
    rows = [json.loads(line) for line in (tmp_path / "2.jsonl").read_text().splitlines()]
    in_one_run = _run(planted)[1]
    assert rows == in_one_run  # the same clusters, originals (from the index) first, same similarities
    assert "3 near-duplicates" in capsys.readouterr().out


def test_a_minhash_index_keeps_its_threshold(planted: dict, tmp_path: Path, capsys) -> None:
    index = str(tmp_path / "ix")
    assert _cli(planted["inputs"][:1], "--method", "minhash", "--index", index, "--report", "-") == 0
    capsys.readouterr()
    assert _cli(planted["inputs"][1:], "--method", "minhash", "--index", index, "--threshold", "0.5") == 2
    assert "cannot open the index" in capsys.readouterr().err
    assert _cli(planted["inputs"][1:], "--method", "minhash", "--index", index, "--threshold", "0.8") == 0


def test_a_simhash_index_is_not_taken_for_a_minhash_one(planted: dict, tmp_path: Path, capsys) -> None:
    index = str(tmp_path / "ix")
    assert _cli(planted["inputs"][:1], "--index", index, "--report", str(tmp_path / "s.jsonl")) == 0
    capsys.readouterr()
    assert _cli(planted["inputs"][1:], "--method", "minhash", "--index", index) == 2
    assert "holds a simhash index" in capsys.readouterr().err
    assert _cli(planted["inputs"][1:], "--index", index, "--report", str(tmp_path / "s2.jsonl")) == 0


def test_a_minhash_index_without_method_minhash_says_to_add_it(planted: dict, tmp_path: Path) -> None:
    """The command's user is told the option to add, not the library call that would open it."""
    index = tmp_path / "ix"
    assert _cli(planted["inputs"][:1], "--method", "minhash", "--index", str(index), "--report", "-") == 0
    command = Path(sys.executable).with_name("scrapy-simhash")
    inputs = [str(path) for path in planted["inputs"][1:]]
    refused = subprocess.run(
        [str(command), "dedupe", *inputs, "--index", str(index), "--workers", "1", "--no-progress"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert refused.returncode == 2
    assert "holds a MinHash index (written with --method minhash): add --method minhash" in refused.stderr
    assert "open_index" not in refused.stderr and "kind=" not in refused.stderr


# -- simhash runs: unchanged, and they pay nothing for sketches ----------------------------------------


def fingerprint_without_minhash_option(
    body: bytes, url: str | None, encoding: str | None, *, extractor, min_tokens: int
) -> PageFingerprint:
    """A replacement fingerprint function that knows nothing of sketches (as before this option)."""
    return fingerprint_page(body, url, encoding, extractor=extractor, min_tokens=min_tokens)


def test_replacement_functions_without_the_sketch_option_still_work(planted: dict) -> None:
    for mode in ("simhash", "verified"):
        options = Options(workers=2, function=fingerprint_without_minhash_option, mode=mode)
        summary, rows = dedupe(plan_inputs(planted["inputs"]), options)
        assert summary.exit_status == 0 and summary.fingerprinted == 13
        assert rows and all(list(row) == RULE_COLUMNS for row in rows)
        assert {row["method"] for row in rows} == {mode}
    assert frozenset({"http://a/p1", "http://b/p1-copy"}) in _clusters(rows)


def test_simhash_runs_with_an_index_give_the_clusters_of_one_run(planted: dict, tmp_path: Path) -> None:
    """The index path of simhash runs (shared with minhash's) still reports what one batch run reports."""
    first, second = planted["inputs"]
    index = str(tmp_path / "ix")
    assert _cli([first], "--index", index, "--report", str(tmp_path / "1.jsonl")) == 0
    assert _cli([second], "--index", index, "--report", str(tmp_path / "2.jsonl")) == 0
    assert _cli([first, second], "--report", str(tmp_path / "one.jsonl")) == 0
    rows = (tmp_path / "2.jsonl").read_text()
    assert rows == (tmp_path / "one.jsonl").read_text()
    assert len(rows.splitlines()) >= 6 and all(list(json.loads(r)) == RULE_COLUMNS for r in rows.splitlines())


def test_rule_report_columns(planted: dict, tmp_path: Path) -> None:
    report = tmp_path / "s.csv"
    assert (
        main(
            [
                "dedupe",
                *map(str, planted["inputs"]),
                "--workers",
                "1",
                "--no-progress",
                "--report",
                str(report),
            ]
        )
        == 0
    )
    assert report.read_text().splitlines()[0] == ",".join(RULE_COLUMNS)
    fields = dedupe_module.REPORT_FIELDS + dedupe_module.REVISIT_FIELDS + dedupe_module.CHANGE_FIELDS
    assert fields == ["cluster", *RULE_COLUMNS[2:]]


def test_the_default_threshold_is_one_value(planted: dict) -> None:
    assert commandline.DEFAULT_THRESHOLD == dedupe_module.DEFAULT_THRESHOLD == 0.8


def test_fingerprint_page_sketches_unless_told_not_to(planted: dict) -> None:
    body = planted["bodies"]["http://a/p2"]
    plain, both = fingerprint_page(body, minhash=False), fingerprint_page(body)
    assert plain.minhash is None and both.minhash is not None
    assert (plain.simhash, plain.tokens) == (both.simhash, both.tokens)
    text = DEFAULT_EXTRACTOR(body, None, None).text
    assert simhash_and_minhash(text) == (both.simhash, both.minhash, both.tokens)
    assert simhash_with_count(text) == (plain.simhash, plain.tokens)
    short = fingerprint_page(b"<html><body><p>three words only</p></body></html>", minhash=True)
    assert (short.simhash, short.minhash, short.reason) == (None, None, "too_few_tokens")


# -- the verified rule with an index: the same clusters as one batch run ---------------------------------


@pytest.mark.parametrize("where", ["directory", "redis"])
def test_verified_runs_with_an_index_give_the_clusters_of_one_run(
    corpus: Path, tmp_path: Path, request: pytest.FixtureRequest, where: str
) -> None:
    """Index answers (sketches stored, verified in the index, Redis's in Lua) and the batch pairs agree,
    similarities to stored originals included; the one-sentence edit is in both."""
    from verified_support import edit_inputs

    first, second = edit_inputs(corpus, tmp_path / "in")
    if where == "redis":
        index = f"{request.getfixturevalue('redis_url')}?prefix=verified-{tmp_path.name}"
    else:
        index = str(tmp_path / "ix")
    assert _cli([first], "--index", index, "--report", str(tmp_path / "1.jsonl")) == 0
    assert _cli([second], "--index", index, "--report", str(tmp_path / "2.jsonl")) == 0
    assert _cli([first, second], "--report", str(tmp_path / "one.jsonl")) == 0
    rows = [json.loads(line) for line in (tmp_path / "2.jsonl").read_text().splitlines()]
    assert rows == [json.loads(line) for line in (tmp_path / "one.jsonl").read_text().splitlines()]
    edit = next(r for r in rows if r["uri"] == "http://b/edit")
    assert edit["method"] == "verified" and edit["distance"] > 3 and edit["similarity"] >= 0.5


def test_in_a_project_the_scrapy_command_takes_the_crawls_rule(corpus: Path, tmp_path: Path) -> None:
    """``SIMHASH_MODE`` / ``SIMHASH_SIMILARITY`` of the project decide unless the command line does."""
    from verified_support import edit_inputs

    inputs = [str(p) for p in edit_inputs(corpus, tmp_path / "in")]
    scrapy = Path(sys.executable).with_name("scrapy")

    def edit_paired(settings: str, *extra: str) -> bool:
        project = tmp_path / f"p{abs(hash((settings, extra)))}"
        (project / "proj").mkdir(parents=True)
        (project / "scrapy.cfg").write_text("[settings]\ndefault = proj.settings\n")
        (project / "proj" / "__init__.py").write_text("")
        (project / "proj" / "settings.py").write_text(settings)
        report = project / "r.jsonl"
        command = [
            str(scrapy),
            "simhash-dedupe",
            *inputs,
            "--workers",
            "1",
            "--no-progress",
            "--report",
            str(report),
        ]
        run = subprocess.run([*command, *extra], capture_output=True, text=True, cwd=project, timeout=120)
        assert run.returncode == 0, run.stderr
        return "http://b/edit" in report.read_text()

    assert edit_paired("")  # no setting: verified, the default
    assert not edit_paired("SIMHASH_MODE = 'simhash'\n")
    assert not edit_paired("SIMHASH_SIMILARITY = 0.99\n")
    assert edit_paired("SIMHASH_MODE = 'simhash'\n", "--mode", "verified")  # the command line wins
