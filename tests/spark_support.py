"""The Spark tests' session: a real local[2] Spark with small shuffles and no UI."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def local_spark(app: str, **config: str) -> Iterator[Any]:
    """A local[2] SparkSession (workers on this test's Python) with ``config`` added; stopped after."""
    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = SparkSession.builder.master("local[2]").appName(app)
    defaults = {
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "2",
        "spark.ui.enabled": "false",
    }
    for name, value in {**defaults, **config}.items():
        builder = builder.config(name, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
