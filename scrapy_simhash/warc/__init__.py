"""WARC layer: crawls written as WARC/1.1 with simhash metadata records; archives tagged and deduplicated.

Depends on the core (fingerprints, extraction, index); nothing in the core depends on it.
"""

from __future__ import annotations

from .read.reader import ArchiveReader, ArchiveRecord, ReadProblem

__all__ = ["ArchiveReader", "ArchiveRecord", "ReadProblem"]
