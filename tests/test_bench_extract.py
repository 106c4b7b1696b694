"""bench/extract.py: how an extraction is scored against each kind of ground truth, and a short real run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench_support import run_bench as run_script

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

from extract import score  # noqa: E402
from quality_pairs import Truth  # noqa: E402


def test_token_f1_counts_tokens_with_multiplicity():
    truth = Truth(text="the cat sat on the mat")
    assert score("the cat sat on the mat", truth).f1 == 1.0
    half = score("the cat sat", truth)  # 3 of 6 tokens, nothing extra
    assert (half.precision, half.recall) == (1.0, 0.5)
    noisy = score("the cat sat on the mat share this tweet", truth)  # 6 right, 3 extra
    assert noisy.recall == 1.0 and noisy.precision == pytest.approx(6 / 9)
    assert score(None, truth).f1 == 0.0


def test_snippets_score_found_and_leaked():
    truth = Truth(with_=("Main   sentence one.", "Main sentence two."), without=("Cookie banner",))
    assert score("main sentence one. main sentence two.", truth).f1 == 1.0  # case and spaces do not count
    leaked = score("Main sentence one. Main sentence two. Cookie banner", truth)
    assert leaked.recall == 1.0 and leaked.precision == pytest.approx(2 / 3)
    assert score("Main sentence one.", truth).recall == 0.5


def test_a_prefix_gives_recall_only():
    result = score("A beginning of the article and much more after it", Truth(prefix="A beginning"))
    assert result.recall == 1.0 and result.precision is None and result.f1 is None


def run_bench(corpus, *args: str) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """``bench/extract.py args`` from a clean environment (exit 0 asserted), and its table's rows by name."""
    done = run_script("extract.py", *args, shared=corpus.parent)
    assert done.returncode == 0, done.stderr
    rows = {line.split("|")[1].strip(): line for line in done.stdout.splitlines() if line.startswith("| ")}
    return done, rows


def test_a_short_run_prints_every_extractor_and_source(corpus):
    _, rows = run_bench(corpus, "--pages", "2", "--extractors", "resiliparse")
    assert {"trafilatura", "resiliparse"} <= set(rows)  # the reference is always measured
    assert "scrapinghub-aeb F1" in rows["extractor"] and "overall F1" in rows["extractor"]
    assert rows["trafilatura"].split("|")[4].strip() == "1.00x"


def test_a_baseline_checkout_is_measured_in_the_same_run(corpus):
    """``--baseline``: another checkout's extractors (here this one's) get rows of their own, with and
    without the template step, so a change to extraction is measured before and after on the same pages."""
    repo = BENCH.parent
    args = ["--pages", "1", "--extractors", "resiliparse,resiliparse-raw", "--baseline", str(repo)]
    done, rows = run_bench(corpus, *args)
    assert {f"resiliparse@{repo.name}", f"resiliparse-raw@{repo.name}"} <= set(rows)
    assert f"- resiliparse-raw@{repo.name}: `resiliparse/" in done.stdout
    assert "boilerplate=" not in done.stdout.split(f"- resiliparse-raw@{repo.name}: ")[1].splitlines()[0]


def test_random_pairs_stop_at_the_cross_site_pairs_a_small_corpus_has():
    from quality_pairs import Page, random_pairs

    named = [("a", 1), ("a", 2), ("b", 1)]
    pages = [Page(f"{site}{n}", Path(f"{site}{n}.html.gz"), site) for site, n in named]
    pairs = random_pairs(pages, 10, seed=1)  # 3 pairs in all, 1 within site a: 2 to draw, not 10
    drawn = sorted(tuple(sorted((x.id, y.id))) for x, y in pairs)
    assert drawn == [("a1", "b1"), ("a2", "b1")]
    assert random_pairs(pages[:2], 5, seed=1) == []  # one site: no pair at all
