"""bench/quality.py: the configuration it details (``--default``) is always one it measures.

Runs the harness as a subprocess on a small corpus made of links to six pages of each source of the
shared corpus (ground truth included), with its texts cache in a temporary directory: what is checked
is which configurations the report details, which any handful of pages shows.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench_support import run_bench

from scrapy_simhash.extract.registry import DEFAULT_NAME

BENCH = Path(__file__).resolve().parent.parent / "bench"
PAGES_PER_SOURCE = 6


@pytest.fixture(scope="module")
def small_corpus(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    small = tmp_path_factory.mktemp("small") / "corpus"
    (small / "pages").mkdir(parents=True)
    (small / "truth").symlink_to(corpus / "truth")
    for source in sorted((corpus / "pages").iterdir()):
        for page in sorted(source.rglob("*.html.gz"))[:PAGES_PER_SOURCE]:
            link = small / "pages" / page.relative_to(corpus / "pages")
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(page)
    return small


def run_quality(small_corpus: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_bench(
        "quality.py",
        "--corpus",
        str(small_corpus),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--json",
        str(tmp_path / "quality.json"),
        "--features",
        "tokens",
        "--time-pages",
        "0",
        "--jobs",
        "1",
        "--random-pairs",
        "100",
        "--briefs",
        "5",
        *args,
        timeout=900,
    )


def test_without_default_the_report_details_an_extractor_it_measured(small_corpus: Path, tmp_path: Path):
    """``--extractors resiliparse`` alone used to end in a KeyError on the shipped default's name."""
    done = run_quality(small_corpus, tmp_path, "--extractors", "resiliparse")
    assert done.returncode == 0, done.stderr
    assert "## Distance histograms: resiliparse, tokens, min tokens 30" in done.stdout


def test_a_default_outside_the_extractors_is_measured_too(small_corpus: Path, tmp_path: Path):
    done = run_quality(
        small_corpus, tmp_path, "--extractors", "resiliparse", "--default", "trafilatura-raw/tokens/30"
    )
    assert done.returncode == 0, done.stderr
    assert "trafilatura-raw is measured too (not in --extractors)" in done.stderr
    assert "## Distance histograms: trafilatura-raw, tokens, min tokens 30" in done.stdout


@pytest.mark.parametrize(
    ("default", "message"),
    [
        ("nope/tokens/30", f"unknown extractor 'nope'; available: {DEFAULT_NAME},"),
        ("resiliparse/nope/30", "unknown features 'nope'; available: tokens,"),
        ("resiliparse/tokens/25", "min tokens 25 is not measured; one of 0, 10, 20, 30, 50, 100, 200"),
        ("resiliparse/tokens", "'resiliparse/tokens' is not extractor/features/min tokens"),
    ],
)
def test_a_wrong_default_says_what_to_pass_before_any_work(
    small_corpus: Path, tmp_path: Path, default: str, message: str
):
    done = run_quality(small_corpus, tmp_path, "--extractors", "resiliparse", "--default", default)
    assert done.returncode == 2
    assert f"--default: {message}" in done.stderr
    assert "extracting" not in done.stderr and not (tmp_path / "cache").exists()


def test_the_texts_cache_follows_the_extraction_code(tmp_path: Path):
    """A change of the template step keeps the extractors' descriptions, so texts cached before it must
    not be read after it: the cache file is named after the extraction code too."""
    sys.path.insert(0, str(BENCH))
    from quality import texts_cache_path

    code = tmp_path / "extract"
    code.mkdir()
    (code / "boilerplate.py").write_text("SHORT_ARTICLE = 1000\n")
    before = texts_cache_path(tmp_path, 0, code)
    assert texts_cache_path(tmp_path, 0, code) == before
    (code / "boilerplate.py").write_text("SHORT_ARTICLE = 800\n")
    after = texts_cache_path(tmp_path, 0, code)
    assert after != before and after.parent == before.parent
    assert texts_cache_path(tmp_path, 1, code) != after
