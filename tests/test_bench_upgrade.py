"""bench/upgrade.py on a few hundred pages, as a subprocess: it builds an old index, converts it, and
prints each figure it promises."""

from __future__ import annotations

import re
from pathlib import Path

from bench_support import run_bench


def test_a_tiny_run_converts_and_prints_its_figures(tmp_path: Path) -> None:
    done = run_bench("upgrade.py", "--n", "300", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "built a format-2 index with a sketches/ store: 300 pages" in out
    assert re.search(r"upgrade \(read, check, write, first open\): [\d.]+ s \([\d,]+ pages/s\)", out), out
    assert re.search(r"its peak memory \(max RSS\): +[\d,]+ MiB", out), out
    assert re.search(r"next open \(writer\): +[\d.]+ s", out), out
    assert re.search(r"directory bytes a page: [\d,]+ old \(no table files\), [\d,]+ new", out), out
    assert list(tmp_path.iterdir()) == []  # its working directory is removed
