"""Main-text extractors side by side: CPU a page of ``fingerprint_page`` and extraction quality.

    .venv/bin/python bench/extract.py                       # every registered extractor, every page
    .venv/bin/python bench/extract.py --pages 60            # 60 seeded pages per source (quicker)
    .venv/bin/python bench/extract.py --extractors trafilatura,resiliparse
    .venv/bin/python bench/extract.py --extractors trafilatura,trafilatura-raw --baseline ../main

``--baseline`` measures another checkout's registered extractors in the same run (rows ``name@main``):
a change to extraction is measured before and after on the same pages, in the same process.

One run, one process, the same pages for every extractor: each page is fingerprinted by every
extractor in turn, starting with the next one on every page so that each goes first as often (bytes in,
as a crawl and ``tag`` do: decoding, extraction, tokens, simhash and sketch), timed with
``time.process_time`` (CPU, not wall-clock: other processes on the machine do not count), so the ratios
compare like with like. Quality is the extraction's against the corpus's
ground truth (``../shared/corpus/truth``, loaded by ``quality_pairs.load_pages``):

- scrapinghub-aeb, mozilla-readability, newspaper4k: the whole article text; token F1 (tokens as
  fingerprinted, counted with multiplicity), the mean over pages;
- trafilatura: snippets that must and must not be in the main text; F1 over the snippets, the
  measure of trafilatura's own evaluation (``with`` found: true positive, missing: false negative;
  ``without`` found: false positive);
- goose3: only the start of the article (often 25 to 300 characters): recall of its tokens only.

"overall" is the mean over every page with an F1 (all sources but goose3).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import random
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import corpus
from quality_pairs import Page, Truth, load_pages

from scrapy_simhash.extract import (
    Extractor,
    ResiliparseExtractor,
    TrafilaturaExtractor,
    extractor_names,
    get_extractor,
)
from scrapy_simhash.extract.cascade import ResiliparseTrafilaturaExtractor, has_words
from scrapy_simhash.fingerprint import tokens
from scrapy_simhash.page import fingerprint_page

REFERENCE = "trafilatura"
"""The extractor the ratios are taken against: trafilatura in fast mode, the default before this bench."""


@dataclass(frozen=True)
class TrafilaturaTwoParses(TrafilaturaExtractor):
    """trafilatura whose tree the template step does not reuse: the step parses the page a second time."""

    def main_text_and_tree(self, html: str, url: str | None) -> tuple[str | None, None]:
        return self.main_text(html, url), None


BENCH_ONLY: dict[str, Extractor] = {
    "trafilatura-full": TrafilaturaExtractor(fast=False),
    "trafilatura-precision": TrafilaturaExtractor(fast=False, favor_precision=True),
    # the library's defaults: comments, post metadata, captions and the headline kept
    "resiliparse-comments": ResiliparseExtractor(comments=True, post_meta=True, captions=True, headline=True),
    # captions and the headline kept (the configuration before they were left out)
    "resiliparse-h1-captions": ResiliparseExtractor(captions=True, headline=True),
    "resiliparse+trafilatura-h1-captions": ResiliparseTrafilaturaExtractor(
        fast=ResiliparseExtractor(drop_boilerplate=False, captions=True, headline=True)
    ),
    "resiliparse+trafilatura-300": ResiliparseTrafilaturaExtractor(min_words=300),
    # the cascade's threshold until 2026-11-27
    "resiliparse+trafilatura-100": ResiliparseTrafilaturaExtractor(min_words=100),
    # without the template step (scrapy_simhash/extract/boilerplate.py): what the step costs
    "trafilatura-raw": TrafilaturaExtractor(drop_boilerplate=False),
    "trafilatura-two-parses": TrafilaturaTwoParses(),  # what sharing trafilatura's parse saves
    "resiliparse-raw": ResiliparseExtractor(drop_boilerplate=False),
}
"""Configurations measured beside the registered extractors (never shipped under these names)."""


def baseline_extractors(checkout: Path, names: list[str]) -> dict[str, Extractor]:
    """The extractors registered as ``names`` in another checkout of the project, as ``name@<dir>``.

    Its ``scrapy_simhash/extract`` package is loaded under a name of its own beside this one (the package
    imports only its own modules), so both versions run in this process on the same pages.
    """
    package = checkout.resolve() / "scrapy_simhash" / "extract"
    alias = "baseline_extract"
    spec = importlib.util.spec_from_file_location(
        alias, package / "__init__.py", submodule_search_locations=[str(package)]
    )
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no scrapy_simhash/extract package under {checkout}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[alias] = module
    spec.loader.exec_module(module)
    known = module.extractor_names()
    return {
        f"{name}@{checkout.resolve().name}": module.get_extractor(base, **options)
        for name in names
        for base, options in [
            (name.removesuffix("-raw"), {"drop_boilerplate": False} if name.endswith("-raw") else {})
        ]
        if base in known
    }


def candidates() -> dict[str, Extractor]:
    """Every registered extractor by its name, then the bench-only configurations."""
    return {name: get_extractor(name) for name in extractor_names()} | BENCH_ONLY


def source_of(page: Page) -> str:
    return page.id.split("/", 1)[0]


@dataclass(frozen=True)
class Score:
    """One page's extraction against its ground truth (None where the truth cannot tell)."""

    precision: float | None
    recall: float
    f1: float | None


def _prf(tp: float, fp: float, fn: float) -> Score:
    precision = tp / (tp + fp) if tp + fp else (1.0 if not fn else 0.0)
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Score(precision, recall, f1)


def _flat(text: str) -> str:
    return " ".join(text.split()).casefold()


