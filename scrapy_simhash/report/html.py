"""Render a :class:`~.model.ReportData` as one self-contained HTML file (inline CSS, SVG and script).

The page makes no network request: no CDN, no font, no image; big lists travel as inline JSON and
are paged by the script, so a 1M-page report stays a few megabytes.
"""

from __future__ import annotations

import html
import json
import os
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any

from .. import __version__
from ..shown import shown_location
from .charts import bar_chart, distance_bars, similarity_bars
from .diffs import PairDiff
from .model import Cluster, Page, ReportData

TOP_CLUSTERS = 200
MEMBERS_SHOWN = 50
HOSTS_SHOWN = 100


def asset(name: str) -> str:
    """A CSS or script file shipped beside this module (package data), inlined into the pages."""
    return (resources.files(__package__) / name).read_text(encoding="utf-8")


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def script_json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


def _member(page: Page) -> list[Any]:
    sim = None if page.similarity is None else round(page.similarity, 3)
    return [page.uri, page.date, page.locator, page.distance, sim, page.original]


def _clusters_json(clusters: list[Cluster], diffs: list[PairDiff]) -> list[dict[str, Any]]:
    diff_of = {d.cluster: i for i, d in enumerate(diffs)}
    return [
        {
            "rank": i,
            "size": c.size,
            "members": [_member(m) for m in c.members[:MEMBERS_SHOWN]],
            "diff": diff_of.get(i),
        }
        for i, c in enumerate(clusters[:TOP_CLUSTERS])
    ]


def _diffs_json(diffs: list[PairDiff]) -> list[dict[str, Any]]:
    return [
        {
            "a": d.a.uri or d.a.key,
            "b": d.b.uri or d.b.key,
            "left": d.left,
            "right": d.right,
            "reason": d.reason,
            "ratio": d.word_ratio,
        }
        for d in diffs
    ]


def _totals(data: ReportData) -> str:
    t = data.totals

    def cell(ident: str, label: str, value: int | None) -> str:
        if value is None:
            return (
                f'<div title="not in the input"><b id="total-{ident}" data-value="">&ndash;</b>{label} '
                '<span class="muted">(not in the input)</span></div>'
            )
        return f'<div><b id="total-{ident}" data-value="{value}">{value:,}</b>{label}</div>'

    cells = [
        cell("pages", "pages seen", t.pages),
        cell("fingerprinted", "fingerprinted", t.fingerprinted),
        cell("skipped", "skipped", None if t.skipped is None else sum(t.skipped.values())),
        cell("unique", "unique", t.unique),
        cell("near-duplicates", "near-duplicates", t.near_duplicates),
        cell("clusters", "clusters", t.clusters),
        cell("in-clusters", "pages in clusters", t.in_clusters),
    ]
    if t.revisits is not None:
        cells.append(cell("revisits", "exact duplicates by revisit", t.revisits))
        unresolved = t.revisits_not_in_input
        cells.append(cell("revisits-not-in-input", "revisits, original not in input", unresolved))
    out = f'<div class="totals">{"".join(cells)}</div>'
    if t.skipped:
        rows = "".join(
            f'<tr><td>{esc(r)}</td><td class="num">{n:,}</td></tr>' for r, n in sorted(t.skipped.items())
        )
        out += f"<h3>Skipped, by reason</h3><table><tr><th>reason</th><th>pages</th></tr>{rows}</table>"
    return out


def _charts(data: ReportData) -> str:
    k = data.k
    marker = None if k is None else k + 1.0
    verified = data.mode == "verified"
    label = f"k = {k} (pages without a sketch)" if verified else f"k = {k}"
    charts = []
    if data.pair_distances.size or k is not None:
        charts.append(
            bar_chart(
                distance_bars(data.pair_distances, k),
                title="distance of each near-duplicate to its original",
                x_label="Hamming distance (bits)",
                marker=marker,
                marker_label=label,
                chart_id="hist-pairs",
            )
        )
    if data.nearest_distances.size or data.no_neighbour:
        charts.append(
            bar_chart(
                distance_bars(data.nearest_distances, k, data.no_neighbour, "none" if verified else None),
                title="distance of each page to its nearest other page",
                x_label="Hamming distance (bits)",
                marker=marker,
                marker_label=label,
                chart_id="hist-nearest",
            )
        )
    if data.pair_similarities.size:
        t = data.threshold
        charts.append(
            bar_chart(
                similarity_bars(data.pair_similarities),
                title="estimated Jaccard similarity of each near-duplicate to its original",
                x_label="similarity",
                marker=None if t is None else t * 20,
                marker_label=f"similarity {t:g}",
                chart_id="hist-similarity",
            )
        )
    if not charts:
        return '<p class="note">no fingerprints or similarities in the input: no histogram</p>'
    return "".join(charts)


