"""Word diffs of the main text between consecutive captures of a URL, re-extracted from the archives
by the extractor the fingerprints name, as the pair texts are (:mod:`.diffs`).

Only what a person needs is embedded: steps whose text is recorded as identical get none, the
report's overview diffs the most changed URLs only (and their latest steps), and each diff keeps a
few words of context around the changes (:func:`.textdiff.inline_diff`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..textdiff import MAX_CHANGED, inline_diff, ratio
from ..texts import Locator, Text, fetch_texts, locate_records
from .model import IDENTICAL_TEXT, Capture, Step, Timeline

if TYPE_CHECKING:
    from ...extract import Extractor

STEPS_DIFFED = 10
"""Steps diffed per URL in the overview (its latest); ``--timeline URL`` diffs all it lists."""


def _text_locator(capture: Capture, by_id: dict[str, Capture], found: dict[str, tuple[str, int]]) -> Locator:
    """Where ``capture``'s main text is: its own record, or a revisit's original."""
    if capture.record_type != "revisit":
        return (capture.file, capture.offset)
    if capture.text_file is not None and capture.text_offset is not None:
        return (capture.text_file, capture.text_offset)
    original = by_id.get(capture.text_id or "")
    if original is not None and original.record_type != "revisit":
        return (original.file, original.offset)
    return found.get(capture.text_id or "", (None, None))


def _label(capture: Capture) -> str:
    return f"the capture of {capture.date or 'unknown date'} ({capture.locator})"


def diff_steps(
    timelines: list[Timeline],
    *,
    count: int | None = None,
    steps_per_url: int | None = STEPS_DIFFED,
    backend: str = "auto",
    extractor: Extractor | None = None,
    max_changed: int = MAX_CHANGED,
) -> None:
    """Fill in the diffs of the steps of the first ``count`` timelines (all with None), each one's
    latest ``steps_per_url`` (all with None), each diff holding at most ``max_changed`` characters of
    changes; every other step says why it has none."""
    wanted: list[tuple[Step, Capture, Capture]] = []
    for position, timeline in enumerate(timelines):
        pending = []
        for i, step in enumerate(timeline.steps):
            if step is None:
                continue
            if step.kind in IDENTICAL_TEXT:
                step.diff_note = "main text identical (as recorded)"
            else:
                pending.append((step, timeline.captures[i - 1], timeline.captures[i]))
        if count is not None and position >= count:
            chosen = []
            note = f"only the {count} most changed URLs' are (--timeline-diffs N)"
        else:
            keep = len(pending) if steps_per_url is None else min(len(pending), steps_per_url)
            chosen = pending[len(pending) - keep :]
            note = f"only a URL's latest {steps_per_url} steps are"
        for step, _a, _b in pending[: len(pending) - len(chosen)]:
            step.diff_note = f"word diff not embedded: {note}; every diff of this URL: --timeline URL"
        wanted += chosen
    if not wanted:
        return
    captures = [c for _s, a, b in wanted for c in (a, b)]
    by_id = {c.record_id: c for t in timelines for c in t.captures if c.record_id}
    unknown = {
        c.text_id
        for c in captures
        if c.record_type == "revisit" and c.text_id and c.text_file is None and c.text_id not in by_id
    }
    files = sorted({c.file for t in timelines for c in t.captures if c.file})
    found = locate_records(unknown, files, backend=backend) if unknown else {}
    where = {id(c): _text_locator(c, by_id, found) for c in captures}
    texts = fetch_texts(list(set(where.values())), backend=backend, extractor=extractor)
    for step, a, b in wanted:
        ta, tb = texts[where[id(a)]], texts[where[id(b)]]
        if ta.text is None or tb.text is None:
            step.diff_note = "texts not shown: " + "; ".join(
                f"{_label(c)}: {_why(t, c)}" for t, c in ((ta, a), (tb, b)) if t.text is None
            )
            continue
        runs = inline_diff(ta.text, tb.text, max_changed=max_changed)
        if not runs:
            step.diff_note = "main text identical (compared here)"
            continue
        step.diff = runs
        step.ratio = ratio(ta.text, tb.text)


def _why(text: Text, capture: Capture) -> str:
    if capture.record_type == "revisit" and text.reason and "does not say" in text.reason:
        return "a revisit whose original record is not in the inputs"
    return text.reason or "no text"
