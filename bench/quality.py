"""Detection quality of simhash-doc/1 on real pages: which defaults catch near-duplicates and nothing else.

    .venv/bin/python bench/quality.py                 # whole corpus, seed 0; prints the markdown report
    .venv/bin/python bench/quality.py --base 200      # transform only 200 pages (quicker)

Positives are real pages against copies changed the way the web changes pages (``quality_pairs``);
negatives are different articles of one site and template, pairs of short briefs in one real site's
page (its template: menu, banners, footer, around two sentences of its own), and random pairs. For every text
extractor and feature set it reports precision, recall and F1 per kind of change at k = 1..6 and
per minimum token count, distance histograms, and the distance distribution over all pairs of
different corpus pages, with the expected number of false pairs extrapolated to 10 million pages.

Extracted texts are cached in ``bench/results/`` (git-ignored), keyed by seed, transform version and
the extraction code's sources and, within, by each extractor's description (library version and options):
the first run extracts ~10,000 pages (about 10 minutes on 2 cores), later runs take seconds.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _stats import beta_binomial_pmf
from quality_pairs import (
    BRIEF_KINDS,
    KINDS,
    TRANSFORMS_VERSION,
    Page,
    article_matches_truth,
    brief_templates,
    load_pages,
    random_pairs,
    same_site_pairs,
    transform,
)
from quality_verified import report_verified

from scrapy_simhash.extract import (
    Extractor,
    ResiliparseExtractor,
    TrafilaturaExtractor,
    extractor_names,
    get_extractor,
)
from scrapy_simhash.extract.cascade import ResiliparseTrafilaturaExtractor
from scrapy_simhash.extract.registry import DEFAULT_NAME
from scrapy_simhash.fingerprint import simhash_features, simhash_with_count, tokens
from scrapy_simhash.fingerprint.lines import simhash_lines
from scrapy_simhash.index.tables.batch import popcount64

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
KS = (1, 2, 3, 4, 5, 6)
MIN_TOKENS = (0, 10, 20, 30, 50, 100, 200)
CRAWL_PAGES = 10_000_000


def default_corpus() -> Path:
    shared = Path(os.environ.get("SCRAPY_SIMHASH_SHARED", REPO.parent / "shared"))
    return shared / "corpus"


# --------------------------------------------------------------------------------------------------
# Text extractors measured


def _visible_text(html: str) -> str | None:
    import trafilatura

    return trafilatura.html2txt(html) or None


def _text_of(extractor: Extractor) -> Callable[[str], str | None]:
    return lambda html: extractor(html).text


_BENCH_EXTRACTORS: dict[str, Extractor] = {
    "trafilatura-full": TrafilaturaExtractor(fast=False),  # trafilatura's own default, with its fallbacks
    "trafilatura-precision": TrafilaturaExtractor(fast=False, favor_precision=True),
    "trafilatura-fast-precision": TrafilaturaExtractor(fast=True, favor_precision=True),
    "resiliparse-comments": ResiliparseExtractor(comments=True, post_meta=True),  # the library's defaults
    # without the template step (scrapy_simhash/extract/boilerplate.py): the extractors' own texts
    "trafilatura-raw": TrafilaturaExtractor(drop_boilerplate=False),
    "resiliparse-raw": ResiliparseExtractor(drop_boilerplate=False),
    # the cascade at its threshold before 2026-11-27 (docs/quality.md, "Fewer pages to trafilatura")
    "resiliparse+trafilatura-100": ResiliparseTrafilaturaExtractor(min_words=100),
}
"""Configurations measured beside the registered extractors (never shipped under these names)."""

_REGISTERED: dict[str, Extractor] = {name: get_extractor(name) for name in extractor_names()}

# Every registered extractor by its name (what SIMHASH_EXTRACTOR accepts), then the bench-only ones.
EXTRACTORS: dict[str, Callable[[str], str | None]] = {
    name: _text_of(extractor) for name, extractor in (_REGISTERED | _BENCH_EXTRACTORS).items()
} | {"visible-text": _visible_text}
EXTRACTOR_NOTES: dict[str, str] = {
    name: extractor.description for name, extractor in (_REGISTERED | _BENCH_EXTRACTORS).items()
} | {"visible-text": "trafilatura.html2txt: all visible text, no main-text extraction"}
CACHE_KEYS: dict[str, str] = EXTRACTOR_NOTES | {"visible-text": "visible-text"}
"""What the texts cache files each extractor's texts under: its description (version and options)."""