def score(text: str | None, truth: Truth) -> Score | None:
    """Token F1 (whole texts), snippet F1 (trafilatura's), prefix recall (goose3's), or None (no truth)."""
    text = text or ""
    if truth.with_ or truth.without:
        flat = _flat(text)
        found = sum(_flat(s) in flat for s in truth.with_)
        leaked = sum(_flat(s) in flat for s in truth.without)
        return _prf(found, leaked, len(truth.with_) - found)
    expected = Counter(tokens(truth.text or truth.prefix or ""))
    if not expected:
        return None
    got = Counter(tokens(text))
    common = sum((expected & got).values())
    if truth.text is None:  # a prefix: what follows it in the page is unknown, so only recall means anything
        return Score(None, common / sum(expected.values()), None)
    return _prf(common, sum(got.values()) - common, sum(expected.values()) - common)


@dataclass
class Measured:
    cpu: list[float] = field(default_factory=list)
    no_text: int = 0
    slow_path: int = 0
    """Pages a cascade handed to its slow extractor."""
    scores: dict[str, list[Score]] = field(default_factory=lambda: defaultdict(list))


def sample(pages: list[Page], per_source: int, seed: int) -> list[Page]:
    """``per_source`` seeded pages of each source that has ground truth (0: all of them)."""
    by_source: dict[str, list[Page]] = defaultdict(list)
    for page in pages:
        if page.truth is not None:
            by_source[source_of(page)].append(page)
    chosen: list[Page] = []
    for source, group in sorted(by_source.items()):
        rng = random.Random(f"extract:{seed}:{source}")
        chosen += group if not per_source or per_source >= len(group) else rng.sample(group, per_source)
    return chosen


def measure(pages: list[Page], extractors: dict[str, Extractor]) -> dict[str, Measured]:
    results = {name: Measured() for name in extractors}
    clock = time.process_time
    for done, page in enumerate(pages, 1):
        body = gzip.decompress(page.path.read_bytes())
        order = list(extractors.items())
        shift = done % len(order)  # each extractor first on as many pages: the first one pays for cold caches
        for name, extractor in order[shift:] + order[:shift]:
            started = clock()
            fingerprint_page(body, page.url, extractor=extractor)
            results[name].cpu.append(clock() - started)
            text = extractor(body, page.url).text  # the same text again, untimed, to score it
            results[name].no_text += text is None
            results[name].slow_path += takes_slow_path(extractor, body, page.url)
            result = score(text, page.truth) if page.truth else None
            if result is not None:
                results[name].scores[source_of(page)].append(result)
        if done % 100 == 0:
            print(f"  {done}/{len(pages)} pages", file=sys.stderr)
    return results


def takes_slow_path(extractor: Extractor, body: bytes, url: str | None) -> bool:
    """Whether the cascade ``extractor`` hands this page to trafilatura (False for any other extractor)."""
    if not isinstance(extractor, ResiliparseTrafilaturaExtractor):
        return False
    text = extractor.fast(body, url).text
    return not text or not has_words(text, extractor.min_words)


def _mean(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def report(results: dict[str, Measured], extractors: dict[str, Extractor], pages: int) -> str:
    reference = results.get(REFERENCE)
    ref_cpu = statistics.fmean(reference.cpu) if reference else None
    sources = sorted({s for m in results.values() for s in m.scores})
    lines = [f"## Extractors on {pages} corpus pages (one process, the same pages for all)", ""]
    lines += [
        "| extractor | CPU ms/page (mean) | median | vs trafilatura | no text | "
        + " | ".join(f"{s} F1" if s != "goose3" else "goose3 recall" for s in sources)
        + " | overall F1 |",
        "|---|---|---|---|---|" + "---|" * len(sources) + "---|",
    ]
    for name, m in results.items():
        cpu = statistics.fmean(m.cpu)
        cells = []
        for s in sources:
            scores = m.scores.get(s, [])
            cells.append(_fmt(_mean([x.recall if s == "goose3" else x.f1 for x in scores])))
        overall = _mean([x.f1 for s in sources for x in m.scores.get(s, []) if x.f1 is not None])
        ratio = f"{cpu / ref_cpu:.2f}x" if ref_cpu else "n/a"
        lines.append(
            f"| {name} | {cpu * 1e3:.2f} | {statistics.median(m.cpu) * 1e3:.2f} | {ratio} | {m.no_text} | "
            + " | ".join(cells)
            + f" | {_fmt(overall)} |"
        )
    for name, m in results.items():
        if isinstance(extractors[name], ResiliparseTrafilaturaExtractor):
            share = m.slow_path / len(m.cpu)
            lines += ["", f"{name}: {m.slow_path} of {len(m.cpu)} pages ({share:.1%}) took trafilatura"]
    lines += ["", "Pages per source: " + ", ".join(f"{s} {len(reference.scores[s])}" for s in sources)]
    lines += ["", "Descriptions:", ""]
    lines += [f"- {name}: `{extractor.description}`" for name, extractor in extractors.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=0, help="seeded pages per source (0: every page)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--extractors", default="", help="comma-separated names (default: all candidates)")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout (e.g. ../main): its registered extractors among --extractors, measured too",
    )
    args = parser.parse_args(argv)

    available = candidates()
    names = [n for n in args.extractors.split(",") if n] or list(available)
    unknown = [n for n in names if n not in available]
    if unknown:
        print(f"unknown extractor(s) {unknown}; available: {', '.join(available)}", file=sys.stderr)
        return 2
    if REFERENCE not in names:
        names.insert(0, REFERENCE)
    extractors = {n: available[n] for n in names}
    if args.baseline is not None:
        extractors |= baseline_extractors(args.baseline, names)
    pages = sample(load_pages(corpus()), args.pages, args.seed)
    print(f"{len(pages)} pages, {len(extractors)} extractors", file=sys.stderr)
    results = measure(pages, extractors)
    print(report(results, extractors, len(pages)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
