"""Shared fixtures: the read-only test corpus beside the project, and one Spark session for the whole run."""

from __future__ import annotations

import contextlib
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
