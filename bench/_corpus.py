"""Locating the shared corpus from benchmarks (never copied into the repo)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("SCRAPY_SIMHASH_SHARED", REPO.parent / "shared")).resolve() / "corpus"


def corpus() -> Path:
    """The corpus directory, or exit with a message that says where it was expected."""
    if not CORPUS.is_dir():
        sys.exit(f"benchmark data missing: {CORPUS} does not exist (set SCRAPY_SIMHASH_SHARED to shared/)")
    return CORPUS