def rule_text(data: ReportData) -> str:
    """The rule that made the clusters, as the histograms draw it."""
    k, t = data.k, data.threshold
    if data.mode == "verified" and t is not None:
        return f"rule: verified, similarity >= {t:g}; pages without a sketch: distance <= {k}"
    if data.mode == "simhash":
        return f"rule: simhash, distance <= {k}" + ("" if t is None else f"; similarity {t:g} drawn")
    if data.mode == "minhash" and t is not None:
        return f"rule: MinHash, similarity >= {t:g}" + ("" if k is None else f"; distance {k} drawn")
    drawn = ([] if k is None else [f"distance k = {k}"]) + ([] if t is None else [f"similarity {t:g}"])
    return f"rule not in the input; drawn: {', '.join(drawn)}" if drawn else "no threshold known"


def keep_text(data: ReportData) -> str:
    """Which policy chose the originals, when the input says (a dedupe report's ``keep`` column)."""
    return "" if data.keep is None else f" (chosen by the keep policy: {data.keep})"


def sources_text(sources: list[str]) -> str:
    """The inputs, as a person may see them (an index URI's password masked)."""
    return esc(", ".join(map(shown_location, sources)))


def _extractor(data: ReportData) -> str:
    """The extractor that made the fingerprints: the input's, those it mixes, or that it does not say."""
    others = [e for e in data.extractors if e != data.extractor]
    if data.extractor:
        text = data.extractor + (f" (mixed with {', '.join(others)})" if others else "")
    elif others:
        text = f"several: {', '.join(others)}"
    else:
        text = "not recorded by the input"
    return f'; extractor: <span id="extractor">{esc(text)}</span>'


def _hosts(data: ReportData) -> str:
    rows = "".join(
        f'<tr><td>{esc(h)}</td><td class="num">{n:,}</td><td class="num">{d:,}</td>'
        f'<td class="num">{100 * d / n:.1f}%</td></tr>'
        for h, n, d in data.hosts[:HOSTS_SHOWN]
    )
    more = len(data.hosts) - HOSTS_SHOWN
    tail = f'<p class="muted">and {more:,} more hosts</p>' if more > 0 else ""
    return (
        '<table id="hosts"><tr><th>host</th><th>pages</th><th>near-duplicates</th><th>share</th></tr>'
        f"{rows}</table>{tail}"
    )


def render(data: ReportData, diffs: list[PairDiff], timelines: str = "") -> str:
    """The whole page; ``timelines``: the timeline section's HTML (:mod:`.timeline.html`)."""
    payload = {"clusters": _clusters_json(data.clusters, diffs), "diffs": _diffs_json(diffs)}
    notes = "".join(f'<li class="note">{esc(n)}</li>' for n in data.notes)
    shown = min(len(data.clusters), TOP_CLUSTERS)
    options = "".join(
        f'<option value="{i}">cluster {d.cluster + 1}: {esc(d.a.uri or d.a.key)} / '
        f"{esc(d.b.uri or d.b.key)}</option>"
        for i, d in enumerate(diffs)
    )
    no_pair = "" if diffs else '<span class="muted">no pair to show</span>'
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>scrapy-simhash report</title><style>{asset("page.css")}</style></head><body>
<h1>Near-duplicates: scrapy-simhash report</h1>
<p class="muted">{esc(data.kind)}: {sources_text(data.sources)}<br>written {when} by scrapy-simhash
{esc(__version__)}; <span id="rule">{esc(rule_text(data))}</span>{_extractor(data)}</p>
<h2>Totals</h2>{_totals(data)}
{f"<ul>{notes}</ul>" if notes else ""}
<h2>Histograms</h2><div id="charts">{_charts(data)}</div>
<h2>Clusters</h2>
<p id="cluster-count" data-count="{data.totals.clusters}">{data.totals.clusters:,} clusters; the
{shown:,} largest are listed (at most {MEMBERS_SHOWN} members each), the original first, marked
&#9733;<span id="keep">{esc(keep_text(data))}</span>.</p>
<p><button id="prev">&larr; previous</button><span id="cluster-page"></span>
<button id="next">next &rarr;</button></p><div id="clusters"></div>
<h2 id="pairs">Pair texts</h2>
<p><select id="pair"{"" if diffs else " hidden"}>{options}</select>{no_pair}</p>
<p id="pair-head"></p><div id="pair-body"></div>
{timelines}
<h2>Hosts</h2>{_hosts(data)}
<script type="application/json" id="report-data">{script_json(payload)}</script>
<script>{asset("report.js")}</script>
</body></html>
"""


def write_page(text: str, output: str | os.PathLike[str]) -> tuple[Path, int]:
    """Write a page to a temporary name, then rename it into place; returns where and how big."""
    path = Path(output)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)
    return path, path.stat().st_size