# --------------------------------------------------------------------------------------------------
# Extraction with a cache (texts of ~10,000 page variants per extractor)

_worker_pages: dict[str, Page] = {}
_worker_all: list[Page] = []


def _init_worker(corpus: str) -> None:
    global _worker_all
    _worker_all = load_pages(Path(corpus))
    _worker_pages.update((p.id, p) for p in _worker_all)


def _extract_variant(job: tuple[str, str | None, int, tuple[str, ...]]) -> tuple[str, dict[str, str | None]]:
    page_id, kind, seed, names = job
    page = _worker_pages[page_id]
    key = variant_key(page_id, kind, seed)
    try:
        html = page.html() if kind is None else transform(page, kind, _worker_all, seed)
    except Exception as exc:  # one bad page must not end a long run
        print(f"transform failed for {key}: {exc!r}", file=sys.stderr)
        return key, dict.fromkeys(names)
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = EXTRACTORS[name](html)
        except Exception as exc:
            print(f"{name} failed on {key}: {exc!r}", file=sys.stderr)
            out[name] = None
    return key, out


def variant_key(page_id: str, kind: str | None, seed: int) -> str:
    return page_id if kind is None else f"{page_id}#{kind}@{seed}"


EXTRACT_CODE = REPO / "scrapy_simhash" / "extract"


