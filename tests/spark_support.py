"""The Spark tests' session: a real local[2] Spark with small shuffles and no UI, made as
:func:`scrapy_simhash.spark.session.spark_session` makes it (executors on this test's Python).

In-process tests take the session-scoped ``spark`` fixture (tests/conftest.py), which is made here."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SMALL = "ukwa-webarchive-test-suite/small-arcs-and-warcs/IAH-20080430204825-00000-blackbook-truncated"
SMALL_DEDUPE_INPUTS = [f"{SMALL}.warc.gz", f"{SMALL}.arc.gz", "resiliparse/warcfile.warc.gz"]
"""Corpus archives (under ``warcs/``) for the tests of how ``spark dedupe`` is run (spark-submit on a
cluster, the console script on a local master, Hadoop URIs): the example crawl's first records as a
WARC and as an ARC (one page twice, a cluster of two) and a third WARC, three tasks. Their report must
be ``dedupe``'s, made once for all three by the conftest's ``dedupe_report``. The whole example crawl
(tens of seconds of extraction per run) would add nothing there: its rows from Spark are compared with
the pipeline's in test_spark.py, and the rows read through Hadoop with the streamed ones in
test_spark_sources.py."""

FAST_EXTRACTOR = "resiliparse"
"""The extractor of the Spark tests whose subject is not the extractor (the reading, the rows, the
join, the CLI's plumbing): about a quarter of trafilatura's time a page, on both sides of each
comparison. The default extractor (trafilatura) stays end to end in ``spark dedupe``'s report test
(test_spark.py), the CLI's local-master test, the spark-submit recipe and the Hadoop-URI CLI tests."""

QUICK_SPARK = {
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    # the JVM's quick compiler only: the tests' jobs are short, and the optimising compiler costs more
    # CPU than it wins back (two small fingerprint-and-join jobs: 26 s of CPU in all instead of 42 s)
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1",
}
"""Settings of every test's local Spark: small shuffles, no UI, a quick JVM."""


@contextmanager
def local_spark(app: str, **config: str) -> Iterator[Any]:
    """A local[2] SparkSession with ``config`` added; stopped after.

    Refuses when a session is already running in this process: ``getOrCreate`` would hand that one
    back without ``config``, and stopping it after would break the tests that share it."""
    from pyspark import SparkContext

    from scrapy_simhash.spark.session import spark_session

    if SparkContext._active_spark_context is not None:
        raise RuntimeError(
            "a Spark session is already running in this test process: take the session-scoped `spark` "
            "fixture (tests/conftest.py) instead of starting another"
        )

    session = spark_session(app, "local[2]", {**QUICK_SPARK, **config})
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
