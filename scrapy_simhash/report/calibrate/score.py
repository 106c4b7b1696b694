"""``calibrate score``: precision, recall and F1 of each threshold setting against a person's judgements.

Each judged pair counts with its ``weight`` (the pairs of its distance band it stands for, written
by ``calibrate sample``), so the figures estimate the whole collection, not the stratified sample.
Skipped pairs do not count. A setting predicts "duplicate" for distance <= k, or similarity >= t.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...index.tables.layouts import MAX_K
from ..charts import line_chart
from ..html import asset, esc

JUDGEMENTS = ("duplicate", "not", "skip")
K_RANGE = range(0, 25)
"""The k scored: every distance judged is shown, even beyond what the tools take."""
K_ACCEPTED = range(0, MAX_K + 1)
"""The k a recommendation may name: an index (and so ``SIMHASH_DISTANCE``) answers exactly up to 8."""
OPTIONS = {
    "k": "SIMHASH_DISTANCE, --distance: simhash mode, and pages without a sketch",
    "similarity": "SIMHASH_SIMILARITY, --similarity: verified mode, the default",
}
"""Where each recommended value goes: the names the crawl and ``tag``/``dedupe`` accept."""
SIMILARITY_STEPS = [round(0.05 * i, 2) for i in range(1, 21)]


@dataclass(frozen=True)
class Judged:
    duplicate: bool
    distance: int | None
    similarity: float | None
    weight: float
    extractor: str | None = None
    """The extractor the pair's texts and similarity were made with (None: a page that did not say)."""


@dataclass(frozen=True)
class Score:
    setting: str
    """``k`` or ``similarity``."""
    value: float
    precision: float | None
    recall: float | None
    f1: float | None
    predicted: float
    """Weighted pairs predicted duplicate."""


def read_judgements(path: str | Path) -> tuple[list[Judged], list[str]]:
    """The judged pairs (skips left out); bad lines are named and passed over."""
    out: list[Judged] = []
    problems: list[str] = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                judgement = row["judgement"]
                if judgement not in JUDGEMENTS:
                    raise ValueError(f"judgement {judgement!r} is not one of {', '.join(JUDGEMENTS)}")
                if judgement == "skip":
                    continue
                distance = None if row.get("distance") is None else int(row["distance"])
                similarity = None if row.get("similarity") is None else float(row["similarity"])
                weight = float(row.get("weight") or 1.0)
                extractor = row.get("extractor")
                if extractor is not None and not isinstance(extractor, str):
                    raise ValueError(f"extractor {extractor!r} is not a text")
            except (ValueError, KeyError, TypeError) as exc:
                problems.append(f"{path} line {number}: {type(exc).__name__}: {exc}")
                continue
            out.append(Judged(judgement == "duplicate", distance, similarity, weight, extractor or None))
    return out, problems


def judged_extractors(judged: list[Judged]) -> list[str]:
    """What to say about the extractor of the judged texts: the settings recommended hold for the
    pages of that extractor only (the crawl's ``SIMHASH_EXTRACTOR``, ``--extractor``)."""
    named = sorted({j.extractor for j in judged if j.extractor})
    if not named:
        return ["texts judged: the judgements do not name their extractor (a page of an earlier version)"]
    if len(named) > 1:
        return [
            f"texts judged: made by {len(named)} extractors ({', '.join(named)}): the scores mix pages whose "
            "fingerprints are not comparable; judge one extractor's sample at a time"
        ]
    return [f"texts judged: extracted by {named[0]} (the recommendations hold for this extractor)"]


def _score(setting: str, value: float, rows: list[tuple[bool, bool, float]]) -> Score:
    tp = sum(w for truth, said, w in rows if truth and said)
    fp = sum(w for truth, said, w in rows if not truth and said)
    fn = sum(w for truth, said, w in rows if truth and not said)
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    return Score(setting, value, precision, recall, f1, tp + fp)


