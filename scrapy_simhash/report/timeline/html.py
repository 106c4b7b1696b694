"""The timeline view in HTML: the report's "Timelines" section, and the page of one URL's history
(``report --timeline URL``). The timelines travel as inline JSON; ``timeline.js`` lists, filters,
sorts and opens them in the browser."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from ... import __version__
from ..html import asset, esc, script_json, sources_text
from .model import KINDS, Capture, Step, Timeline, Timelines


def _capture(capture: Capture, files: dict[str, int]) -> list[Any]:
    """[date, file number, offset, record type, recorded kind, previous capture's date, record id];
    the files are listed once (``files``), their long paths would be most of the page."""
    if capture.file is not None and capture.offset is not None:
        where: list[Any] = [files.setdefault(capture.file, len(files)), capture.offset]
    else:
        where = [None, None]
    return [capture.date, *where, capture.record_type, capture.kind, capture.previous_date, capture.record_id]


def _step(step: Step | None) -> dict[str, Any] | None:
    if step is None:
        return None
    sim = None if step.similarity is None else round(step.similarity, 4)
    ratio = None if step.ratio is None else round(step.ratio, 4)
    return {
        "kind": step.kind,
        "sim": sim,
        "note": step.note,
        "diff": step.diff,
        "why": step.diff_note,
        "ratio": ratio,
    }


def timeline_json(timeline: Timeline, files: dict[str, int]) -> dict[str, Any]:
    return {
        "uri": timeline.uri,
        "earlier": timeline.earlier,
        "counts": {kind: timeline.counts[kind] for kind in KINDS if timeline.counts[kind]},
        "changes": timeline.changes,
        "captures": [_capture(c, files) for c in timeline.captures],
        "steps": [_step(s) for s in timeline.steps],
    }


def _payload(timelines: list[Timeline]) -> dict[str, Any]:
    files: dict[str, int] = {}
    listed = [timeline_json(t, files) for t in timelines]
    return {"files": list(files), "timelines": listed}


def _counts(timelines: Timelines) -> str:
    return ", ".join(
        f'<span class="k-{kind.replace(" ", "-")}">{timelines.counts[kind]:,} {esc(kind)}</span>'
        for kind in KINDS
    )


def _controls(open_all: bool) -> str:
    options = "".join(f'<option value="{esc(kind)}">{esc(kind)}</option>' for kind in KINDS)
    return (
        '<p class="controls"><label>show URLs with a step that is <select id="timeline-kind">'
        f'<option value="">any kind</option>{options}</select></label> <label>sorted by '
        '<select id="timeline-sort"><option value="changed">most changed first</option>'
        '<option value="captures">most captures first</option><option value="uri">URL</option>'
        '</select></label> <button id="timeline-prev">&larr;</button><span id="timeline-page"></span>'
        '<button id="timeline-next">&rarr;</button></p>'
        f'<div id="timelines" data-open="{int(open_all)}"></div>'
    )


def timeline_section(timelines: Timelines | None, *, diffed: int) -> str:
    """The report's section: a summary, the notes, the controls and the data (``diffed``: URLs whose
    word diffs are embedded)."""
    if timelines is None:
        return (
            '<h2 id="timeline">Timelines</h2><p class="note" id="timeline-summary" data-urls="">the input '
            "holds no captures over time (an index keeps one entry per page): give the WARCs or their "
            "sidecars</p>"
        )
    notes = "".join(f'<li class="note">{esc(n)}</li>' for n in timelines.notes)
    listed = len(timelines.listed)
    more = (
        f" The {listed:,} most changed are listed; the other {timelines.urls - listed:,} are counted above."
        if timelines.urls > listed
        else ""
    )
    diffs = min(diffed, listed)
    payload = _payload(timelines.listed)
    return f"""<h2 id="timeline">Timelines</h2>
<p id="timeline-summary" data-urls="{timelines.urls}">{timelines.urls:,} URLs captured more than once;
how the main text changed between consecutive captures: {_counts(timelines)}.{more} Word diffs are
embedded for the {diffs:,} most changed (their latest steps; <code>--timeline-diffs N</code> for more,
<code>--timeline URL</code> for one URL's whole history); unchanged and same-text steps need none.</p>
{f"<ul>{notes}</ul>" if notes else ""}{_controls(False)}
<script type="application/json" id="timeline-data">{script_json(payload)}</script>
<script>{asset("timeline.js")}</script>"""


def timeline_page(timeline: Timeline, *, sources: list[str], extractor: str | None, notes: list[str]) -> str:
    """The whole page of one URL's history."""
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    listed = "" if not timeline.earlier else f" ({timeline.earlier:,} earlier ones not listed)"
    alone = (
        '<p class="note" id="timeline-alone">one capture of this URL in the inputs: nothing to compare</p>'
        if len(timeline.captures) + timeline.earlier < 2
        else ""
    )
    items = "".join(f'<li class="note">{esc(n)}</li>' for n in notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scrapy-simhash timeline: {esc(timeline.uri)}</title><style>{asset("page.css")}</style></head><body>
<h1>Capture timeline: <span id="timeline-uri">{esc(timeline.uri)}</span></h1>
<p class="muted">{sources_text(sources)}<br>written {when} by scrapy-simhash {esc(__version__)};
extractor: <span id="extractor">{esc(extractor or "not recorded by the input")}</span></p>
<p id="timeline-summary" data-urls="1">{len(timeline.captures) + timeline.earlier:,} captures{listed};
the main text re-extracted and compared between consecutive ones.</p>{alone}
{f"<ul>{items}</ul>" if items else ""}{_controls(True)}
<script type="application/json" id="timeline-data">{script_json(_payload([timeline]))}</script>
<script>{asset("timeline.js")}</script>
</body></html>
"""
