"""A SparkSession whose local executors run this very Python.

Spark starts the executors' Python workers with ``PYSPARK_PYTHON``, else with ``python3`` from PATH.
Run from a virtual environment, that ``python3`` is usually another interpreter, one without
scrapy-simhash, and every task fails on ``No module named 'scrapy_simhash'``. On a local master the
executors are on this machine, so the driver's own interpreter is the right one; on a cluster it is
the user's to choose (``PYSPARK_PYTHON`` or ``spark.pyspark.python``, see docs/spark.md).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from typing import Any

_LOCAL = re.compile(r"local(\[[^\]]*\]|-cluster\[[^\]]*\])?")
"""``local``, ``local[N]``, ``local[*]``, ``local[N,F]``, ``local-cluster[...]``: executors here."""


def is_local_master(master: str) -> bool:
    """Whether ``master`` runs the executors on this machine."""
    return _LOCAL.fullmatch(master.strip()) is not None


def spark_session(app_name: str, master: str | None = None, config: Mapping[str, str] | None = None) -> Any:
    """The SparkSession (a running one, else a new one with ``config``) on ``master`` (default:
    spark-submit's, else local[*]); on a local master its executors run ``sys.executable`` unless
    ``PYSPARK_PYTHON`` or ``spark.pyspark.python`` names another Python."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ValueError("pyspark is not installed: pip install 'scrapy-simhash[spark]'") from None
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    for name, value in (config or {}).items():
        builder = builder.config(name, value)
    session = builder.getOrCreate()
    context = session.sparkContext
    python = executor_python(context.master or "", os.environ, context.getConf().get("spark.pyspark.python"))
    if python is not None:
        context.pythonExec = python  # what each job's Python functions are started with
    return session


def executor_python(master: str, environ: Any, configured: str | None) -> str | None:
    """The interpreter the executors should run, or None to leave Spark's choice: this Python on a local
    master that the user did not point elsewhere (``PYSPARK_PYTHON`` in ``environ``, or ``configured``,
    the ``spark.pyspark.python`` setting)."""
    if not is_local_master(master) or environ.get("PYSPARK_PYTHON") or configured:
        return None
    return sys.executable
