"""The HTML report of a run's near-duplicates, and the threshold calibration pages.

Data flows one way: inputs (``dedupe --report`` rows, an index, WARCs) are loaded into one model
(:mod:`.data`, :mod:`.warcs`, :mod:`.model`), pairs of texts are re-extracted and diffed
(:mod:`.diffs`, :mod:`.textdiff`) and the page is rendered (:mod:`.charts`, :mod:`.html`). Nothing
outside this package imports it except the command line and the crawl's report extension.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model import ReportData

if TYPE_CHECKING:
    from ..extract import Extractor

DEFAULT_DIFFS = 20
"""Pairs of texts re-extracted and diffed (the largest clusters' original and farthest member)."""

DEFAULT_TIMELINE_DIFFS = 20
"""URLs whose consecutive captures' main texts are re-extracted and diffed (the most changed first)."""


@dataclass(frozen=True)
class Written:
    path: Path
    bytes: int
    seconds: float
    data: ReportData


def write_report(
    data: ReportData,
    output: str | os.PathLike[str],
    *,
    diffs: int = DEFAULT_DIFFS,
    backend: str = "auto",
    extractor: Extractor | None = None,
    timeline_diffs: int = DEFAULT_TIMELINE_DIFFS,
) -> Written:
    """Render ``data`` to ``output`` (written to a temporary name, then renamed into place).

    The pair texts, and the main texts of the ``timeline_diffs`` most changed URLs' captures, are
    re-extracted by ``extractor``; by default by the one ``data.extractor`` names (with that
    extractor's default options), else the default extractor."""
    from ..extract import extractor_for
    from .diffs import pair_diffs
    from .html import render, write_page
    from .timeline.diffs import diff_steps
    from .timeline.html import timeline_section

    start = time.monotonic()
    extractor = extractor or extractor_for(data.extractor)
    pairs = (
        pair_diffs(data.clusters, diffs, backend=backend, archives=data.archives, extractor=extractor)
        if diffs > 0
        else []
    )
    if data.timelines is not None:
        diff_steps(data.timelines.listed, count=max(0, timeline_diffs), backend=backend, extractor=extractor)
    text = render(data, pairs, timeline_section(data.timelines, diffed=max(0, timeline_diffs)))
    return Written(*write_page(text, output), time.monotonic() - start, data)


def report(inputs: list[str], output: str | os.PathLike[str], **options: Any) -> Written:
    """Load ``inputs`` (see :func:`.data.load`) and write the report; returns where and how big."""
    from .data import load

    diffs = options.pop("diffs", DEFAULT_DIFFS)
    timeline_diffs = options.pop("timeline_diffs", DEFAULT_TIMELINE_DIFFS)
    backend = options.get("backend", "auto")
    start = time.monotonic()
    data = load(inputs, **options)
    written = write_report(data, output, diffs=diffs, backend=backend, timeline_diffs=timeline_diffs)
    return Written(written.path, written.bytes, time.monotonic() - start, data)


__all__ = ["DEFAULT_DIFFS", "ReportData", "Written", "report", "write_report"]
