"""A bench script run the way a user runs it, for the tests that check it still runs and prints what it
promises: a subprocess with a clean environment (no variable only the tests set)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def run_bench(
    script: str, *args: str, shared: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """``python bench/<script> args`` with only PATH, HOME and LANG of this environment; ``shared``:
    the directory its corpus is read from (``SCRAPY_SIMHASH_SHARED``), else the default ``../shared``."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    if shared is not None:
        env["SCRAPY_SIMHASH_SHARED"] = str(shared)
    command = [sys.executable, str(BENCH / script), *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)
