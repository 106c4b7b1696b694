"""Reading archives: WARC, ARC and WACZ files in any state, record framing, gzip members, payloads.

:class:`~.reader.ArchiveReader` yields :class:`~.results.ArchiveRecord` and
:class:`~.results.ReadProblem`; :mod:`.payload` turns a record's block into the HTML page it carries;
:mod:`.inputs` plans which files a command reads.
"""

from __future__ import annotations

from .reader import ArchiveReader, fastwarc_available
from .results import ArchiveRecord, ReadProblem

__all__ = ["ArchiveReader", "ArchiveRecord", "ReadProblem", "fastwarc_available"]
