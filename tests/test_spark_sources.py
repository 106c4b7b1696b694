"""Archives read through Spark's Hadoop filesystem (issue 15: "any URI Spark's Hadoop filesystem reads")
on a real local[2] Spark: the rows are the local streaming path's rows, whatever the scheme.

Two real Hadoop routes, no cluster needed: ``file:`` paths forced through Hadoop (``via_hadoop=True``)
and ``viewfs://`` URIs, a scheme of its own that Hadoop maps to local directories by its mount table,
so the code takes exactly the path an ``hdfs:`` or ``s3a:`` URI takes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from spark_support import FAST_EXTRACTOR, SMALL_DEDUPE_INPUTS

from scrapy_simhash.extract import get_extractor
from scrapy_simhash.warc.read.inputs import plan_inputs

pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[test]' installs it)")

from scrapy_simhash.spark import fingerprint_archives
from scrapy_simhash.spark.sources import HIDDEN, MISSING, NOT_READ_BY_SPARK, WACZ_VIA_HADOOP, list_sources

CORPUS_MOUNT = "viewfs://corpus/warcs"
WORK_MOUNT = "viewfs://corpus/work"

SMALL = "ukwa-webarchive-test-suite/small-arcs-and-warcs/IAH-20080430204825-00000-blackbook-truncated"
"""The example crawl's first pages, as a gzipped WARC and a gzipped ARC: the routes compared below read
them as they read the whole crawl (2.5 MB, 822 records), at a fiftieth of its extraction time."""
SMALL_ARC = f"{SMALL}.arc.gz"

FILES = [
    f"{SMALL}.warc.gz",
    SMALL_ARC,
    "resiliparse/warcfile.warc.gz",
    "dolma/sample-0000.warc.gz",
    "warcio/example-space-in-url.arc",
    # damaged
    "aut/arc/badexample.arc.gz",
    "warcio/example-trunc.warc",
    "resiliparse/clipped.warc.gz",
    "gowarc/corrupted-mid-record.warc.gz.open",
    "copycat/cc-arc-sample__small-sample-1213893279526_0.arc",
    "warcio/example-wrong-chunks.warc.gz",
]


@pytest.fixture(scope="session")
def work(spark_work: Path) -> Path:
    """The shared session's directories (tests/conftest.py): ``data`` is mounted as ``WORK_MOUNT``,
    ``spark-local`` is its ``spark.local.dir``."""
    return spark_work


def _data(work: Path, name: str) -> Path:
    path = work / "data" / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def rows(df, strip: str = "") -> list[tuple]:
    """Every column of every row, ``file`` without the ``strip`` prefix, in a stable order."""
    got = []
    for r in df.collect():
        file = r.file.removeprefix(strip)
        minhash = None if r.minhash is None else bytes(r.minhash)
        got.append(
            (
                r.input,
                file,
                r.offset,
                r.record_id,
                r.uri,
                r.date,
                r.simhash,
                r.tokens,
                r.reason,
                r.problem,
                r.skipped,
                minhash,
            )
        )
    return sorted(got, key=repr)


def test_hadoop_rows_equal_local_rows(spark, corpus, work):
    """The same files, streamed locally and read through Hadoop (``file:`` forced, and ``viewfs:``):
    identical rows, problems of the damaged files included, ``file`` naming the URI read; the
    executors' temporary local copies are removed once a file is read. The subject is the route, not
    the extractor: the fast one on all three (the default one reads URIs in the CLI tests below)."""
    fast = get_extractor(FAST_EXTRACTOR)
    local = [corpus / "warcs" / name for name in FILES]
    want = rows(fingerprint_archives(spark, local, extractor=fast), strip=str(corpus / "warcs") + "/")
    assert sum(1 for r in want if r[6] is not None) > 100  # 135 pages fingerprinted
    assert sum(1 for r in want if r[9] is not None and r[10]) >= 5  # damaged files lost data
    forced = fingerprint_archives(spark, [p.as_uri() for p in local], via_hadoop=True, extractor=fast)
    assert rows(forced, strip=f"file:{corpus / 'warcs'}/") == want
    viewfs = fingerprint_archives(spark, [f"{CORPUS_MOUNT}/{name}" for name in FILES], extractor=fast)
    assert rows(viewfs, strip=CORPUS_MOUNT + "/") == want
    left = [p for p in (work / "spark-local").rglob("scrapy-simhash-*")]
    assert left == []


def test_hadoop_rows_equal_local_rows_simhash_mode(spark, corpus):
    local = [corpus / "warcs" / name for name in FILES[:3]]
    want = rows(fingerprint_archives(spark, local, mode="simhash"), strip=str(corpus / "warcs") + "/")
    got = fingerprint_archives(spark, [f"{CORPUS_MOUNT}/{name}" for name in FILES[:3]], mode="simhash")
    assert rows(got, strip=CORPUS_MOUNT + "/") == want
    assert all(r[11] is None for r in want)


def test_directory_uri_expands_to_tags_positions(spark, corpus, work):
    """A directory URI is expanded as ``tag`` expands a directory: recursively, by path components
    (``a/`` before ``a-b/``, unlike a plain string sort), archives only, sidecars and indexes left out."""
    root = _data(work, "tree")
    source = corpus / "warcs" / "resiliparse/warcfile.warc.gz"
    for rel in ["a-b/x.warc.gz", "a/y.warc.gz", "a/z.arc", "b.warc.gz", "a/c/d.warc.gz"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / rel)
    shutil.copy(source, root / "a/y.warc.gz.simhash.warc.gz")  # a sidecar: not an input
    (root / "a/y.cdxj").write_text("")
    (root / "notes.txt").write_text("")
    want = [(i, str(e.path.relative_to(root))) for i, e in enumerate(plan_inputs([root]))]
    assert [rel for _, rel in want] == [
        "a/c/d.warc.gz",
        "a/y.warc.gz",
        "a/z.arc",
        "a-b/x.warc.gz",
        "b.warc.gz",
    ]
    uri = f"{WORK_MOUNT}/tree"
    # cached: the second query below reads these rows instead of fingerprinting every file again; the
    # fast extractor on both sides (the subject is the listing and the positions)
    fast = get_extractor(FAST_EXTRACTOR)
    df = fingerprint_archives(spark, [uri, corpus / "warcs" / f"{SMALL}.warc.gz"], extractor=fast).cache()
    got = sorted({(r.input, r.file.removeprefix(uri + "/")) for r in df.collect()})
    example = str(corpus / "warcs" / f"{SMALL}.warc.gz")
    assert got == [*want, (len(want), example)]  # the local argument after it keeps its position
    local = rows(fingerprint_archives(spark, [root], extractor=fast), strip=str(root) + "/")
    assert rows(df.where(df.input < len(want)), strip=uri + "/") == local
    df.unpersist()


PART = st.text("a-._~", min_size=1, max_size=3).filter(lambda p: p not in (".", ".."))
NAME = st.builds(
    lambda stem, ext: stem + ext, PART, st.sampled_from([".warc.gz", ".arc", ".warc", ".cdx", ""])
)
TREE = st.lists(st.lists(PART, max_size=2).flatmap(lambda d: NAME.map(lambda n: [*d, n])), max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(TREE)
@example([["a-", "x.warc.gz"], ["a", "y.warc.gz"], ["a.warc"]])
def test_directory_listing_order_is_plan_inputs_order(spark, work, tree):
    """Property: for any tree of names, the Hadoop listing of a directory gives ``plan_inputs``'s
    files in ``plan_inputs``'s order (names such as ``a-b`` and ``a/`` sort by path components)."""
    root = _data(work, "property")
    for parts in tree:
        path = root.joinpath(*parts)
        if any(p.is_file() for p in [*path.parents][: len(parts) - 1]) or path.is_dir():
            continue  # a name already used as a file (or directory) in this tree
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    want = [str(e.path.relative_to(root)) for e in plan_inputs([root]) if not e.not_read]
    got = [s.rel for s in list_sources(spark, f"{WORK_MOUNT}/property", 0, 1 << 30) if s.not_read != MISSING]
    got = [rel for rel in got if rel]  # the directory itself, when it holds no archive
    assert got == want


