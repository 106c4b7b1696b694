"""The judging page of ``calibrate sample``: one pair at a time, keys d / n / s and the arrows, the
judgements kept in localStorage and exported as JSON lines from a Blob link (no server, no request)."""

from __future__ import annotations

import hashlib
from typing import Any

from ..html import asset, esc, script_json, sources_text
from ..model import Page
from .sample import JudgePair


def _page(p: Page) -> dict[str, Any]:
    return {"uri": p.uri or p.key, "date": p.date, "locator": p.locator}


def page_id(pairs: list[JudgePair]) -> str:
    """Names the page's judgements in localStorage: another sample (other pairs) does not mix with them."""
    return hashlib.sha1(repr([(p.a.locator, p.b.locator) for p in pairs]).encode()).hexdigest()[:16]


def _notes(notes: list[str]) -> str:
    """The input's notes (reader warnings, short bands) folded in one line after the pair: the
    judge sees the pair first, and the notes are one click away."""
    if not notes:
        return ""
    items = "".join(f'<li class="note">{esc(n)}</li>' for n in notes)
    label = (
        f"{len(notes)} note{'s' if len(notes) != 1 else ''} on the input (records passed over, bands short)"
    )
    return f'<details id="notes"><summary>{esc(label)}</summary><ul>{items}</ul></details>'


def render_judge(
    pairs: list[JudgePair], *, sources: list[str], seed: int, notes: list[str], extractor: str | None = None
) -> str:
    """The judging page; ``extractor``: the description of the extractor the texts and similarities
    were made with (the default extractor's when None), shown and exported with every judgement."""
    if extractor is None:
        from ...extract import DEFAULT_EXTRACTOR

        extractor = DEFAULT_EXTRACTOR.description
    payload = {
        "id": page_id(pairs),
        "extractor": extractor,
        "pairs": [
            {
                "number": p.number,
                "a": _page(p.a),
                "b": _page(p.b),
                "distance": p.distance,
                "band": p.band,
                "weight": p.weight,
                "similarity": p.similarity,
                "left": p.left,
                "right": p.right,
                "reason": p.reason,
            }
            for p in pairs
        ],
    }
    folded = _notes(notes)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scrapy-simhash: judge near-duplicate pairs</title><style>{asset("page.css")}</style></head><body>
<h1>Are these two pages near-duplicates?</h1>
<p class="muted">{len(pairs)} pairs from {sources_text(sources)} (seed {seed}), in random order; texts by the
extractor <span id="extractor">{esc(extractor)}</span>. Judge what
<i>you</i> would want removed as the same content. Keys: <span class="kbd">d</span> duplicate,
<span class="kbd">n</span> not, <span class="kbd">s</span> skip, <span class="kbd">&larr;</span>
<span class="kbd">&rarr;</span> move. Judgements stay in this browser (localStorage); download them, then run
<code>scrapy-simhash calibrate score judgements.jsonl</code>.</p>
<div class="bar-top"><button id="b-prev">&larr;</button><b id="position"></b>
<button id="b-next">&rarr;</button> <button id="b-dup">duplicate (d)</button>
<button id="b-not">not (n)</button><button id="b-skip">skip (s)</button>
<span id="verdict"></span> &middot; <span id="judged-count" data-value="0">0</span> judged &middot;
<a id="export" download="judgements.jsonl" href="#">download judgements.jsonl</a>
<button id="b-clear">forget all</button>
<details><summary>numbers (hidden so as not to sway you)</summary><span id="numbers"></span></details></div>
<div class="heads" id="heads"></div><div id="texts"></div>
{folded}
<script type="application/json" id="judge-data">{script_json(payload)}</script>
<script>{asset("judge.js")}</script>
</body></html>
"""
