"""Shared fixtures: the read-only test corpus beside the project."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("SCRAPY_SIMHASH_SHARED", REPO.parent / "shared")).resolve()
CORPUS = SHARED / "corpus"
SPEC = SHARED / "spec"


def _require(path: Path) -> Path:
    if not path.exists():
        pytest.fail(
            f"test data missing: {path} does not exist. The tests read the shared corpus and spec from "
            f"../shared beside the repository (or from $SCRAPY_SIMHASH_SHARED).",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="session")
def corpus() -> Path:
    return _require(CORPUS)


@pytest.fixture(scope="session")
def spec() -> Path:
    return _require(SPEC)
