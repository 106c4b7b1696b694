"""Archives on any Hadoop filesystem (``hdfs:``, ``s3a:``, ``gs:``, ``abfs:``, ...) for the Spark reader.

An executor's Python worker cannot open an ``hdfs:`` or ``s3a:`` URI itself, and a new Python
client per store would be one more dependency to configure. Spark's own Hadoop filesystem already
knows every scheme the cluster is configured for, so: the driver lists the inputs through the JVM's
``org.apache.hadoop.fs.FileSystem`` (directories expanded in ``tag``'s order, archives recognised by
name as ``tag`` does), Spark's ``binaryFile`` source brings each file's bytes to an executor, and
the executor spools them to a temporary local file and reads it with the same ``ArchiveReader``.

The cost: a whole file per task in executor memory (the JVM row, then the Python bytes), so files
over :data:`SPARK_BINARY_LIMIT` (Spark's 2 GiB binary value) or the caller's cap are not read but
reported as problem rows. A file missing when listed, or gone when its task runs, is a problem row.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from ..warc.read.inputs import NO_ARCHIVES, SIDECAR_INPUT, is_archive_name, is_sidecar_name
from ..warc.read.wacz import is_wacz_name

SPARK_BINARY_LIMIT = (1 << 31) - 1 - (1 << 20)
"""Spark holds a file's bytes in one binary value (at most 2**31 - 1 bytes) inside a row: 1 MiB
is left for the row around it."""

GLOB_CHARS = "*?[]{}"

MISSING = "no such file or directory (listed through Spark's Hadoop filesystem)"
HIDDEN = (
    "name starts with '_' or '.': Spark's file reader skips such files; rename it, or copy it to a shared "
    "filesystem and pass a local path or file: URI"
)
WACZ_VIA_HADOOP = (
    "a WACZ package: its WARCs are read in place from local paths and file: URIs only; copy it to a "
    "shared filesystem and pass a local path or file: URI"
)
NOT_READ_BY_SPARK = (
    "not read: the file was gone when its Spark task ran (or Spark's file reader passed it over)"
)


def is_remote(path: str | os.PathLike[str]) -> bool:
    """A URI with a scheme other than ``file:`` (``C:\\x`` is a Windows path, not a scheme)."""
    scheme = urlparse(os.fspath(path)).scheme
    return len(scheme) > 1 and scheme != "file"


def over_cap(size: int, cap: int) -> str:
    return (
        f"{size} bytes: over the {cap} byte limit of a file read through Spark's Hadoop filesystem "
        f"(a whole file per task in executor memory); copy it to a shared filesystem and pass a local "
        f"path or file: URI"
    )


@dataclass(frozen=True)
class Source:
    """One input as the driver listed it: its Hadoop URI, size, and why it is not read (if so)."""

    position: int
    uri: str
    size: int | None = None
    not_read: str | None = None
    rel: str = ""
    """The path under the directory argument it was found in (its name when given itself): where
    ``spark tag`` puts its sidecar under ``--out``, as ``tag`` does."""


def list_sources(spark: Any, path: str, first: int, cap: int) -> list[Source]:
    """The archives of one input argument (a file, directory or glob URI), numbered from ``first``.

    A directory is expanded recursively, sorted as :func:`~scrapy_simhash.warc.read.inputs.plan_inputs`
    sorts (by path components), keeping names with ``.warc``/``.arc``; a scheme the cluster's Hadoop
    configuration does not know is a ValueError (a usage error, before any work).
    """
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    hpath = jvm.org.apache.hadoop.fs.Path(path)
    try:
        fs = hpath.getFileSystem(conf)
    except Exception as exc:
        raise ValueError(f"{path}: no Hadoop filesystem for it: {_java_message(exc)}") from None
    statuses = _statuses(fs, hpath)
    if statuses is None:
        return [Source(first, path, not_read=MISSING, rel=_name(path))]
    sources: list[Source] = []
    for status in statuses:
        if status.isDirectory():
            found = _archives_under(fs, status.getPath())
            if not found:
                directory = status.getPath().toString()
                sources.append(Source(first + len(sources), directory, not_read=NO_ARCHIVES))
            for uri, size, rel in found:
                sources.append(_file(first + len(sources), uri, size, cap, rel))
        else:
            uri, size = status.getPath().toString(), int(status.getLen())
            if is_sidecar_name(_name(uri)):
                sources.append(Source(first + len(sources), uri, size, SIDECAR_INPUT, _name(uri)))
            else:
                sources.append(_file(first + len(sources), uri, size, cap, _name(uri)))
    return sources


def _statuses(fs: Any, hpath: Any) -> list[Any] | None:
    """The path's status; for a glob pattern that names no file, its matches (sorted); None: nothing."""
    try:
        return [fs.getFileStatus(hpath)]
    except Exception as exc:
        if "FileNotFoundException" not in type(exc).__name__ + str(exc):
            raise ValueError(f"{hpath.toString()}: cannot list it: {_java_message(exc)}") from None
    if not any(c in hpath.toString() for c in GLOB_CHARS):
        return None
    matches = fs.globStatus(hpath)
    if not matches:
        return None
    return sorted(matches, key=lambda s: s.getPath().toString().split("/"))


