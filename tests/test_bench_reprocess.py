"""bench/reprocess.py's stored-index comparison on a tiny index, as a subprocess: it fills an index the
way bench/index.py makes its pages, then prints the figures it promises (it once broke when
bench/index.py changed how it makes sketches, unnoticed until a 10M run)."""

from __future__ import annotations

import re

from bench_support import run_bench


def test_a_tiny_stored_run_fills_its_index_and_prints_its_figures() -> None:
    done = run_bench("reprocess.py", "--pages", "20", "--stored", "300", "--only-stored", "--rounds", "1")
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "(4) an index of 300 stored pages" in out, out
    for command in ("tag", "dedupe"):
        assert re.search(rf"{command}: stored / empty [\d.]+x per CPU-second", out), out
