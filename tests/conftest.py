"""Shared fixtures: the read-only test corpus beside the project, one Spark session for the whole run,
and the runs over the corpus that several test files only read (made once a session)."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SCRAPY_SIMHASH_SHARED", REPO.parent / "shared")).resolve()
CORPUS = SHARED / "corpus"
SPEC = SHARED / "spec"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(
            f"test data missing: {path} does not exist. The tests read the shared corpus and spec from "
            f"../shared beside the repository (or from $SCRAPY_SIMHASH_SHARED).",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def corpus() -> Path:
    return _require(CORPUS)


@pytest.fixture(scope="session")
def spec() -> Path:
    return _require(SPEC)


@pytest.fixture(scope="session")
def corpus_pages(corpus: Path) -> list[Path]:
    """The corpus's HTML pages (``pages/**/*.html.gz``), sorted."""
    return sorted((corpus / "pages").rglob("*.html.gz"))


def _extract_pages(extractor: Any, paths: list[Path]) -> list[Any]:
    return [extractor(gzip.decompress(path.read_bytes())) for path in paths]


EXTRACTION_PROCESSES = 2
"""Worker processes that extract the corpus for :func:`corpus_page_extractions` (CI has two cores)."""


@pytest.fixture(scope="session")
def corpus_page_extractions(corpus_pages: list[Path]) -> Callable[[str], dict[Path, Any]]:
    """Every corpus page's :class:`~scrapy_simhash.extract.Extraction` by the named extractor (as
    ``get_extractor(name)`` makes it), made once a session for each name: the extractor contract checks
    them all, the shared-parse check compares a third of them with the two-parse extraction (each pass
    over the corpus is tens of seconds). The pages are shared among :data:`EXTRACTION_PROCESSES` forked
    processes, as ``dedupe --workers`` shares them (an extractor gives the same result in another
    process: the contract checks it). An exception of the extractor fails the test that asked."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from scrapy_simhash.extract import get_extractor

    made: dict[str, dict[Path, Any]] = {}
    fork = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None

    def extractions(name: str) -> dict[Path, Any]:
        if name not in made:
            extractor = get_extractor(name)
            shares = 4 * EXTRACTION_PROCESSES  # every n-th page: each share has pages of every source
            results: list[Any] = [None] * len(corpus_pages)
            with ProcessPoolExecutor(EXTRACTION_PROCESSES, mp_context=fork) as pool:
                parts = [
                    pool.submit(_extract_pages, extractor, corpus_pages[i::shares]) for i in range(shares)
                ]
                for i, part in enumerate(parts):
                    results[i::shares] = part.result()
            made[name] = dict(zip(corpus_pages, results, strict=True))
        return made[name]

    return extractions


@pytest.fixture(scope="session")
def spark_work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared Spark session's own directories: ``spark-local`` (its ``spark.local.dir``) and
    ``data`` (mounted as ``viewfs://corpus/work``)."""
    work = tmp_path_factory.mktemp("spark")
    (work / "spark-local").mkdir()
    (work / "data").mkdir()
    return work


@pytest.fixture(scope="session")
def spark(corpus: Path, spark_work: Path) -> Iterator[Any]:
    """One real local[2] SparkSession for every in-process Spark test (starting one costs seconds of
    JVM and Python-worker start-up each time), with the viewfs mount table the Hadoop-source tests read
    through: ``viewfs://corpus/warcs`` is the corpus, ``viewfs://corpus/work`` is ``spark_work/data``."""
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install -e '.[test]' installs it)")
    from spark_support import local_spark

    config = {
        "spark.local.dir": str(spark_work / "spark-local"),
        "spark.hadoop.fs.viewfs.mounttable.corpus.link./warcs": (corpus / "warcs").as_uri(),
        "spark.hadoop.fs.viewfs.mounttable.corpus.link./work": (spark_work / "data").as_uri(),
    }
    with local_spark("scrapy-simhash-tests", **config) as session:
        yield session


@pytest.fixture(scope="session")
def dedupe_report(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Callable[[list[str]], str]:
    """``dedupe --workers 1 --report`` of corpus archives (names under ``warcs/``), run once a session
    for each list of names: Spark tests that compare their report with dedupe's on the same inputs
    share this one (tens of seconds of extraction for the example crawl). Tests only read it."""
    from scrapy_simhash.cli import main

    made: dict[tuple[str, ...], str] = {}

    def report(names: list[str]) -> str:
        key = tuple(names)
        if key not in made:
            out = tmp_path_factory.mktemp("dedupe-report") / "local.jsonl"
            inputs = [str(corpus / "warcs" / name) for name in names]
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                status = main(["dedupe", *inputs, "--workers", "1", "--no-progress", "--report", str(out)])
            assert status == 0, f"dedupe of {names} exited {status}"
            made[key] = out.read_text(encoding="utf-8")
        return made[key]

    return report


EXAMPLE_CRAWL = "aut/warc/example.warc.gz"
"""aut's example crawl (822 records, 94 HTML pages, a few clusters of real near-duplicates): the real
crawl the report, browser and calibration tests read. Extracting its pages takes seconds each run."""


@pytest.fixture(scope="session")
def example_crawl_rows(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``dedupe --report ROWS --index INDEX`` of :data:`EXAMPLE_CRAWL` with the default extractor, run
    once a session for every test that only reads its report (``rows``) or its index (``index``);
    ``warc`` is the crawl itself. Two worker processes: the result does not depend on how many."""
    from scrapy_simhash.cli import main

    out = tmp_path_factory.mktemp("example-dedupe")
    warc = corpus / "warcs" / EXAMPLE_CRAWL
    rows, index = out / "rows.jsonl", out / "index"
    command = ["dedupe", "--workers", "2", "--no-progress", "--report", str(rows), "--index", str(index)]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main([*command, str(warc)])
    assert status == 0, f"dedupe of {warc} exited {status}"
    return {"warc": warc, "rows": rows, "index": index}


@pytest.fixture(scope="session")
def example_crawl_sidecar(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tag``'s sidecar of :data:`EXAMPLE_CRAWL` (default extractor, two worker processes), made once a
    session for every test that only reads it."""
    from scrapy_simhash.cli import main

    out = tmp_path_factory.mktemp("example-tag")
    warc = corpus / "warcs" / EXAMPLE_CRAWL
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        status = main(["tag", "--workers", "2", "--no-progress", "--out", str(out), str(warc)])
    assert status == 0, f"tag of {warc} exited {status}"
    return out / (warc.name + ".simhash.warc.gz")


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A redis-server on 127.0.0.1 for one test module (`tests/redis_server.py`), stopped after it."""
    from redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()
