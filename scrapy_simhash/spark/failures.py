"""One line for a failed Spark job: what failed, and what to do.

A job that fails (an executor's Python without scrapy-simhash, a lost executor, no Java) reaches the
driver as a Py4J or PySpark exception whose text is a Java stack trace wrapped around a Python one;
the line a user needs is the Python exception at its end, or the first line of the Java one. Spark's
own log (on stderr) keeps the whole of it.
"""

from __future__ import annotations

import re

_TRACEBACK = "Traceback (most recent call last):"
_MAX_CHARS = 300
_NO_MODULE = re.compile(r"No module named '([^']+)'")


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exception types a failed Spark job or session raises on the driver (none without pyspark)."""
    try:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
        from pyspark.errors import PySparkException
    except ImportError:
        return ()
    return (Py4JError, PySparkException)


def failure_line(exc: BaseException, python: str | None = None) -> str:
    """What failed, on one line, with what to do when it is known (``python``: the executors' Python)."""
    cause = _cause(exc)
    line = f"Spark failed: {cause}"
    missing = _NO_MODULE.search(cause)
    if "JAVA_GATEWAY_EXITED" in cause:
        line += "; is Java installed (java on PATH, or JAVA_HOME)? See docs/spark.md, Install"
    elif missing:
        where = f" ({python})" if python else ""
        line += (
            f"; the executors' Python{where} does not have {missing.group(1)}: install scrapy-simhash "
            "there, or set PYSPARK_PYTHON to a Python that has it (see docs/spark.md)"
        )
    return line + "; Spark's log has the details"


def _cause(exc: BaseException) -> str:
    """The Python exception at the end of the last traceback in ``exc``'s text, else its first line."""
    text = str(exc)
    if _TRACEBACK in text:
        after = text.rsplit(_TRACEBACK, 1)[1].splitlines()
        for line in after:
            if line.strip() and not line[:1].isspace():
                return _short(line)
    for line in text.splitlines():
        if line.strip() and not line.startswith("An error occurred while calling"):
            return _short(line.lstrip(": "))
    return type(exc).__name__


def _short(line: str) -> str:
    line = " ".join(line.split())
    return line if len(line) <= _MAX_CHARS else line[: _MAX_CHARS - 3] + "..."
