"""bench/revisits.py on a tiny site, as a subprocess: its table agrees with itself and with its WARCs."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from bench_support import run_bench

PAGES = 5


def test_a_tiny_run_prints_consistent_figures(corpus: Path, tmp_path: Path) -> None:
    keep = tmp_path / "kept"
    done = run_bench("revisits.py", "--pages", str(PAGES), "--keep", str(keep), shared=corpus.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {}
    for line in done.stdout.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 8 and cells[0] in ("on", "off"):
            mode, run, responses, revisits, response_side, metadata, on_disk, raw = cells
            rows[mode, run] = {
                "responses": int(responses),
                "revisits": int(revisits),
                "response_side": int(response_side),
                "metadata": int(metadata),
                "on_disk": float(on_disk.rstrip("%")),
                "raw": float(raw.rstrip("%")),
            }
    assert set(rows) == {(m, r) for m in ("on", "off") for r in ("first", "second")}, done.stdout
    urls = PAGES + 2  # the pages, one list page and the start page
    assert (rows["on", "first"]["responses"], rows["on", "first"]["revisits"]) == (urls, 0)
    assert (rows["on", "second"]["responses"], rows["on", "second"]["revisits"]) == (0, urls)
    for run in ("first", "second"):
        assert (rows["off", run]["responses"], rows["off", run]["revisits"]) == (urls, 0)
    for mode in ("on", "off"):  # each share: what the crawl stored over its first crawl's response bytes
        first = rows[mode, "first"]["response_side"]
        for run in ("first", "second"):
            row = rows[mode, run]
            assert abs(100 * (row["response_side"] + row["metadata"]) / first - row["on_disk"]) < 0.01
    second, without = rows["on", "second"], rows["off", "second"]
    assert second["on_disk"] < 50 < 100 < without["on_disk"]
    assert second["response_side"] < rows["on", "first"]["response_side"] / 5
    summary = done.stdout.strip().splitlines()[-1]
    figures = [float(x) for x in re.findall(r"([\d.]+)%", summary)]
    assert (
        figures[0] == second["on_disk"] and figures[2] == second["raw"] and figures[3] == without["on_disk"]
    )
    assert ("NOT met" in summary) == (second["on_disk"] > 5)
    # the table counts what the kept WARCs hold
    for (mode, run), row in rows.items():
        warcs = sorted((keep / mode / run / "warcs").glob("*.warc.gz"))
        text = b"".join(gzip.decompress(path.read_bytes()) for path in warcs)
        assert text.count(b"\r\nWARC-Type: revisit\r\n") == row["revisits"]
        assert text.count(b"\r\nWARC-Type: response\r\n") == urls - row["revisits"]
        on_disk = sum(path.stat().st_size for path in warcs)
        assert row["response_side"] + row["metadata"] < on_disk