def test_names_with_glob_characters_are_read_literally(spark, corpus, work):
    """Spark's file sources read every path as a glob: a file named ``crawl[1]{a,b}*.warc.gz`` is still
    read as itself, with the local path's rows."""
    root = _data(work, "literal")
    name = "crawl[1]{a,b}*.warc.gz"
    shutil.copy(corpus / "warcs" / "resiliparse/warcfile.warc.gz", root / name)
    shutil.copy(corpus / "warcs" / "resiliparse/warcfile.warc.gz", root / "crawl1a.warc.gz")
    got = rows(fingerprint_archives(spark, [f"{WORK_MOUNT}/literal/{name}"]), strip=f"{WORK_MOUNT}/literal/")
    assert got == rows(fingerprint_archives(spark, [root / name]), strip=str(root) + "/")
    assert len(got) > 10 and {r[1] for r in got} == {name}


def test_glob_uri_expands_sorted(spark, corpus):
    """A glob (no shell expands ``s3a:`` patterns) lists its matches sorted; a glob matching nothing
    is one missing-input problem row."""
    # one small page each: the files' size adds nothing to listing them
    patterns = [f"{CORPUS_MOUNT}/warc*/example.{{warc,arc}}.gz", f"{CORPUS_MOUNT}/aut/*.nothing"]
    got = {(r.input, r.file, r.problem) for r in fingerprint_archives(spark, patterns).collect()}
    assert got == {
        (0, f"{CORPUS_MOUNT}/warcio/example.arc.gz", None),
        (1, f"{CORPUS_MOUNT}/warcio/example.warc.gz", None),
        (2, f"{CORPUS_MOUNT}/aut/*.nothing", MISSING),
    }


