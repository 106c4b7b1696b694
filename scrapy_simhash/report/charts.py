"""Server-side SVG charts (bar histograms, line curves): no script and no library in the page."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

import numpy as np

WIDTH, HEIGHT = 560, 220
LEFT, RIGHT, TOP, BOTTOM = 48, 12, 24, 40
COLOURS = ["#2b6cb0", "#c05621", "#2f855a", "#805ad5", "#b83280", "#4a5568"]


def _esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def _marker_text(x: float, label: str) -> str:
    """The marker's label beside its line, on the left of it near the right edge (not clipped)."""
    if x > WIDTH - RIGHT - 90:
        return f'<text x="{x - 3:.1f}" y="{TOP + 6}" text-anchor="end" class="mt">{_esc(label)}</text>'
    return f'<text x="{x + 3:.1f}" y="{TOP + 6}" class="mt">{_esc(label)}</text>'


def distance_bars(
    values: np.ndarray, k: int | None, beyond: int | None = None, beyond_label: str | None = None
) -> list[tuple[str, int]]:
    """One bar per distance 0..max(k, largest value); ``beyond`` (pages with no near-duplicate) as
    ``>k`` (or ``beyond_label``: in verified mode such a page may well have a page within k)."""
    top = int(values.max()) if values.size else 0
    top = max(top, k or 0)
    counts = np.bincount(values.astype(np.int64), minlength=top + 1) if values.size else np.zeros(top + 1)
    bars = [(str(d), int(c)) for d, c in enumerate(counts)]
    if beyond is not None and k is not None:
        bars.append((beyond_label or f">{k}", beyond))
    return bars


def similarity_bars(values: np.ndarray, step: float = 0.05) -> list[tuple[str, int]]:
    """Bars of width ``step`` from 0 to 1 (1.0 falls in the last bar)."""
    n = round(1 / step)
    index = np.clip((values * n).astype(np.int64), 0, n - 1) if values.size else np.zeros(0, np.int64)
    counts = np.bincount(index, minlength=n)
    return [(f"{i * step:.2f}", int(c)) for i, c in enumerate(counts)]


def bar_chart(
    bars: Sequence[tuple[str, int]],
    *,
    title: str,
    x_label: str,
    marker: float | None = None,
    marker_label: str = "threshold",
    chart_id: str = "",
) -> str:
    """An SVG histogram; ``marker`` is a position in bar units (2.5 = between bars 2 and 3)."""
    n = max(len(bars), 1)
    peak = max((c for _, c in bars), default=0) or 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot = plot_w / n
    parts = [
        f'<svg class="chart" id="{_esc(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{_esc(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_esc(title)}</title>",
        f'<text x="{LEFT}" y="14" class="ct">{_esc(title)}</text>',
        f'<line x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}" class="axis"/>',
        f'<text x="{LEFT - 6}" y="{TOP + 4}" text-anchor="end" class="tick">{peak}</text>',
        f'<text x="{LEFT - 6}" y="{TOP + plot_h}" text-anchor="end" class="tick">0</text>',
    ]
    every = max(1, n // 12)
    for i, (label, count) in enumerate(bars):
        h = plot_h * count / peak
        x = LEFT + i * slot
        parts.append(
            f'<rect class="bar" x="{x + slot * 0.1:.1f}" y="{TOP + plot_h - h:.1f}" width="{slot * 0.8:.1f}" '
            f'height="{h:.1f}"><title>{_esc(label)}: {count}</title></rect>'
        )
        if i % every == 0:
            parts.append(
                f'<text x="{x + slot / 2:.1f}" y="{TOP + plot_h + 14}" text-anchor="middle" '
                f'class="tick">{_esc(label)}</text>'
            )
    if marker is not None:
        mx = LEFT + marker * slot
        parts.append(
            f'<line class="marker" x1="{mx:.1f}" y1="{TOP - 4}" x2="{mx:.1f}" y2="{TOP + plot_h}"/>'
            f"{_marker_text(mx, marker_label)}"
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle" class="tick">'
        f"{_esc(x_label)}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


def line_chart(
    series: Mapping[str, Sequence[tuple[float, float]]],
    *,
    title: str,
    x_label: str,
    y_label: str = "",
    marker: float | None = None,
    marker_label: str = "recommended",
    chart_id: str = "",
) -> str:
    """An SVG line chart of several series (y in 0..1) sharing one x axis."""
    xs = [x for points in series.values() for x, _ in points]
    lo, hi = (min(xs), max(xs)) if xs else (0.0, 1.0)
    if hi == lo:
        hi = lo + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM - 14

    def px(x: float) -> float:
        return LEFT + (x - lo) / (hi - lo) * plot_w

    def py(y: float) -> float:
        return TOP + plot_h - y * plot_h

    parts = [
        f'<svg class="chart" id="{_esc(chart_id)}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{_esc(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{_esc(title)}</title>",
        f'<text x="{LEFT}" y="14" class="ct">{_esc(title)}</text>',
        f'<line x1="{LEFT}" y1="{py(0)}" x2="{LEFT + plot_w}" y2="{py(0)}" class="axis"/>',
        f'<text x="{LEFT - 6}" y="{py(1) + 4}" text-anchor="end" class="tick">1</text>',
        f'<text x="{LEFT - 6}" y="{py(0)}" text-anchor="end" class="tick">0</text>',
        f'<text x="{LEFT}" y="{py(0) + 14}" class="tick">{lo:g}</text>',
        f'<text x="{LEFT + plot_w}" y="{py(0) + 14}" text-anchor="end" class="tick">{hi:g}</text>',
        f'<text x="{LEFT + plot_w / 2}" y="{py(0) + 14}" text-anchor="middle" class="tick">{_esc(x_label)}'
        f"{' / ' + _esc(y_label) if y_label else ''}</text>",
    ]
    for i, (name, points) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in points)
        parts.append(
            f'<polyline class="line" fill="none" stroke="{colour}" stroke-width="2" points="{path}"/>'
        )
        for x, y in points:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}">'
                f"<title>{_esc(name)} at {x:g}: {y:.3f}</title></circle>"
            )
        parts.append(
            f'<text x="{LEFT + 8 + i * 110}" y="{HEIGHT - 4}" style="fill:{colour}" class="tick">'
            f"{_esc(name)}</text>"
        )
    if marker is not None:
        mx = px(marker)
        parts.append(
            f'<line class="marker" x1="{mx:.1f}" y1="{TOP - 4}" x2="{mx:.1f}" y2="{py(0)}"/>'
            f"{_marker_text(mx, marker_label)}"
        )
    parts.append("</svg>")
    return "".join(parts)