def _archives_under(fs: Any, directory: Any) -> list[tuple[str, int, str]]:
    root = directory.toString().rstrip("/") + "/"
    found = []
    files = fs.listFiles(directory, True)
    while files.hasNext():
        status = files.next()
        uri = status.getPath().toString()
        if is_archive_name(_name(uri)) or is_wacz_name(_name(uri)):
            found.append((uri, int(status.getLen()), uri.removeprefix(root)))
    return sorted(found, key=lambda item: item[2].split("/"))


def _file(position: int, uri: str, size: int, cap: int, rel: str) -> Source:
    if is_wacz_name(_name(uri)):
        return Source(position, uri, size, WACZ_VIA_HADOOP, rel)
    if size > cap:
        return Source(position, uri, size, over_cap(size, cap), rel)
    if _name(uri).startswith(("_", ".")):
        return Source(position, uri, size, HIDDEN, rel)
    return Source(position, uri, size, None, rel)


def _name(uri: str) -> str:
    return uri.rstrip("/").rsplit("/", 1)[-1]


def _java_message(exc: Exception) -> str:
    """The Java exception's first line (py4j wraps it in a long trace)."""
    text = str(getattr(exc, "java_exception", exc))
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def escape_glob(uri: str) -> str:
    """``uri`` as a literal path for Spark's file sources, which read every path as a glob pattern."""
    return "".join("\\" + c if c in GLOB_CHARS or c == "\\" else c for c in uri)


def binary_files(spark: Any, uris: list[str]) -> Any:
    """Spark's ``binaryFile`` DataFrame (``path``, ``content``, ...) of ``uris``; files gone by the time a
    task runs give no row (``ignoreMissingFiles``), so callers find them by what is missing."""
    reader = spark.read.format("binaryFile").option("ignoreMissingFiles", "true")
    return reader.load([escape_glob(uri) for uri in uris])


def spool_dir() -> str | None:
    """The executor's local directory (Spark tells its Python workers in ``SPARK_LOCAL_DIRS``)."""
    dirs = [d for d in os.environ.get("SPARK_LOCAL_DIRS", "").split(",") if d and os.path.isdir(d)]
    return dirs[0] if dirs else None


@contextmanager
def spooled(uri: str, content: bytes) -> Iterator[str]:
    """A local file holding ``content``, named as ``uri`` ends (the reader looks at names), deleted
    when the ``with`` block ends (also on errors)."""
    with tempfile.TemporaryDirectory(prefix="scrapy-simhash-", dir=spool_dir()) as directory:
        local = Path(directory) / (_name(uri) or "input")
        local.write_bytes(content)
        yield str(local)
