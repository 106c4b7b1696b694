"""scrapy_simhash.spark on a real local[2] Spark: the distributed join, components and archive reading
give the same answers as the single-machine code (brute force, index.batch, the tag/dedupe pipeline)."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from spark_support import FAST_EXTRACTOR

from scrapy_simhash.extract import Extractor, get_extractor
from scrapy_simhash.index.tables.batch import clusters as batch_clusters
from scrapy_simhash.index.tables.batch import popcount64
from scrapy_simhash.index.tables.layouts import resolve
from scrapy_simhash.spark.convert import to_signed, to_unsigned
from scrapy_simhash.warc.pipeline import Options, Pipeline
from scrapy_simhash.warc.progress import Progress
from scrapy_simhash.warc.read.inputs import plan_inputs
from scrapy_simhash.warc.read.reader import ReadProblem

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not installed (pip install -e '.[test]' installs it)"
)

from pyspark.sql import functions as F  # noqa: E402

from scrapy_simhash.spark import clusters, fingerprint_archives, near_duplicates  # noqa: E402
from scrapy_simhash.spark.pairs import candidate_groups  # noqa: E402

U64 = (1 << 64) - 1


# -- signed longs ------------------------------------------------------------------------------------


@given(st.integers(0, U64))
def test_signed_long_round_trip(value):
    signed = to_signed(value)
    assert -(1 << 63) <= signed < (1 << 63)
    assert to_unsigned(signed) == value
    assert np.array([value], dtype=np.uint64).view(np.int64)[0] == signed


def test_signed_long_refuses_out_of_range():
    with pytest.raises(ValueError):
        to_signed(1 << 64)
    with pytest.raises(ValueError):
        to_unsigned(1 << 63)


# -- near_duplicates == brute force -----------------------------------------------------------------


def _flip(value: int, bits: int, rnd: random.Random) -> int:
    for bit in rnd.sample(range(64), bits):
        value ^= 1 << bit
    return value


def planted(seed: int, bases: int, neighbours: int, copies: int, k: int = 3) -> list[int]:
    """Random fingerprints, neighbours at each distance 0..k+1 (exactly k and k+1 occur), identical copies."""
    rnd = random.Random(seed)
    out = [rnd.getrandbits(64) for _ in range(bases)]
    out += [0, U64, 1 << 63]  # the sign bit and the extremes of the signed reading
    for i in range(neighbours):
        out.append(_flip(rnd.choice(out), i % (k + 2), rnd))
    out += [out[0]] * copies
    rnd.shuffle(out)
    return out


def brute_force(hashes: list[int], k: int) -> set[tuple[int, int, int]]:
    h = np.array(hashes, dtype=np.uint64)
    found = set()
    for i in range(len(h) - 1):
        d = popcount64(h[i + 1 :] ^ h[i])
        for j in np.flatnonzero(d <= k).tolist():
            found.add((i, i + 1 + j, int(d[j])))
    return found


def spark_pairs(spark, hashes: list[int], k: int = 3, **kw) -> set[tuple[int, int, int]]:
    df = spark.createDataFrame([(i, to_signed(h)) for i, h in enumerate(hashes)], "id long, simhash long")
    rows = near_duplicates(df, k, **kw).collect()
    pairs = [(r.a, r.b, r.distance) for r in rows]
    assert len(pairs) == len(set(pairs)), "a pair was reported twice"
    return set(pairs)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32),
    k=st.integers(0, 4),
    copies=st.integers(0, 30),
    max_group=st.sampled_from([2, 7, 10_000]),
)
def test_near_duplicates_equal_brute_force(spark, seed, k, copies, max_group):
    hashes = planted(seed, bases=80, neighbours=120, copies=copies, k=k)
    want = brute_force(hashes, k)
    assert any(d == k for _, _, d in want) or k == 0 or not want
    assert spark_pairs(spark, hashes, k, max_group=max_group) == want


def test_near_duplicates_heavy_skew(spark):
    """600 copies of one fingerprint plus its neighbours: groups far above max_group are split in blocks."""
    rnd = random.Random(7)
    hot = rnd.getrandbits(64)
    hashes = [hot] * 600 + [_flip(hot, 1 + i % 4, rnd) for i in range(60)]
    hashes += [rnd.getrandbits(64) for _ in range(200)]
    rnd.shuffle(hashes)
    want = brute_force(hashes, 3)
    assert len(want) > 600 * 599 // 2
    assert spark_pairs(spark, hashes, 3, max_group=50) == want
    df = spark.createDataFrame([(i, to_signed(h)) for i, h in enumerate(hashes)], "id long, simhash long")
    groups = candidate_groups(df, resolve(None, 3), max_group=50)
    sizes = [r.n for r in groups.select(F.size("members").alias("n")).collect()]
    assert max(sizes) <= 3 * 50  # blocks are hashed: about max_group each, never the 600-record group
    assert sum(n for n in sizes if n > 50) > 16 * 600  # each table's hot key was split into block pairs


def test_near_duplicates_against_a_stored_collection(spark, tmp_path):
    """Last year's fingerprints from Parquet + this year's: only pairs with a new record, old-old left out."""
    hashes = planted(11, bases=150, neighbours=250, copies=40)
    old = [(i, to_signed(h), False) for i, h in enumerate(hashes) if i % 2 == 0]
    spark.createDataFrame(old, "id long, simhash long, new boolean").write.parquet(str(tmp_path / "old"))
    new = spark.createDataFrame(
        [(i, to_signed(h), True) for i, h in enumerate(hashes) if i % 2], "id long, simhash long, new boolean"
    )
    both = spark.read.parquet(str(tmp_path / "old")).unionByName(new)
    rows = near_duplicates(both, 3, new_col="new", max_group=20).collect()
    got = [(r.a, r.b, r.distance) for r in rows]
    want = {(a, b, d) for a, b, d in brute_force(hashes, 3) if a % 2 or b % 2}
    assert any(a % 2 == 0 and b % 2 == 0 for a, b, _ in brute_force(hashes, 3))  # old-old pairs exist
    assert len(got) == len(set(got)) and set(got) == want


def test_near_duplicates_string_ids_and_nulls(spark):
    df = spark.createDataFrame(
        [("b", to_signed(5)), ("a", to_signed(7)), ("c", None), ("d", to_signed(U64))],
        "url string, fp long",
    )
    rows = near_duplicates(df, 1, id_col="url", simhash_col="fp").collect()
    assert [(r.a, r.b, r.distance) for r in rows] == [("a", "b", 1)]


def test_near_duplicates_refuses_an_incomplete_layout(spark):
    from scrapy_simhash.index.base import LayoutError

    df = spark.createDataFrame([(1, 1)], "id long, simhash long")
    with pytest.raises(LayoutError):
        near_duplicates(df, 5, layout="manku")


# -- clusters == index.batch clusters ---------------------------------------------------------------


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), chain=st.integers(0, 40))
def test_clusters_equal_batch_clusters(spark, seed, chain):
    rnd = random.Random(seed)
    n = 200
    pairs = {tuple(sorted(rnd.sample(range(n), 2))) for _ in range(120)}
    # a long path in scrambled order: many rounds for label propagation, few for large/small-star
    path = rnd.sample(range(n), chain + 2) if chain else []
    pairs |= {tuple(sorted(p)) for p in itertools.pairwise(path)}
    pairs_df = spark.createDataFrame(sorted(pairs), "a long, b long")
    got = {r.id: r.cluster for r in clusters(pairs_df).collect()}
    labels = batch_clusters(pairs=np.array(sorted(pairs)), n=n)
    in_pairs = {v for p in pairs for v in p}
    assert got == {v: int(labels[v]) for v in in_pairs}


def test_a_round_changed_the_edges_unless_both_sets_are_equal(spark):
    """The convergence test of each round (one subtraction and two counts): any edge gained, lost or
    replaced is a change, the same set in another order is not."""
    from scrapy_simhash.spark.components import _changed

    sc = spark.sparkContext
    edges = sc.parallelize([(2, 1), (3, 1), (5, 4)], 2).cache()
    for small, changed in [
        ([(5, 4), (3, 1), (2, 1)], False),
        ([(2, 1), (3, 1)], True),  # lost an edge: only the counts tell
        ([(2, 1), (3, 1), (5, 4), (6, 4)], True),
        ([(2, 1), (3, 2), (5, 4)], True),  # as many edges, one replaced
        ([], True),
    ]:
        assert _changed(edges, sc.parallelize(small, 3).cache()) is changed, small


def test_clusters_of_a_square_whose_large_star_repeats_an_edge(spark):
    """1-2, 1-3, 2-4, 3-4: the large-star step gives 4-1 twice (from 2 and from 3), which the small-star
    step takes as one edge: one component, smallest first."""
    pairs = spark.createDataFrame([(1, 2), (1, 3), (2, 4), (3, 4)], "a long, b long")
    assert {r.id: r.cluster for r in clusters(pairs).collect()} == {1: 1, 2: 1, 3: 1, 4: 1}


def test_clusters_representative_by_order(spark):
    pairs = spark.createDataFrame([(1, 2), (2, 3), (10, 11)], "a long, b long")
    order = spark.createDataFrame([(1, 5), (2, 0), (3, 9), (10, 1), (11, 1)], "id long, order long")
    got = {r.id: r.cluster for r in clusters(pairs, order=order).collect()}
    assert got == {1: 2, 2: 2, 3: 2, 10: 10, 11: 10}
    with pytest.raises(ValueError, match="order has no row"):
        clusters(pairs, order=order.where("id != 3"))


def test_only_local_paths_and_file_uris(spark, tmp_path):
    from scrapy_simhash.spark.archives import local_path

    assert local_path(f"file://{tmp_path}/a%20b.warc.gz") == f"{tmp_path}/a b.warc.gz"
    assert local_path("/x/y.warc") == "/x/y.warc"
    with pytest.raises(ValueError, match="only local paths and file: URIs"):
        local_path("hdfs://namenode/crawl/x.warc.gz")  # other schemes: tests/test_spark_sources.py
    with pytest.raises(ValueError, match="no such file"):
        fingerprint_archives(spark, [tmp_path / "missing.warc.gz"])


# -- fingerprint_archives == the tag/dedupe pipeline ------------------------------------------------

GOOD = [
    "aut/warc/example.warc.gz",
    "aut/arc/example.arc.gz",
    "resiliparse/warcfile.warc.gz",
    "dolma/sample-0000.warc.gz",
]
DAMAGED = [
    "aut/arc/badexample.arc.gz",
    "warcio/example-trunc.warc",
    "resiliparse/clipped.warc.gz",
    "gowarc/corrupted-mid-record.warc.gz.open",
]


def _is_date_note(problem: ReadProblem) -> bool:
    return not problem.skipped and (
        "copied as it is" in problem.reason or "copied as they are" in problem.reason
    )


def pipeline_rows(paths: list[Path], extractor: Extractor):
    pages, problems = set(), set()
    # two worker processes: the rows do not depend on how many extract them, and the two cores halve
    # the time the whole example crawl (twice, as WARC and as ARC) takes to extract
    options = Options(workers=2, extractor=extractor)
    for event in Pipeline(options, Progress(0, enabled=False)).run(plan_inputs(paths)):
        if isinstance(event, ReadProblem):
            if not _is_date_note(event):
                problems.add((event.file, event.offset, event.reason, event.skipped))
        elif isinstance(event, list):
            pages |= {
                (r.file, r.offset, r.record_id, r.uri, r.date, r.simhash, r.tokens, r.reason) for r in event
            }
    return pages, problems


def spark_rows(df):
    pages, problems = set(), set()
    for r in df.collect():
        if r.problem is not None:
            problems.add((r.file, r.offset, r.problem, r.skipped))
        else:
            simhash = None if r.simhash is None else to_unsigned(r.simhash)
            pages.add((r.file, r.offset, r.record_id, r.uri, r.date, simhash, r.tokens, r.reason))
    return pages, problems


def test_fingerprint_archives_same_as_pipeline(spark, corpus):
    """Every row of the whole example crawl (as WARC and as ARC) and of damaged files: Spark's rows are
    the pipeline's. The subject is the reading and the rows, not the extractor: the fast one on both
    sides (the default extractor's rows are compared end to end in the report tests below)."""
    paths = [corpus / "warcs" / name for name in GOOD + DAMAGED]
    extractor = get_extractor(FAST_EXTRACTOR)
    want_pages, want_problems = pipeline_rows(paths, extractor)
    df = fingerprint_archives(spark, paths, extractor=extractor)
    got_pages, got_problems = spark_rows(df)
    assert sum(1 for p in want_pages if p[5] is not None) > 100
    assert got_pages == want_pages
    assert got_problems == want_problems
    # every damaged file is reported (clipped.warc.gz as a truncated-record note), the good ones are not
    assert {Path(f) for f, _, _, _ in got_problems} == {corpus / "warcs" / n for n in DAMAGED}
    assert {Path(f) for f, _, _, skipped in got_problems if skipped} >= {
        corpus / "warcs" / n for n in DAMAGED if "clipped" not in n
    }


def test_fingerprint_archives_truncated_copy_keeps_earlier_records(spark, corpus, tmp_path):
    from warcio.archiveiterator import ArchiveIterator

    # the example crawl's first three fifths, cut at a record boundary: a whole WARC of 591 records (97
    # HTML pages), whose half keeps 34 pages before the cut; the property needs a whole file and a copy
    # cut inside a record, not the whole crawl's extraction time
    source = corpus / "warcs" / "aut/warc/example.warc.gz"
    data = source.read_bytes()
    with source.open("rb") as stream:
        records = ArchiveIterator(stream)
        end = next(o for _ in records if (o := records.get_record_offset()) >= len(data) * 3 // 5)
    (tmp_path / "whole.warc.gz").write_bytes(data[:end])
    (tmp_path / "cut.warc.gz").write_bytes(data[: end // 2])
    rows = fingerprint_archives(
        spark, [f"file://{tmp_path}"], extractor=get_extractor(FAST_EXTRACTOR)
    ).collect()
    by_file = {}
    for r in rows:
        by_file.setdefault(Path(r.file).name, []).append(r)
    assert {r.input for r in by_file["cut.warc.gz"]} == {0}  # sorted directory listing: cut before whole
    problems = [r for r in by_file["cut.warc.gz"] if r.problem]
    assert len(problems) == 1 and "clipped" in problems[0].problem and problems[0].skipped
    assert not any(r.problem for r in by_file["whole.warc.gz"])
    whole = {(r.offset, r.simhash) for r in by_file["whole.warc.gz"]}
    before = {(r.offset, r.simhash) for r in by_file["cut.warc.gz"] if r.offset < problems[0].offset}
    assert len(before) > 20 and before < whole


CAPTURES = 150
"""The example crawl's captures the report tests read, as WARC and as ARC: the first half of its 299
responses, 56 of its 140 HTML pages. Each copy's pages are the other's twins, so every page makes a
cluster; the tie-breaks and the numbering these tests check need many clusters, not the whole crawl."""


def first_responses(path: Path, count: int) -> bytes:
    """The archive's records before its ``count``-th response record (a whole, smaller archive: the
    example crawl's WARC and ARC hold the same responses in the same order, one gzip member each)."""
    from warcio.archiveiterator import ArchiveIterator

    with path.open("rb") as stream:
        records = ArchiveIterator(stream, arc2warc=True)
        starts = (records.get_record_offset() for record in records if record.rec_type == "response")
        end = next(itertools.islice(starts, count, None))
    return path.read_bytes()[:end]


def test_spark_dedupe_report_same_as_dedupe(spark, corpus, tmp_path, capsys):
    """``spark dedupe --report`` writes the very report ``dedupe --report`` writes (same clusters, same
    originals, same order), and both exit 1 when a damaged file lost data."""
    from scrapy_simhash.cli import main

    # the example crawl's first CAPTURES responses as WARC and as ARC (each page and its twin: a cluster
    # each, the many clusters the order and the numbering need; every row of the whole crawl is compared
    # with the pipeline's in test_fingerprint_archives_same_as_pipeline), and the other inputs as they are
    twins = []
    for name in ("aut/warc/example.warc.gz", "aut/arc/example.arc.gz"):
        copy = tmp_path / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(first_responses(corpus / "warcs" / name, CAPTURES))
        twins.append(str(copy))
    others = [name for name in GOOD if not name.startswith("aut/")] + ["aut/arc/badexample.arc.gz"]
    inputs = twins + [str(corpus / "warcs" / name) for name in others]
    local, distributed = tmp_path / "dedupe.jsonl", tmp_path / "spark.jsonl"
    assert main(["dedupe", *inputs, "--workers", "2", "--report", str(local)]) == 1
    assert main(["spark", "dedupe", *inputs, "--master", "local[2]", "--report", str(distributed)]) == 1
    want = local.read_text(encoding="utf-8")
    assert want.count("\n") > 20 and '"role": "duplicate"' in want
    assert distributed.read_text(encoding="utf-8") == want
    assert "skipped: " in capsys.readouterr().out


def test_spark_dedupe_says_how_each_clustered_capture_changed(spark, tmp_path, capsys):
    """Three months of captures of four pages: ``spark dedupe`` rows carry the kinds ``dedupe`` gives,
    except through the revisit record, which Spark does not read (month 3's byte-identical page is then
    compared with month 1's)."""
    from test_warc_timeline import expected_changes, row_changes, write_month

    from scrapy_simhash.cli import main

    captures: dict = {}
    for month in (1, 2, 3):
        write_month(tmp_path / f"month-{month}.warc.gz", month, captures)
    report = tmp_path / "spark.jsonl"
    assert main(["spark", "dedupe", str(tmp_path), "--master", "local[2]", "--report", str(report)]) == 0
    rows = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    expected = expected_changes(captures)
    del expected[captures[(2, "/same.html")]["id"]]
    first = captures[(1, "/same.html")]
    expected[captures[(3, "/same.html")]["id"]] = ("unchanged", first["id"], first["date"])
    assert row_changes(rows) == expected
    capsys.readouterr()


def test_spark_dedupe_against_a_saved_table(spark, corpus, tmp_path, capsys):
    """Last year's run saved its fingerprints (--save); this year's run is deduplicated against them
    (--against) without reading last year's WARC again: the clusters holding a new record are those
    ``dedupe`` finds over both years, with the same originals."""
    from scrapy_simhash.cli import main

    old_copy = tmp_path / "2025" / "example.warc.gz"  # last year's archive, gone before this year's run
    old_copy.parent.mkdir()
    old_copy.write_bytes(first_responses(corpus / "warcs" / "aut/warc/example.warc.gz", CAPTURES))
    # the same captures again, as ARC; both copies under tmp_path so that the file-name tie below does not
    # depend on where the corpus lives ("2025/..." sorts before "2026/...")
    new_copy = tmp_path / "2026" / "example.arc.gz"
    new_copy.parent.mkdir()
    new_copy.write_bytes(first_responses(corpus / "warcs" / "aut/arc/example.arc.gz", CAPTURES))
    new = str(new_copy)
    table, report = tmp_path / "fingerprints-2025", tmp_path / "2026.jsonl"
    # the fast extractor in all three runs: the subject is the saved table and the join against it (the
    # default extractor's report is compared end to end in test_spark_dedupe_report_same_as_dedupe)
    fast = ["--extractor", FAST_EXTRACTOR]
    assert main(["spark", "dedupe", str(old_copy), "--master", "local[2]", "--save", str(table), *fast]) == 0
    both = tmp_path / "both.jsonl"
    assert main(["dedupe", str(old_copy), new, "--workers", "2", "--report", str(both), *fast]) == 0
    old_copy.unlink()
    args = ["spark", "dedupe", new, "--master", "local[2]", "--against", str(table), "--report", str(report)]
    assert main([*args, *fast]) == 0

    def clusters(path: Path) -> list[list[tuple[str, int, str]]]:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        out: dict[int, list[tuple[str, int, str]]] = {}
        for row in rows:
            out.setdefault(row["cluster"], []).append((row["file"], row["offset"], row["role"]))
        return sorted(out.values())

    want = [c for c in clusters(both) if any(file == new for file, _, _ in c)]
    got = clusters(report)
    assert len(want) > 20 and got == want
    originals = [member for cluster in got for member in cluster if member[2] == "original"]
    # both years hold the same captures (one crawl as WARC and as ARC): the earliest-capture tie goes to
    # the file name, last year's (2025/ before 2026/) in both runs
    assert sum(file == str(old_copy) for file, _, _ in originals) > 20
    capsys.readouterr()
    assert main(["spark", "dedupe", new, "--save", str(table)]) == 2  # a table is written once
    assert "already exists" in capsys.readouterr().err
    assert main(["spark", "dedupe", new, "--against", str(tmp_path / "nothing")]) == 2
    assert "no such table" in capsys.readouterr().err


# -- spark tag == tag --------------------------------------------------------------------------------


def sidecar_records(path: Path) -> list[tuple[str, dict[str, str], bytes]]:
    """Every record of a sidecar as (type, headers, payload), less the fields that are random or now:
    the sidecar's own WARC-Record-ID and WARC-Date (WARC-Refers-To, the target and the payload stay)."""
    from warcio.archiveiterator import ArchiveIterator

    records = []
    with path.open("rb") as stream:
        for record in ArchiveIterator(stream):
            headers = {
                k: v for k, v in record.rec_headers.headers if k not in ("WARC-Record-ID", "WARC-Date")
            }
            records.append((record.rec_type, headers, record.content_stream().read()))
    return records


def test_spark_tag_sidecars_same_as_tag(spark, corpus, tmp_path, capsys):
    """``spark tag`` writes, from the executors, the sidecars ``tag`` writes (same names, ``.open`` for
    the damaged inputs, same records and fields), prints the same problems and summary, exits alike."""
    from scrapy_simhash.cli import main

    source = corpus / "warcs" / "resiliparse/warcfile.warc.gz"
    data = source.read_bytes()
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(
        data[: len(data) // 2]
    )  # damaged: records before the cut are tagged, the sidecar stays .open
    inputs = [
        str(source),
        str(corpus / "warcs" / "aut/arc/example.arc.gz"),  # ARC: WARC-Refers-To-Target-URI/-Date
        str(corpus / "warcs" / "aut/arc/badexample.arc.gz"),
        str(cut),
    ]
    local, distributed = tmp_path / "tag", tmp_path / "spark"
    # the fast extractor on both sides: the subject is the sidecars' writing, not the extractor (spark
    # tag's sidecars with the default one: test_spark_tag_cli_writes_tags_sidecars_for_uris)
    fast = ["--extractor", FAST_EXTRACTOR]
    want_status = main(["tag", *inputs, "--workers", "1", "--no-progress", "--out", str(local), *fast])
    want = capsys.readouterr()
    status = main(["spark", "tag", *inputs, "--master", "local[2]", "--out", str(distributed), *fast])
    got = capsys.readouterr()
    assert want_status == status == 1
    names = sorted(p.name for p in local.iterdir())
    assert names == sorted(p.name for p in distributed.iterdir())
    assert names == [
        "badexample.arc.gz.simhash.warc.gz.open",
        "cut.warc.gz.simhash.warc.gz.open",
        "example.arc.gz.simhash.warc.gz",
        "warcfile.warc.gz.simhash.warc.gz",
    ]
    for name in names:
        assert sidecar_records(distributed / name) == sidecar_records(local / name), name
    assert len(sidecar_records(distributed / "cut.warc.gz.simhash.warc.gz.open")) > 3
    arc = sidecar_records(distributed / "example.arc.gz.simhash.warc.gz")
    assert len(arc) > 50 and all("WARC-Refers-To-Date" in headers for _, headers, _ in arc[1:])
    # the same summary (less the rate), the same problem lines (the sidecar directory differs)
    assert [line.split(" read (")[0] for line in got.out.splitlines()] == [
        line.split(" read (")[0] for line in want.out.splitlines()
    ]
    assert "problems: " in got.out and "skipped data" in got.out
    spark_lines = [line for line in got.err.splitlines() if line.startswith(("skipped: ", "note: "))]
    assert spark_lines == [
        line.replace(str(local), str(distributed))
        for line in want.err.splitlines()
        if line.startswith(("skipped: ", "note: "))
    ]
    # a rerun skips the finished sidecars and redoes the damaged inputs, as tag does
    assert main(["spark", "tag", *inputs, "--master", "local[2]", "--out", str(distributed), *fast]) == 1
    assert "files: 2 processed, 2 already complete" in capsys.readouterr().out


def test_spark_tag_and_dedupe_read_pages_with_the_chosen_extractor(spark, corpus, tmp_path, capsys):
    """``--extractor`` reaches the executors (the extractor is pickled into their tasks): the sidecars
    and the report are ``tag``'s and ``dedupe``'s with the same extractor, and name it."""
    from scrapy_simhash.cli import main
    from scrapy_simhash.extract import extractor_names
    from scrapy_simhash.extract.registry import DEFAULT_NAME

    others = [name for name in extractor_names() if name != DEFAULT_NAME]
    if not others:
        pytest.skip("only one extractor is registered")
    chosen = ["--extractor", others[0]]
    inputs = [
        str(corpus / "warcs" / name) for name in ("resiliparse/warcfile.warc.gz", "resiliparse/warcfile.warc")
    ]
    local, distributed = tmp_path / "tag", tmp_path / "spark"
    assert main(["tag", inputs[0], "--workers", "1", "--no-progress", "--out", str(local), *chosen]) == 0
    assert main(["spark", "tag", inputs[0], "--master", "local[2]", "--out", str(distributed), *chosen]) == 0
    name = "warcfile.warc.gz.simhash.warc.gz"
    records = sidecar_records(distributed / name)
    assert records == sidecar_records(local / name)
    named = {
        payload.split(b"text-extractor: ")[1].split(b"/")[0]
        for _, _, payload in records
        if b"text-extractor: " in payload
    }
    assert named == {others[0].encode()}
    reports = tmp_path / "dedupe.jsonl", tmp_path / "spark.jsonl"
    assert (
        main(["dedupe", *inputs, "--workers", "1", "--no-progress", "--report", str(reports[0]), *chosen])
        == 0
    )
    assert (
        main(["spark", "dedupe", *inputs, "--master", "local[2]", "--report", str(reports[1]), *chosen]) == 0
    )
    want = reports[0].read_text(encoding="utf-8")
    assert reports[1].read_text(encoding="utf-8") == want
    assert {json.loads(line)["extractor"].split("/")[0] for line in want.splitlines()} == {others[0]}
    capsys.readouterr()


def test_spark_tag_task_failure_is_a_problem_not_a_crash(corpus, tmp_path):
    """An executor task that cannot write its sidecar reports the input as skipped (exit 1) and returns."""
    from scrapy_simhash.spark.tag import tag_input

    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    [entry] = plan_inputs([corpus / "warcs" / "aut/warc/example.warc.gz"], blocker / "out")
    summary, text = tag_input(entry, Options())
    assert summary.exit_status == 1
    assert [p.skipped for p in summary.problems] == [True]
    assert text.startswith("skipped: ") and "file failed: " in text


def test_spark_tag_help_says_no_index(capsys):
    """Without an index nothing is a near-duplicate: --help says so and names the ways to get them."""
    from scrapy_simhash.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["spark", "tag", "--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "nothing is detected as a near-duplicate" in text
    assert "tag --index" in text and "spark dedupe" in text


# -- issue 13: verified pairs (LSH bands of the sketches, checked by the rule) -------------------------


def planted_sketches(seed: int, bases: int, variants: int, bare: int) -> list[tuple[int, np.ndarray | None]]:
    """(simhash, sketch) pages: random bases, variants sharing 30..100 % of a base's values (some
    with a near simhash, some far), and ``bare`` pages without sketch near some base's simhash."""
    rnd = random.Random(seed)
    gen = np.random.default_rng(seed)
    pages: list[tuple[int, np.ndarray | None]] = []
    for _ in range(bases):
        pages.append((rnd.getrandbits(64), gen.integers(0, 2**32, 128, dtype=np.uint32)))
    for _ in range(variants):
        h, s = pages[rnd.randrange(bases)]
        assert s is not None
        sketch = s.copy()
        changed = gen.random(128) < rnd.choice([0.0, 0.1, 0.3, 0.5, 0.7])
        sketch[changed] = gen.integers(0, 2**32, int(changed.sum()), dtype=np.uint32)
        near = _flip(h, rnd.randint(0, 3), rnd) if rnd.random() < 0.5 else rnd.getrandbits(64)
        pages.append((near, sketch))
    for _ in range(bare):
        h = pages[rnd.randrange(len(pages))][0]
        pages.append((_flip(h, rnd.randint(0, 5), rnd), None))
    rnd.shuffle(pages)
    return pages


def rule_brute_force(pages, rule=None) -> set[tuple[int, int, int, float | None]]:
    from scrapy_simhash.decision import DEFAULT_RULE

    rule = rule or DEFAULT_RULE
    found = set()
    for i, j in itertools.combinations(range(len(pages)), 2):
        verdict = rule.compare_values(pages[i][0], pages[j][0], pages[i][1], pages[j][1])
        if verdict.near_duplicate:
            found.add((i, j, verdict.distance, verdict.similarity))
    return found


def sketch_frame(spark, pages):
    from scrapy_simhash.fingerprint.minhash import MinHash

    rows = [
        (i, to_signed(h), None if s is None else bytearray(MinHash(s).to_bytes()))
        for i, (h, s) in enumerate(pages)
    ]
    return spark.createDataFrame(rows, "id long, simhash long, minhash binary")


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), bare=st.sampled_from([0, 15]), max_group=st.sampled_from([3, 10_000]))
def test_verified_near_duplicates_equal_the_rule_on_every_pair(spark, seed, bare, max_group):
    pages = planted_sketches(seed, bases=25, variants=60, bare=bare)
    want = rule_brute_force(pages)
    assert any(s is not None and s < 1.0 for *_, s in want)  # verified pairs that are not copies
    rows = near_duplicates(sketch_frame(spark, pages), 3, max_group=max_group).collect()
    got = [(r.a, r.b, r.distance, r.similarity) for r in rows]
    assert len(got) == len(set(got)), "a pair was reported twice"
    assert set(got) == want
    simhash_only = near_duplicates(sketch_frame(spark, pages), 3, mode="simhash").collect()
    assert {(r.a, r.b, r.distance) for r in simhash_only} == brute_force([h for h, _ in pages], 3)
    assert all(r.similarity is None for r in simhash_only)


def test_verified_band_groups_split_identical_pages(spark):
    """150 copies of one sketch: every band's group is split into blocks, each pair still reported once."""
    from scrapy_simhash.decision import DEFAULT_RULE
    from scrapy_simhash.spark.bands import band_groups

    gen = np.random.default_rng(3)
    hot = gen.integers(0, 2**32, 128, dtype=np.uint32)
    pages = [(i + 1, hot) for i in range(150)] + [(7, gen.integers(0, 2**32, 128, dtype=np.uint32))]
    df = sketch_frame(spark, pages)
    got = [(r.a, r.b) for r in near_duplicates(df, 3, max_group=20).collect()]
    assert len(got) == len(set(got)) == 150 * 149 // 2
    sizes = [
        r.n
        for r in band_groups(df, DEFAULT_RULE, max_group=20).select(F.size("members").alias("n")).collect()
    ]
    assert max(sizes) <= 3 * 20


def test_fingerprint_archives_rows_carry_the_sketch(spark, corpus, tmp_path):
    from verified_support import edit_inputs, planted_edit

    from scrapy_simhash.fingerprint.minhash import MinHash
    from scrapy_simhash.page import fingerprint_page

    inputs = edit_inputs(corpus, tmp_path)
    rows = {r.uri: r for r in fingerprint_archives(spark, inputs).collect()}
    original, edited = planted_edit(corpus)
    assert MinHash.from_bytes(bytes(rows["http://b/edit"].minhash)) == fingerprint_page(edited).minhash
    assert MinHash.from_bytes(bytes(rows["http://a/orig"].minhash)) == fingerprint_page(original).minhash
    assert all(r.minhash is None for r in fingerprint_archives(spark, inputs, mode="simhash").collect())


@pytest.mark.parametrize("mode", ["verified", "simhash"])
def test_spark_dedupe_pairs_the_one_sentence_edit_as_dedupe_does(spark, corpus, tmp_path, capsys, mode):
    from verified_support import edit_inputs

    from scrapy_simhash.cli import main

    inputs = [str(p) for p in edit_inputs(corpus, tmp_path / "in")]
    local, distributed = tmp_path / "dedupe.csv", tmp_path / "spark.csv"
    common = ["--mode", mode, "--report"]
    assert main(["dedupe", *inputs, "--workers", "1", "--no-progress", *common, str(local)]) == 0
    assert main(["spark", "dedupe", *inputs, "--master", "local[2]", *common, str(distributed)]) == 0
    want = local.read_text(encoding="utf-8")
    assert want.splitlines()[0].endswith(
        "simhash,distance,similarity,method,rule,keep,extractor,revisit,revisit_of,"
        "text_change,text_similarity,previous_capture,previous_capture_date"
    )
    assert ("http://b/edit" in want) == (mode == "verified")  # only the verified rule pairs the edit
    assert distributed.read_text(encoding="utf-8") == want
    assert f"decisions: {mode} mode" in capsys.readouterr().out


def test_spark_dedupe_chooses_the_originals_dedupe_chooses_under_each_keep_policy(
    spark, corpus, tmp_path, capsys
):
    """One story captured four times over two WARCs: under each policy ``spark dedupe`` writes the report
    ``dedupe --workers 2`` writes, byte for byte, and the original is the policy's."""
    from keep_support import EXPECTED, keep_inputs

    from scrapy_simhash.cli import main

    inputs = [str(p) for p in keep_inputs(corpus, tmp_path / "in")]
    for keep in ("latest", "longest", "shortest-url"):
        local, distributed = tmp_path / f"dedupe-{keep}.jsonl", tmp_path / f"spark-{keep}.jsonl"
        args = ["--keep", keep, "--report"]
        assert main(["dedupe", *inputs, "--workers", "2", "--no-progress", *args, str(local)]) == 0
        assert main(["spark", "dedupe", *inputs, "--master", "local[2]", *args, str(distributed)]) == 0
        want = local.read_text(encoding="utf-8")
        assert distributed.read_text(encoding="utf-8") == want
        rows = [json.loads(line) for line in want.splitlines()]
        assert {row["uri"] for row in rows if row["role"] == "original"} >= {EXPECTED[keep]}
        assert f"originals: chosen by --keep {keep}" in capsys.readouterr().out


# -- the tests' shared session -------------------------------------------------------------------------


def test_a_second_local_spark_is_refused_while_the_shared_session_runs(spark):
    """getOrCreate would hand the shared session back, and stopping it after would break the tests
    that come later: local_spark says so instead, and the shared session goes on."""
    from spark_support import local_spark

    with pytest.raises(RuntimeError, match="session-scoped `spark` fixture"), local_spark("another-session"):
        pass
    assert spark.range(3).count() == 3


def test_a_saved_table_records_its_extractor_and_against_refuses_another(spark, corpus, tmp_path, capsys):
    """``--save`` writes the run's extractor with every row; ``--against`` a table of another extractor
    is refused (status 2, naming both and --mix-extractors) before anything is saved, and goes on when
    mixing is asked; a table of another version only, or saved before tables recorded their extractor,
    goes on with one warning, and each report row names its own page's extractor."""
    from pyspark.sql import functions as F

    from scrapy_simhash.cli import main
    from scrapy_simhash.extract import DEFAULT_EXTRACTOR
    from scrapy_simhash.extract.registry import DEFAULT_NAME
    from scrapy_simhash.extract.resiliparse import ResiliparseExtractor

    default, other = DEFAULT_EXTRACTOR.description, ResiliparseExtractor().description
    warc = str(corpus / "warcs" / "resiliparse/warcfile.warc.gz")
    run = ["spark", "dedupe", warc, "--master", "local[2]"]
    table = tmp_path / "saved"
    assert main([*run, "--save", str(table)]) == 0
    assert {r[0] for r in spark.read.parquet(str(table)).select("extractor").distinct().collect()} == {
        default
    }
    capsys.readouterr()

    again, report = tmp_path / "again", tmp_path / "again.jsonl"
    refused = [*run, "--against", str(table), "--extractor", "resiliparse", "--save", str(again)]
    assert main([*refused, "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert f"--against {table} holds pages fingerprinted by the extractor {default}" in err
    assert f"this run's is {other} (name {DEFAULT_NAME} -> resiliparse)" in err and "--mix-extractors" in err
    assert f"Run with the table's extractor (--extractor {DEFAULT_NAME})" in err
    assert not again.exists() and not report.exists()
    assert main([*refused, "--report", str(report), "--mix-extractors"]) == 0
    assert f"warning: --against {table} holds pages made by {default}" in capsys.readouterr().err
    assert {r[0] for r in spark.read.parquet(str(again)).select("extractor").distinct().collect()} == {other}

    stored = spark.read.parquet(str(table))
    older = tmp_path / "older"  # saved before tables recorded their extractor
    stored.drop("extractor").write.parquet(str(older))
    assert main([*run, "--against", str(older), "--extractor", "resiliparse"]) == 2
    assert "trafilatura (of unknown version and options" in capsys.readouterr().err
    assert main([*run, "--against", str(older)]) == 2  # trafilatura's pages: not the default's
    assert "Run with the table's extractor (--extractor trafilatura)" in capsys.readouterr().err
    assert main([*run, "--against", str(older), "--extractor", "trafilatura", "--report", str(report)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "does not record its extractor" in warnings[0]

    version = f"{DEFAULT_NAME}/0.0.1+0.0.1;" + default.split(";", 1)[1]
    bumped = tmp_path / "bumped"
    stored.withColumn("extractor", F.lit(version)).write.parquet(str(bumped))
    assert main([*run, "--against", str(bumped), "--report", str(report)]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "the same extractor and options at another version" in warnings[0]
    rows = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines()]
    by_cluster: dict[int, list[str]] = {}
    for row in rows:
        by_cluster.setdefault(row["cluster"], []).append(row["extractor"])
    # every page of the run is an exact copy of a stored one: each pair names both extractors
    assert by_cluster and all(sorted(named) == sorted([default, version]) for named in by_cluster.values())