def texts_cache_path(cache_dir: Path, seed: int, code: Path = EXTRACT_CODE) -> Path:
    """The texts cache for ``seed``, the transforms' version and the extraction code in ``code``.

    Descriptions name an extractor's library versions and options, not every change of this project's
    own steps (the template step keeps ``;boilerplate=N`` through small changes of its rules): a digest of the
    extraction package's sources keeps a run from scoring texts an older step made.
    """
    digest = hashlib.sha256()
    for path in sorted(code.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return cache_dir / f"quality-texts-seed{seed}-v{TRANSFORMS_VERSION}-x{digest.hexdigest()[:10]}.json.gz"


def load_cache(path: Path) -> dict[str, dict[str, str | None]]:
    if not path.exists():
        return {}
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def save_cache(path: Path, cache: dict[str, dict[str, str | None]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with gzip.open(tmp, "wt", encoding="utf-8") as fh:
        json.dump(cache, fh)
    tmp.replace(path)


def extract_all(
    corpus: Path,
    jobs_spec: list[tuple[str, str | None]],
    seed: int,
    names: list[str],
    workers: int,
    cache_path: Path,
) -> dict[str, dict[str, str | None]]:
    """Texts of every (page id, kind) for every extractor in ``names``, from the cache where possible.

    The cache keeps texts under each extractor's description (library version and options), not its
    name: a changed configuration or library is extracted afresh instead of read stale.
    """
    cache = load_cache(cache_path)
    keys = {name: CACHE_KEYS[name] for name in names}
    todo = []
    for page_id, kind in jobs_spec:
        have = cache.get(variant_key(page_id, kind, seed), {})
        missing = tuple(n for n in names if keys[n] not in have)
        if missing:
            todo.append((page_id, kind, seed, missing))
    if todo:
        print(f"extracting {len(todo)} page variants with {workers} worker(s)...", file=sys.stderr)
        started = time.monotonic()
        with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(str(corpus),)) as pool:
            for done, (key, texts) in enumerate(pool.map(_extract_variant, todo, chunksize=8), 1):
                cache.setdefault(key, {}).update((keys[n], text) for n, text in texts.items())
                if done % 500 == 0:
                    print(f"  {done}/{len(todo)} ({time.monotonic() - started:.0f} s)", file=sys.stderr)
                    save_cache(cache_path, cache)
        save_cache(cache_path, cache)
    return {
        variant: {name: entry[key] for name, key in keys.items() if key in entry}
        for variant, entry in cache.items()
    }


# --------------------------------------------------------------------------------------------------
# Fingerprints


FEATURES: dict[str, Callable[[str], tuple[int, int]]] = {
    "tokens": simhash_with_count,  # simhash-doc/1
    "shingles2": lambda text: simhash_with_count(text, shingle=2),  # simhash-doc/1+shingles2
    "shingles3": lambda text: simhash_with_count(text, shingle=3),  # simhash-doc/1+shingles3
    "lines12": lambda text: simhash_lines(text, 12),  # simhash-doc/1+lines12 (opt-in cleanup)
    "lines12+shingles2": lambda text: simhash_lines(text, 12, shingle=2),  # simhash-doc/1+lines12+shingles2
}


@dataclass(frozen=True)
class Print:
    """A fingerprint and the token count that decides whether the page is fingerprinted at all."""

    value: int
    count: int


def fingerprint(text: str | None, features: str) -> Print:
    if not text:
        return Print(0, 0)
    value, count = FEATURES[features](text)
    return Print(value, count)


def all_pairs_histogram(values: Iterable[int]) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Histogram (65 bins) of the distances of all pairs, and the closest pairs (d, i, j)."""
    fps = np.array(list(values), dtype=np.uint64)
    hist = np.zeros(65, dtype=np.int64)
    closest: list[tuple[int, int, int]] = []
    for i in range(len(fps) - 1):
        dist = popcount64(fps[i] ^ fps[i + 1 :])
        hist += np.bincount(dist, minlength=65)
        low = np.nonzero(dist <= 16)[0]
        closest.extend((int(dist[j]), i, i + 1 + int(j)) for j in low)
    closest.sort()
    return hist, closest[:2000]


RELATED_JACCARD = 0.3
REFERENCE_EXTRACTOR = "trafilatura"


def related_pairs(pages: list[Page], texts: dict[str, dict[str, str | None]]) -> set[frozenset[str]]:
    """Pairs of corpus pages that carry the same article (a copy, a syndicated story, a test fixture).

    Judged by the Jaccard resemblance of their token sets (>= 0.3; unrelated articles stay below
    0.15), on the reference extractor's text, for the pairs within 24 bits of each other. The corpus
    does hold such pairs: counting them as unrelated would blame simhash for finding real duplicates.
    """
    sets = []
    for page in pages:
        entry = texts.get(page.id, {})
        # the reference extractor's text, else any other measured (a run with --extractors may omit it)
        text = (
            entry.get(REFERENCE_EXTRACTOR)
            or entry.get("visible-text")
            or next((t for t in entry.values() if t), "")
        )
        sets.append(set(tokens(text)))
    fps = np.array([simhash_features(s) if s else 0 for s in sets], dtype=np.uint64)
    related: set[frozenset[str]] = set()
    for i in range(len(pages) - 1):
        dist = popcount64(fps[i] ^ fps[i + 1 :])
        for j in np.nonzero(dist <= 24)[0]:
            a, b = sets[i], sets[i + 1 + int(j)]
            if a and b and len(a & b) / len(a | b) >= RELATED_JACCARD:
                related.add(frozenset((pages[i].id, pages[i + 1 + int(j)].id)))
    return related


# --------------------------------------------------------------------------------------------------
# Tail extrapolation


def beta_binomial_cdf(hist: np.ndarray, upto: int) -> float:
    """P(d <= upto) under a beta-binomial(64) fitted to the histogram's mean and variance
    (each pair of unrelated pages flips each bit with its own probability; ``_stats``)."""
    return float(beta_binomial_pmf(hist, 64)[: upto + 1].sum())


def loglinear_tail_cdf(hist: np.ndarray, upto: int) -> float | None:
    """P(d <= upto) from a straight line through log10 of the empirical lower-tail CDF.

    Fitted where the CDF is between 1e-4 and 1e-2 (enough pairs to be measured); the true tail
    falls faster than exponentially, so this overestimates: a conservative figure.
    """
    cdf = np.cumsum(hist) / hist.sum()
    xs = [x for x in range(65) if 1e-4 <= cdf[x] <= 1e-2]
    if len(xs) < 2:
        xs = [x for x in range(65) if 0 < cdf[x] <= 5e-2][:4]
    if len(xs) < 2:
        return None
    slope, intercept = np.polyfit(xs, np.log10(cdf[xs]), 1)
    if upto >= xs[0]:
        return float(cdf[upto])
    return float(10 ** (intercept + slope * upto))


def expected_false_pairs(probability: float | None, pages: int = CRAWL_PAGES) -> float | None:
    return None if probability is None else probability * pages * (pages - 1) / 2


# --------------------------------------------------------------------------------------------------
# Scoring


@dataclass
class Scores:
    tp: int = 0
    fn: int = 0
    fp: int = 0

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def evaluate(
    prints: dict[str, Print],
    positives: dict[str, list[tuple[str, str]]],
    negatives: dict[str, list[tuple[str, str]]],
    min_tokens: int,
) -> dict:
    """Distances and per-k scores for one configuration.

    A page with fewer than ``min_tokens`` tokens is not fingerprinted: a positive pair whose
    original qualifies but whose copy does not is a miss; a positive pair whose original does not
    qualify is left out (the page would not be deduplicated at all: reported as coverage); a
    negative pair with a page that does not qualify cannot be a false match.
    """
    pos_d: dict[str, list[int]] = {}
    for kind, pairs in positives.items():
        dists = []
        for a, b in pairs:
            pa, pb = prints[a], prints[b]
            if pa.count < max(min_tokens, 1):
                continue
            dists.append(64 if pb.count < max(min_tokens, 1) else (pa.value ^ pb.value).bit_count())
        pos_d[kind] = dists
    neg_d: dict[str, list[int]] = {}
    for name, pairs in negatives.items():
        neg_d[name] = [
            (prints[a].value ^ prints[b].value).bit_count()
            for a, b in pairs
            if prints[a].count >= max(min_tokens, 1) and prints[b].count >= max(min_tokens, 1)
        ]
    all_neg = [d for dists in neg_d.values() for d in dists]
    per_k = {}
    for k in KS:
        fp = sum(d <= k for d in all_neg)
        kinds = {}
        total = Scores(fp=fp)
        for kind, dists in pos_d.items():
            tp = sum(d <= k for d in dists)
            kinds[kind] = Scores(tp, len(dists) - tp, fp)
            total.tp += tp
            total.fn += len(dists) - tp
        per_k[k] = {
            "kinds": kinds,
            "all": total,
            "fp": {name: sum(d <= k for d in dists) for name, dists in neg_d.items()},
        }
    return {"pos": pos_d, "neg": neg_d, "per_k": per_k}


# --------------------------------------------------------------------------------------------------
# Report


def histogram_line(dists: list[int], top: int = 32) -> str:
    counts = np.bincount(np.minimum(np.array(dists, dtype=np.int64), top), minlength=top + 1)
    return " ".join(str(int(c)) for c in counts)


def fmt_count(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value < 0.01:
        return f"{value:.1e}"
    if value < 100:
        return f"{value:.2f}"
    return f"{value:.2e}"


def detailed_config(value: str | None, names: list[str], features: list[str]) -> tuple[str, str, int]:
    """The ``extractor/features/min tokens`` the report details, from ``--default`` or, without it, the
    shipped one where ``names`` and ``features`` hold it, else their first. ValueError says what to pass."""
    if value is None:
        name = DEFAULT_NAME if DEFAULT_NAME in names or not names else names[0]
        feature = "tokens" if "tokens" in features or not features else features[0]
        return name, feature, 30
    parts = value.split("/")
    if len(parts) != 3 or not parts[2].strip().isdigit():
        raise ValueError(f"{value!r} is not extractor/features/min tokens (e.g. {DEFAULT_NAME}/tokens/30)")
    name, feature, min_tokens = parts[0], parts[1], int(parts[2])
    if name not in EXTRACTORS:
        raise ValueError(f"unknown extractor {name!r}; available: {', '.join(EXTRACTORS)}")
    if feature not in FEATURES:
        raise ValueError(f"unknown features {feature!r}; available: {', '.join(FEATURES)}")
    if min_tokens not in MIN_TOKENS:
        raise ValueError(f"min tokens {min_tokens} is not measured; one of {', '.join(map(str, MIN_TOKENS))}")
    return name, feature, min_tokens


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base", type=int, default=0, help="pages to transform (0: all)")
    parser.add_argument("--random-pairs", type=int, default=20_000)
    parser.add_argument(
        "--briefs", type=int, default=200, help="pairs of short briefs in one site's template"
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--extractors", default=",".join(EXTRACTORS))
    parser.add_argument("--features", default=",".join(FEATURES))
    parser.add_argument(
        "--default",
        help=f"extractor/features/min tokens to detail (default: {DEFAULT_NAME}/tokens/30, or the first of "
        "--extractors and --features where they leave those out); measured even if --extractors or "
        "--features leave it out",
    )
    parser.add_argument("--time-pages", type=int, default=150, help="pages timed per extractor (0: skip)")
    parser.add_argument("--json", type=Path, default=RESULTS / "quality.json")
    parser.add_argument(
        "--cache-dir", type=Path, default=RESULTS, help="where the extracted texts are cached"
    )
    args = parser.parse_args(argv)

    if not (args.corpus / "pages").is_dir():
        print(
            f"corpus not found at {args.corpus}: the benchmark reads ../shared/corpus beside the repository "
            "(or $SCRAPY_SIMHASH_SHARED/corpus)",
            file=sys.stderr,
        )
        return 2
    names = [n for n in args.extractors.split(",") if n]
    unknown = [n for n in names if n not in EXTRACTORS]
    if unknown:
        print(f"unknown extractor(s) {unknown}; available: {', '.join(EXTRACTORS)}", file=sys.stderr)
        return 2
    feature_names = [f for f in args.features.split(",") if f]
    try:
        d_name, d_feat, d_min_i = detailed_config(args.default, names, feature_names)
    except ValueError as exc:
        print(f"--default: {exc}", file=sys.stderr)
        return 2
    for chosen, measured, option in ((d_name, names, "--extractors"), (d_feat, feature_names, "--features")):
        if chosen not in measured:
            print(f"--default {args.default}: {chosen} is measured too (not in {option})", file=sys.stderr)
            measured.append(chosen)

    pages = load_pages(args.corpus)
    started = time.monotonic()
    base = confirmed = [p for p in pages if article_matches_truth(p)]
    print(
        f"{len(base)} pages whose article the ground truth confirms ({time.monotonic() - started:.0f} s)",
        file=sys.stderr,
    )
    if args.base:
        base = random.Random(f"base:{args.seed}").sample(base, min(args.base, len(base)))
        base.sort(key=lambda p: p.id)
    jobs_spec: list[tuple[str, str | None]] = [(p.id, None) for p in pages]
    jobs_spec += [(p.id, kind) for p in base for kind in KINDS]
    templates = brief_templates(confirmed, args.briefs, args.seed)
    jobs_spec += [(p.id, kind) for p in templates for kind in BRIEF_KINDS]
    cache_path = texts_cache_path(args.cache_dir, args.seed)
    texts = extract_all(args.corpus, jobs_spec, args.seed, names, args.jobs, cache_path)

    positives = {kind: [(p.id, variant_key(p.id, kind, args.seed)) for p in base] for kind in KINDS}
    related = related_pairs(pages, texts)
    negatives = {
        "same-site": [
            (a.id, b.id) for a, b in same_site_pairs(pages) if frozenset((a.id, b.id)) not in related
        ],
        "random": [
            (a.id, b.id)
            for a, b in random_pairs(pages, args.random_pairs, args.seed)
            if frozenset((a.id, b.id)) not in related
        ],
        "briefs": [tuple(variant_key(p.id, kind, args.seed) for kind in BRIEF_KINDS) for p in templates],
    }
    out = sys.stdout
    print("# Detection quality (bench/quality.py)\n", file=out)
    print(
        f"corpus: {len(pages)} pages; positives: {len(base)} pages x {len(KINDS)} kinds of change; "
        f"negatives: {len(negatives['same-site'])} same-site pairs, {len(negatives['briefs'])} pairs of "
        f"short briefs in one site's template, {len(negatives['random'])} random pairs; "
        f"all pairs of different pages: {len(pages) * (len(pages) - 1) // 2}, of which {len(related)} carry "
        f"the same article (token Jaccard >= {RELATED_JACCARD}) and are left out of every negative; "
        f"seed {args.seed}\n",
        file=out,
    )
    print("Pages that carry the same article (left out of the negatives):\n", file=out)
    for pair in sorted(sorted(p) for p in related)[:40]:
        print(f"- {pair[0]} | {pair[1]}", file=out)
    print(file=out)
    summary: dict = {"seed": args.seed, "configs": {}}
    results: dict[tuple[str, str], dict] = {}
    for name in names:
        for feat in feature_names:
            prints = {key: fingerprint(t.get(name), feat) for key, t in texts.items()}
            results[(name, feat)] = {"prints": prints}

    # 1. Overview per extractor x features x minimum tokens
    print("## F1 at k = 1..6 (all kinds of change), same-site false positives, coverage\n", file=out)
    print(
        "| extractor | features | min tokens | coverage | F1 k=1 | k=2 | k=3 | k=4 | k=5 | k=6 "
        "| same-site FP k=3 | k=4 | k=6 | random FP k=6 |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", file=out)
    for (name, feat), res in results.items():
        prints = res["prints"]
        res["eval"] = {}
        for m in MIN_TOKENS:
            ev = evaluate(prints, positives, negatives, m)
            res["eval"][m] = ev
            coverage = sum(prints[p.id].count >= max(m, 1) for p in pages) / len(pages)
            pk = ev["per_k"]
            f1s = " | ".join(f"{pk[k]['all'].f1:.4f}" for k in KS)
            print(
                f"| {name} | {feat} | {m} | {coverage:.1%} | {f1s} | {pk[3]['fp']['same-site']} "
                f"| {pk[4]['fp']['same-site']} | {pk[6]['fp']['same-site']} | {pk[6]['fp']['random']} |",
                file=out,
            )
    print(file=out)

    # 2. Unrelated pages: all pairs of different corpus pages, tail and extrapolation
    print("## Unrelated pages: all pairs of different corpus pages\n", file=out)
    print(
        "Expected false pairs in a collection of 10 million pages (5e13 pairs) at k, from a beta-binomial "
        "fit (bb) and a conservative log-linear tail fit (tail).\n",
        file=out,
    )
    print(
        "| extractor | features | min tokens | pairs | median | p0.1% | min | <= 6 | <= 8 | <= 10 | <= 12 "
        "| bb k=3 | tail k=3 | bb k=4 | tail k=4 |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", file=out)
    for (name, feat), res in results.items():
        prints = res["prints"]
        for m in (0, 30, 100):
            eligible = [p for p in pages if prints[p.id].count >= max(m, 1)]
            hist, closest = all_pairs_histogram(prints[p.id].value for p in eligible)
            # The corpus holds the same article more than once: those pairs are not unrelated.
            ids = {p.id for p in eligible}
            for pair in related:
                a, b = tuple(pair)
                if a in ids and b in ids:
                    hist[(prints[a].value ^ prints[b].value).bit_count()] -= 1
            closest = [
                (d, i, j) for d, i, j in closest if frozenset((eligible[i].id, eligible[j].id)) not in related
            ]
            total = int(hist.sum())
            cdf = np.cumsum(hist) / total
            median = int(np.searchsorted(cdf, 0.5))
            p001 = int(np.searchsorted(cdf, 0.001))
            low = int(np.nonzero(hist)[0][0])
            est = {
                k: (
                    expected_false_pairs(beta_binomial_cdf(hist, k)),
                    expected_false_pairs(loglinear_tail_cdf(hist, k)),
                )
                for k in (3, 4)
            }
            res.setdefault("unrelated", {})[m] = {
                "hist": hist.tolist(),
                "closest": [(d, eligible[i].id, eligible[j].id) for d, i, j in closest[:20]],
                "expected_false_pairs_10M": {k: v for k, v in est.items()},
            }
            print(
                f"| {name} | {feat} | {m} | {total} | {median} | {p001} | {low} | {int(hist[:7].sum())} "
                f"| {int(hist[:9].sum())} | {int(hist[:11].sum())} | {int(hist[:13].sum())} "
                f"| {fmt_count(est[3][0])} | {fmt_count(est[3][1])} "
                f"| {fmt_count(est[4][0])} | {fmt_count(est[4][1])} |",
                file=out,
            )
    print(file=out)

    # 3. Per kind of change for the chosen default and its alternatives
    print(f"## Per kind of change, min tokens {d_min_i}: precision / recall / F1 at k = 1..6\n", file=out)
    for (name, feat), res in results.items():
        if feat != d_feat and name != d_name:
            continue
        ev = res["eval"][d_min_i]
        print(f"### {name}, {feat}\n", file=out)
        print("| kind | pairs | " + " | ".join(f"k={k}" for k in KS) + " |", file=out)
        print("|---|---|" + "---|" * len(KS), file=out)
        for kind in [*KINDS, "all"]:
            row = []
            for k in KS:
                s = ev["per_k"][k]["all"] if kind == "all" else ev["per_k"][k]["kinds"][kind]
                row.append(f"{s.precision:.3f} / {s.recall:.3f} / {s.f1:.3f}")
            n = sum(len(v) for v in ev["pos"].values()) if kind == "all" else len(ev["pos"][kind])
            print(f"| {kind} | {n} | " + " | ".join(row) + " |", file=out)
        print(file=out)

    # 4. Histograms for the default
    res = results[(d_name, d_feat)]
    ev = res["eval"][d_min_i]
    print(f"## Distance histograms: {d_name}, {d_feat}, min tokens {d_min_i}\n", file=out)
    print(
        "Counts of pairs at distance 0, 1, 2, ... 31, and >= 32 (a copy left without text counts as 64).\n",
        file=out,
    )
    print("```", file=out)
    for kind in KINDS:
        print(f"{kind:>10}: {histogram_line(ev['pos'][kind])}", file=out)
    for name, dists in ev["neg"].items():
        print(f"{name:>10}: {histogram_line(dists)}", file=out)
    hist = res["unrelated"][d_min_i if d_min_i in res["unrelated"] else 0]["hist"]
    print(f"{'all pairs':>10}: " + " ".join(str(c) for c in hist[:32]) + f" {sum(hist[32:])}", file=out)
    print("```\n", file=out)
    hist_d = np.array(res["unrelated"][d_min_i if d_min_i in res["unrelated"] else 0]["hist"])
    print("Beta-binomial fit against the observed lower tail of all pairs (pairs within d bits):\n", file=out)
    print("| d | observed | beta-binomial |", file=out)
    print("|---|---|---|", file=out)
    for d in (12, 14, 16, 18, 20):
        predicted = beta_binomial_cdf(hist_d, d) * hist_d.sum()
        print(f"| <= {d} | {int(hist_d[: d + 1].sum())} | {predicted:.1f} |", file=out)
    print(file=out)
    print("Closest unrelated pairs (distance, pages):\n", file=out)
    for d, a, b in res["unrelated"][d_min_i if d_min_i in res["unrelated"] else 0]["closest"][:10]:
        print(f"- {d}: {a} | {b}", file=out)

    # 5. One-sentence edits against article length: what k can and cannot catch
    print(f"\n## One-sentence edits: recall at k = 1..6 by article length ({d_name}, {d_feat})\n", file=out)
    print("| distinct tokens | pairs | " + " | ".join(f"k={k}" for k in KS) + " |", file=out)
    print("|---|---|" + "---|" * len(KS), file=out)
    prints = results[(d_name, d_feat)]["prints"]
    buckets = ((30, 100), (100, 300), (300, 1000), (1000, 10**9))
    for low, high in buckets:
        dists = []
        for page in base:
            a, b = prints[page.id], prints[variant_key(page.id, "edit", args.seed)]
            distinct = len(set(tokens(texts[page.id].get(d_name) or "")))
            if a.count >= max(d_min_i, 1) and low <= distinct < high:
                dists.append(64 if b.count < max(d_min_i, 1) else (a.value ^ b.value).bit_count())
        if dists:
            recalls = " | ".join(f"{sum(d <= k for d in dists) / len(dists):.3f}" for k in KS)
            print(f"| {low}-{high if high < 10**9 else ''} | {len(dists)} | {recalls} |", file=out)

    # 6. Candidate defaults side by side
    print(f"\n## Candidate defaults (min tokens {d_min_i})\n", file=out)
    print(
        "F1 over all six kinds and over the five kinds that leave the article text alone (no edit); "
        "same-site false positives; unrelated pairs (all pairs of different articles) within 2k+4 bits; "
        "expected false pairs among 10 million pages (beta-binomial / conservative tail).\n",
        file=out,
    )
    print(
        "| extractor | features | k | F1 | F1 without edit | recall edit | same-site FP | min unrelated "
        "| unrelated <= 2k+4 | false pairs @10M (bb / tail) |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|---|---|---|", file=out)
    for (name, feat), res in results.items():
        if name in ("visible-text", "resiliparse", "resiliparse-comments") and feat != "tokens":
            continue
        ev = res["eval"][d_min_i]
        unrelated = res["unrelated"].get(d_min_i) or res["unrelated"][0]
        hist = np.array(unrelated["hist"])
        low = int(np.nonzero(hist)[0][0])
        for k in (3, 4, 5, 6):
            layout = Scores(fp=ev["per_k"][k]["all"].fp)
            for kind in KINDS:
                if kind != "edit":
                    layout.tp += ev["per_k"][k]["kinds"][kind].tp
                    layout.fn += ev["per_k"][k]["kinds"][kind].fn
            bb = expected_false_pairs(beta_binomial_cdf(hist, k))
            tail = expected_false_pairs(loglinear_tail_cdf(hist, k))
            pk = ev["per_k"][k]
            print(
                f"| {name} | {feat} | {k} | {pk['all'].f1:.4f} | {layout.f1:.4f} "
                f"| {pk['kinds']['edit'].recall:.3f} | {pk['fp']['same-site']} | {low} "
                f"| {int(hist[: 2 * k + 5].sum())} | {fmt_count(bb)} / {fmt_count(tail)} |",
                file=out,
            )

    # 7. Long-lines cleanup (opt-in scheme simhash-doc/1+lines<N>): sweep of N
    print(f"\n## Long-lines cleanup: recall per kind at k = 3 against N (min tokens {d_min_i})\n", file=out)
    print(
        "N = 1 is plain simhash-doc/1. The injected ads have 13 to 17 tokens, so the ad column jumps "
        "once N passes their length: an artefact of the test data, not a property of real ads.\n",
        file=out,
    )
    print(
        "| extractor | N | coverage | " + " | ".join(KINDS) + " | F1 | min unrelated | false pairs @10M bb |",
        file=out,
    )
    print("|---|---|---|" + "---|" * len(KINDS) + "---|---|---|", file=out)
    related_ids = [tuple(pair) for pair in related]
    swept = (d_name, "trafilatura-precision", REFERENCE_EXTRACTOR)
    for name in dict.fromkeys(n for n in swept if n in names):
        for n_min in (1, 5, 8, 10, 12, 15, 20):
            prints = {key: Print(*simhash_lines(t.get(name) or "", n_min)) for key, t in texts.items()}
            ev = evaluate(prints, positives, negatives, d_min_i)
            eligible = [p for p in pages if prints[p.id].count >= max(d_min_i, 1)]
            hist, _ = all_pairs_histogram(prints[p.id].value for p in eligible)
            ids = {p.id for p in eligible}
            for a, b in related_ids:
                if a in ids and b in ids:
                    hist[(prints[a].value ^ prints[b].value).bit_count()] -= 1
            recalls = " | ".join(f"{ev['per_k'][3]['kinds'][kind].recall:.3f}" for kind in KINDS)
            print(
                f"| {name} | {n_min} | {len(eligible) / len(pages):.1%} | {recalls} "
                f"| {ev['per_k'][3]['all'].f1:.4f} | {int(np.nonzero(hist)[0][0])} "
                f"| {fmt_count(expected_false_pairs(beta_binomial_cdf(hist, 3)))} |",
                file=out,
            )

    # 8. Extraction speed, side by side (one process, the same pages)
    if args.time_pages:
        sample = random.Random(f"timing:{args.seed}").sample(pages, min(args.time_pages, len(pages)))
        htmls = [p.html() for p in sample]
        print(f"\n## Extraction speed ({len(sample)} pages, one process, same pages for all)\n", file=out)
        print(f"| extractor | ms per page | relative to {REFERENCE_EXTRACTOR} |", file=out)
        print("|---|---|---|", file=out)
        timings = {}
        for name in names:
            started = time.perf_counter()
            for html in htmls:
                EXTRACTORS[name](html)
            timings[name] = (time.perf_counter() - started) / len(htmls) * 1000
        for name, ms in timings.items():
            ratio = ms / timings[REFERENCE_EXTRACTOR] if REFERENCE_EXTRACTOR in timings else float("nan")
            print(f"| {name} | {ms:.1f} | {ratio:.2f} |", file=out)

    # 9. Verified decisions (the shipped default rule): bench/quality_verified.py
    if d_name in names:
        print(file=out)
        summary["verified"] = report_verified(
            [p.id for p in pages], texts, positives, negatives, related, d_name, out
        )

    # machine-readable summary
    for (name, feat), res in results.items():
        summary["configs"][f"{name}/{feat}"] = {
            str(m): {
                "f1": {k: res["eval"][m]["per_k"][k]["all"].f1 for k in KS},
                "same_site_fp": {k: res["eval"][m]["per_k"][k]["fp"]["same-site"] for k in KS},
            }
            for m in MIN_TOKENS
        } | {"unrelated": {str(m): v for m, v in res["unrelated"].items()}}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(summary, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