def scores(judged: list[Judged]) -> list[Score]:
    """One score per k (pairs with a distance) and per similarity threshold (pairs with a similarity)."""
    out = []
    by_distance = [(j.duplicate, j.distance, j.weight) for j in judged if j.distance is not None]
    if by_distance:
        top = min(max(max(d for _, d, _ in by_distance), 8), K_RANGE.stop - 1)
        for k in range(top + 1):
            out.append(_score("k", k, [(truth, d <= k, w) for truth, d, w in by_distance]))
    by_similarity = [(j.duplicate, j.similarity, j.weight) for j in judged if j.similarity is not None]
    for t in SIMILARITY_STEPS if by_similarity else []:
        out.append(_score("similarity", t, [(truth, s >= t, w) for truth, s, w in by_similarity]))
    return out


def best(found: list[Score], setting: str, *, accepted_only: bool = True) -> Score | None:
    """Highest F1; ties go to the higher precision, then to the strictest setting (smallest k,
    highest similarity): a false duplicate loses a page, a missed one only costs storage.

    ``accepted_only``: among the k the tools take (:data:`K_ACCEPTED`); a similarity in 0.05..1
    always is."""
    candidates = [s for s in found if s.setting == setting and s.f1 is not None]
    if accepted_only and setting == "k":
        candidates = [s for s in candidates if int(s.value) in K_ACCEPTED]
    strict = -1.0 if setting == "k" else 1.0
    return max(candidates, key=lambda s: (s.f1, s.precision or 0.0, strict * s.value), default=None)


def recommendations(found: list[Score]) -> list[str]:
    """One line per setting: the value, where it goes, its figures, and a better k the tools refuse."""
    lines = []
    for setting in ("k", "similarity"):
        chosen = best(found, setting)
        if chosen is None:
            continue
        precision, recall, f1 = (100 * (x or 0) for x in (chosen.precision, chosen.recall, chosen.f1))
        line = (
            f"recommended {setting}: {chosen.value:g} ({OPTIONS[setting]}): precision {precision:.1f}%, "
            f"recall {recall:.1f}%, F1 {f1:.1f}%"
        )
        beyond = best(found, setting, accepted_only=False)
        if beyond is not None and beyond is not chosen and (beyond.f1 or 0) > (chosen.f1 or 0):
            line += (
                f"; k = {beyond.value:g} scores F1 {100 * (beyond.f1 or 0):.1f}%, but the tools take k up "
                f"to {K_ACCEPTED.stop - 1} (an index answers exactly only that far)"
            )
        lines.append(line)
    return lines


def table(found: list[Score]) -> str:
    """The plain-text table ``calibrate score`` prints."""

    def pct(x: float | None) -> str:
        return "     -" if x is None else f"{100 * x:5.1f}%"

    lines = ["setting             precision  recall      F1"]
    for s in found:
        name = f"k <= {int(s.value)}" if s.setting == "k" else f"similarity >= {s.value:.2f}"
        lines.append(f"{name:<20}{pct(s.precision):>9} {pct(s.recall):>7} {pct(s.f1):>7}")
    return "\n".join(lines)


def render_curve(found: list[Score], judged: int, duplicates: int) -> str:
    """An HTML page with the precision/recall/F1 curves (SVG), the recommendation marked."""
    charts = []
    for setting, label in (("k", "k (max Hamming distance)"), ("similarity", "similarity threshold")):
        part = [s for s in found if s.setting == setting]
        if not part:
            continue
        series = {
            name: [(s.value, getattr(s, name)) for s in part if getattr(s, name) is not None]
            for name in ("precision", "recall", "f1")
        }
        chosen = best(found, setting)
        charts.append(
            line_chart(
                series,
                title=f"precision, recall and F1 by {label}",
                x_label=label,
                marker=None if chosen is None else chosen.value,
                marker_label=f"best {chosen.value:g}" if chosen else "",
                chart_id=f"curve-{setting}",
            )
        )
    items = "".join(f"<li>{esc(line.removeprefix('recommended '))}</li>" for line in recommendations(found))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>scrapy-simhash: calibration</title>
<style>{asset("page.css")}</style></head><body>
<h1>Threshold calibration</h1>
<p>{judged} pairs judged ({duplicates} duplicates), each weighted by the pairs of its band it stands for.</p>
<h2>Recommended</h2><ul id="recommended">{items or "<li>no setting found a duplicate</li>"}</ul>
<div id="charts">{"".join(charts)}</div>
<h2>Every setting</h2><pre>{esc(table(found))}</pre>
</body></html>
"""