def test_damaged_copies_and_an_empty_directory(spark, corpus, work):
    """A truncated copy and a gzip-damaged copy give the local path's rows; a directory without archives
    is the same skipped problem row as ``tag`` reports for it."""
    root = _data(work, "damaged")
    # a WARC of one gzip member per record, as the large example crawl, at a tenth of its size
    data = (corpus / "warcs" / "dolma/sample-0000.warc.gz").read_bytes()
    (root / "cut.warc.gz").write_bytes(data[: len(data) // 2])
    (root / "holes.warc.gz").write_bytes(data[:5000] + b"\0" * 3000 + data[8000:])
    (root / "empty").mkdir()
    want = rows(fingerprint_archives(spark, [root / "cut.warc.gz", root / "holes.warc.gz"]), str(root) + "/")
    uris = [f"{WORK_MOUNT}/damaged/cut.warc.gz", f"{WORK_MOUNT}/damaged/holes.warc.gz"]
    got = rows(fingerprint_archives(spark, uris), strip=f"{WORK_MOUNT}/damaged/")
    assert got == want
    assert any(r[9] and "clipped" in r[9] for r in got) and any(r[9] and r[1] == "holes.warc.gz" for r in got)
    [empty] = fingerprint_archives(spark, [f"{WORK_MOUNT}/damaged/empty"]).collect()
    [local] = fingerprint_archives(spark, [root / "empty"]).collect()
    assert (empty.problem, empty.skipped) == (local.problem, local.skipped) == (local.problem, True)


def test_missing_over_cap_hidden_and_sidecar_inputs_are_problem_rows(spark, corpus, work):
    """None of these fails the job: each is one skipped problem row at its position, the rest is read."""
    root = _data(work, "problems")
    small = corpus / "warcs" / "resiliparse/warcfile.warc.gz"
    big = corpus / "warcs" / "aut/warc/example.warc.gz"
    shutil.copy(small, root / "small.warc")
    shutil.copy(big, root / "big.warc.gz")
    shutil.copy(small, root / "_hidden.warc")
    shutil.copy(small, root / "x.warc.gz.simhash.warc.gz")
    names = ["small.warc", "missing.warc.gz", "big.warc.gz", "_hidden.warc", "x.warc.gz.simhash.warc.gz"]
    cap = small.stat().st_size
    df = fingerprint_archives(spark, [f"{WORK_MOUNT}/problems/{n}" for n in names], max_file_bytes=cap)
    got = df.collect()
    problems = {r.input: r for r in got if r.problem}
    assert sorted(problems) == [1, 2, 3, 4]
    assert all(r.skipped and r.offset is None for r in problems.values())
    assert problems[1].problem == MISSING and problems[1].file == f"{WORK_MOUNT}/problems/missing.warc.gz"
    assert problems[2].problem.startswith(f"{big.stat().st_size} bytes: over the {cap} byte limit")
    assert "copy it to a shared filesystem" in problems[2].problem
    assert problems[3].problem == HIDDEN
    assert "sidecar" in problems[4].problem
    read = [r for r in got if r.input == 0]
    assert read and {r.file for r in read} == {f"{WORK_MOUNT}/problems/small.warc"}
    assert rows(df.where(df.input == 0), strip=f"{WORK_MOUNT}/problems/") == rows(
        fingerprint_archives(spark, [root / "small.warc"]), strip=str(root) + "/"
    )


def test_a_wacz_through_hadoop_is_a_problem_row_not_a_silent_skip(spark, corpus, work):
    """Packages are read in place from local paths; through Hadoop each is a skipped problem row saying
    so (in a directory too), and the WARCs beside it are read."""
    root = _data(work, "packages")
    shutil.copy(corpus / "warcs" / "py-wacz" / "valid_example_2.wacz", root / "c.wacz")
    shutil.copy(corpus / "warcs" / "resiliparse/warcfile.warc.gz", root / "d.warc.gz")
    for arguments in (
        [f"{WORK_MOUNT}/packages"],
        [f"{WORK_MOUNT}/packages/c.wacz", f"{WORK_MOUNT}/packages/d.warc.gz"],
    ):
        got = fingerprint_archives(spark, arguments).collect()
        problems = [r for r in got if r.problem]
        assert [(r.input, r.file, r.problem, r.skipped) for r in problems] == [
            (0, f"{WORK_MOUNT}/packages/c.wacz", WACZ_VIA_HADOOP, True)
        ]
        assert {r.file for r in got if not r.problem} == {f"{WORK_MOUNT}/packages/d.warc.gz"}


def test_file_gone_when_its_task_runs_is_a_problem_row(spark, corpus, work):
    """Listed on the driver, deleted before the executors read it: a problem row, the job goes on."""
    root = _data(work, "gone")
    for name in ["a.warc.gz", "b.warc.gz"]:
        shutil.copy(corpus / "warcs" / "resiliparse/warcfile.warc.gz", root / name)
    df = fingerprint_archives(spark, [f"{WORK_MOUNT}/gone"])
    (root / "a.warc.gz").unlink()
    got = df.collect()
    problems = [r for r in got if r.problem]
    assert [(r.input, r.file, r.problem, r.skipped) for r in problems] == [
        (0, f"{WORK_MOUNT}/gone/a.warc.gz", NOT_READ_BY_SPARK, True)
    ]
    assert {r.input for r in got if not r.problem} == {1} and len(got) > 10


def test_unknown_scheme_is_a_clear_error(spark):
    with pytest.raises(ValueError, match=r"no Hadoop filesystem for it: .*nosuchfs"):
        fingerprint_archives(spark, ["nosuchfs://bucket/crawl/x.warc.gz"])


def test_spark_dedupe_cli_reads_uris(spark, corpus, tmp_path, capsys, dedupe_report):
    """``spark dedupe`` takes Hadoop URIs: the report is ``dedupe``'s on the same files, with the URIs
    as ``file``; a missing URI is reported as skipped (exit 1), never a crash."""
    from scrapy_simhash.cli import main

    names = SMALL_DEDUPE_INPUTS  # as test_spark_submit.py's: dedupe's report is made once for both
    remote = tmp_path / "remote.jsonl"
    uris = [f"{CORPUS_MOUNT}/{n}" for n in names]
    assert main(["spark", "dedupe", *uris, "--report", str(remote)]) == 0
    want = [json.loads(line) for line in dedupe_report(names).splitlines()]
    got = [json.loads(line) for line in remote.read_text().splitlines()]
    assert any(row["role"] == "duplicate" for row in want)
    for row in want:
        row["file"] = row["file"].replace(str(corpus / "warcs"), CORPUS_MOUNT)
    assert got == want
    # the missing URI beside the smallest input: the files read add nothing to this check
    status = main(["spark", "dedupe", uris[2], f"{CORPUS_MOUNT}/nope.warc.gz", "--report", str(remote)])
    assert status == 1
    assert f"skipped: {CORPUS_MOUNT}/nope.warc.gz: {MISSING}" in capsys.readouterr().out


def sidecar_records(path: Path, source: str) -> list[tuple[str, dict[str, str], bytes]]:
    """(type, headers, content) of every record, ids and dates left out, ``source`` written as SOURCE."""
    from warcio.archiveiterator import ArchiveIterator

    records = []
    with path.open("rb") as stream:
        for record in ArchiveIterator(stream):
            headers = {
                k: v for k, v in record.rec_headers.headers if k not in ("WARC-Record-ID", "WARC-Date")
            }
            for name in ("Content-Length", "WARC-Block-Digest", "WARC-Payload-Digest"):  # the source differs
                headers.pop(name, None)
            content = record.content_stream().read().replace(source.encode(), b"SOURCE")
            records.append((record.rec_type, headers, content))
    return records


def test_spark_tag_cli_writes_tags_sidecars_for_uris(spark, corpus, work, tmp_path, capsys):
    """``spark tag URI... --out DIR``: the sidecars ``tag`` writes for the same files (named alike under
    --out, ``.open`` for the damaged ones), naming the URI as their source; problems name the URI; a
    missing URI is skipped (exit 1); complete sidecars are skipped on the next run without reading."""
    from scrapy_simhash.cli import main

    root = _data(work, "tag")
    data = (corpus / "warcs" / "resiliparse/warcfile.warc.gz").read_bytes()
    (root / "cut.warc.gz").write_bytes(data[: len(data) // 2])
    names = ["resiliparse/warcfile.warc.gz", SMALL_ARC, "aut/arc/badexample.arc.gz"]
    local_inputs = [str(corpus / "warcs" / n) for n in names] + [str(root / "cut.warc.gz")]
    uris = [f"{CORPUS_MOUNT}/{n}" for n in names] + [f"{WORK_MOUNT}/tag/cut.warc.gz"]
    local, distributed = tmp_path / "tag", tmp_path / "spark"
    assert main(["tag", *local_inputs, "--workers", "1", "--no-progress", "--out", str(local)]) == 1
    want = capsys.readouterr()
    assert main(["spark", "tag", *uris, "--out", str(distributed)]) == 1
    got = capsys.readouterr()
    names_out = sorted(p.name for p in local.iterdir())
    assert names_out == sorted(p.name for p in distributed.iterdir())
    assert "cut.warc.gz.simhash.warc.gz.open" in names_out and len(names_out) == 4
    for name, path, uri in zip(
        sorted(names_out), sorted(local_inputs, key=_base), sorted(uris, key=_base), strict=True
    ):
        assert name.startswith(_base(path))
        source = os.path.relpath(path, local)
        assert sidecar_records(distributed / name, uri) == sidecar_records(local / name, source), name
    assert [line.split(" read (")[0] for line in got.out.splitlines()] == [
        line.split(" read (")[0] for line in want.out.splitlines()
    ]
    spark_lines = [line for line in got.err.splitlines() if line.startswith(("skipped: ", "note: "))]
    want_lines = [line for line in want.err.splitlines() if line.startswith(("skipped: ", "note: "))]
    for path, uri in zip(local_inputs, uris, strict=True):
        want_lines = [line.replace(path, uri) for line in want_lines]
    assert [line.replace(str(local), str(distributed)) for line in want_lines] == spark_lines
    assert len(spark_lines) >= 2
    # rerun: finished sidecars skipped, damaged inputs redone; a missing URI is a skipped input
    assert main(["spark", "tag", *uris, f"{CORPUS_MOUNT}/nope.warc.gz", "--out", str(distributed)]) == 1
    rerun = capsys.readouterr()
    assert "files: 2 processed, 2 already complete" in rerun.out
    assert f"skipped: {CORPUS_MOUNT}/nope.warc.gz: {MISSING}" in rerun.err


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def test_spark_tag_of_uris_needs_out(spark, capsys):
    from scrapy_simhash.cli import main

    assert main(["spark", "tag", f"{CORPUS_MOUNT}/aut/warc/example.warc.gz"]) == 2
    assert "pass --out" in capsys.readouterr().err
