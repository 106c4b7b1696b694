"""Crawl speed with scrapy-simhash, side by side in one run, on a generated local site.

The site is made of the corpus's real pages (so extraction costs what it costs on
the web), each also reachable with tracking parameters until the site has
``--pages`` pages, listed 100 to a page; ``--synthetic`` uses the demo site instead.

(a) bare crawl (SIMHASH_ENABLED = False);
(b) extraction inline in the crawling process (SIMHASH_WORKERS = 0);
(c) the middleware with its process pool (SIMHASH_WORKERS default: the CPU count);
(d) the middleware inline with extraction replaced by a fixed text: what the
    middleware costs beyond extraction (hashing, index, bookkeeping);
(e) as (c) in simhash mode (SIMHASH_MODE = "simhash": no sketch, no sketch store), against which
    (c), the verified default, is compared.

Run: python bench/crawl.py [--pages 2000] [--concurrency 16] [--rounds 3] [--extractor NAME] [--only a,b,c]
Goals on 2 cores: (c) >= 80 % of (a) in pages/s; (c) >= 1.5x (b); ((d) - (a)) / (c) <= 10% of the
crawl's time; (c) verified within 10 % of (e) simhash mode in pages/s. (a), (b), (c) and (e) run
``--rounds`` times, interleaved, the order reversed each round (a shared machine's load drifts over
minutes); each ratio is the median of the rounds', printed with each round's and the crawling
process's CPU time a page in each mode (Scrapy, the middleware, the index: the workers run under the
forkserver, not as its children, so their extraction is not in it). ``--extractor`` sets
``SIMHASH_EXTRACTOR`` for every run; ``--only`` runs only the lettered crawls.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "example_project"))

import demo_site  # noqa: E402


def corpus_site(pages: int) -> dict[str, bytes]:
    """Real corpus pages at /page/N.html, then tracking-parameter copies, up to ``pages``."""
    import gzip

    from _corpus import corpus

    bodies = [gzip.decompress(p.read_bytes()) for p in sorted((corpus() / "pages").rglob("*.html.gz"))]
    paths = [f"/page/{n}.html" for n in range(len(bodies))]
    site: dict[str, bytes] = dict(zip(paths, bodies, strict=True))
    links = list(paths)
    links += [f"{path}?utm_source=feed&utm_medium=rss" for path in paths[: max(0, pages - len(paths))]]
    links = links[:pages]
    for start in range(0, len(links), 100):
        items = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links[start : start + 100])
        site[f"/list/{start // 100}.html"] = f"<html><body><ul>{items}</ul></body></html>".encode()
    lists = "".join(f'<a href="/list/{n}.html">{n}</a> ' for n in range((len(links) + 99) // 100))
    site["/"] = f"<html><body>{lists}</body></html>".encode()
    return site


def site_of(pages: int) -> dict[str, bytes]:
    """A demo site with about ``pages`` pages (articles, variants, section fronts)."""
    count = max(4, int(pages / 1.6))
    site = demo_site.build_site(count)
    while len(site) > pages and count > 4:
        count -= max(1, (len(site) - pages) // 2)
        site = demo_site.build_site(count)
    return site


def children_cpu() -> float:
    """CPU seconds of the finished child processes: the crawls (not their forkserver's workers)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def crawl(base: str, settings: dict, workdir: Path) -> dict:
    stats_path = workdir / "stats.json"
    command = [
        sys.executable,
        str(REPO / "example_project/run_crawl.py"),
        base + "/",
        "--stats",
        str(stats_path),
    ]
    for name, value in settings.items():
        command += ["-s", f"{name}={json.dumps(value)}"]
    env = dict(os.environ, PYTHONPATH=str(REPO / "bench"))  # for _crawl_fake
    subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True, timeout=1800)
    return json.loads(stats_path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--synthetic", action="store_true", help="the generated demo site instead of corpus pages"
    )
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (a), (b), (c) and (e), interleaved")
    parser.add_argument("--extractor", help="SIMHASH_EXTRACTOR of every run (default: the default extractor)")
    parser.add_argument("--only", help="the runs to make, by letter: a,b,c (default: all)")
    args = parser.parse_args()
    site = site_of(args.pages) if args.synthetic else corpus_site(args.pages)
    # depth 2: front page, lists, pages (real pages link to paths this site does not have)
    common = {"LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": args.concurrency, "DEPTH_LIMIT": 2}
    if args.extractor:
        common["SIMHASH_EXTRACTOR"] = args.extractor
    runs = {
        "a bare": {"SIMHASH_ENABLED": False},
        "b inline": {"SIMHASH_WORKERS": 0},
        "c pool": {},
        "d no extraction": {"SIMHASH_WORKERS": 0, "SIMHASH_FINGERPRINT_FUNCTION": "_crawl_fake.fingerprint"},
        "e pool, simhash": {"SIMHASH_MODE": "simhash"},
    }
    if args.only:
        letters = {letter.strip() for letter in args.only.split(",")}
        runs = {name: settings for name, settings in runs.items() if name[0] in letters}
    compared = tuple(name for name in ("a bare", "b inline", "c pool", "e pool, simhash") if name in runs)
    order = list(runs)
    for round_number in range(1, args.rounds):
        order += compared[::-1] if round_number % 2 else compared
    extractor = args.extractor or "the default"
    print(
        f"site: {len(site)} pages; {os.cpu_count()} CPUs; concurrency {args.concurrency}; "
        f"extractor {extractor}"
    )
    results: dict[str, list[tuple[int, float, float]]] = {name: [] for name in runs}
    with demo_site.serve(site) as base, tempfile.TemporaryDirectory() as tmp:
        for number, name in enumerate(order):
            workdir = Path(tmp) / f"{number}_{name.replace(' ', '_').replace(',', '')}"
            workdir.mkdir()
            cpu = children_cpu()
            stats = crawl(base, {**common, "SIMHASH_INDEX": str(workdir / "index"), **runs[name]}, workdir)
            cpu = children_cpu() - cpu
            pages = stats.get("response_received_count", 0)
            seconds = float(stats["elapsed_time_seconds"])
            results[name].append((pages, seconds, cpu))
            print(
                f"({name:<16}) {pages:>5} pages in {seconds:7.2f} s = {pages / seconds:7.1f} pages/s, "
                f"crawling process {cpu / max(1, pages) * 1e3:5.2f} ms CPU a page; "
                f"fingerprinted {stats.get('simhash/computed', 0)}, "
                f"near-duplicates {stats.get('simhash/near_duplicate', 0)}",
                flush=True,
            )
    summarise(results, runs)


def ratio(results: dict[str, list[tuple[int, float, float]]], a: str, b: str) -> tuple[float, list[float]]:
    """The median over rounds of (pages/s of ``a``) / (pages/s of ``b``), and each round's."""
    rounds = [(pa / sa) / (pb / sb) for (pa, sa, _), (pb, sb, _) in zip(results[a], results[b], strict=True)]
    return statistics.median(rounds), rounds


def summarise(results: dict[str, list[tuple[int, float, float]]], runs: dict[str, dict]) -> None:
    def line(a: str, b: str, what: str, goal: str) -> None:
        if a in runs and b in runs:
            median, rounds = ratio(results, a, b)
            each = ", ".join(f"{r:.2f}" for r in rounds)
            print(f"({a[0]})/({b[0]}) {what}: {median:.2f}x, median of {len(rounds)} rounds ({each}), {goal}")

    line("c pool", "a bare", "detection (pool) vs bare crawl", "goal >= 0.80x")
    line("b inline", "a bare", "detection (inline) vs bare crawl", "no goal")
    line("c pool", "b inline", "pool vs inline", "goal >= 1.5x")
    if "c pool" not in runs or "e pool, simhash" not in runs:
        return
    ratios = ratio(results, "c pool", "e pool, simhash")[1]
    compared = ("c pool", "e pool, simhash")
    cpu_page = {name: statistics.median(c / max(1, p) for p, _, c in results[name]) for name in compared}
    print(
        f"(c)/(e) verified vs simhash mode: {statistics.median(ratios):.2f}x, median of {len(ratios)} rounds "
        f"({', '.join(f'{r:.2f}' for r in ratios)}) (goal >= 0.90x); crawling process's CPU a page "
        f"{cpu_page['c pool'] * 1e3:.2f} vs {cpu_page['e pool, simhash'] * 1e3:.2f} ms "
        f"({cpu_page['c pool'] / cpu_page['e pool, simhash']:.2f}x)"
    )
    if not {"a bare", "c pool", "d no extraction"} <= set(runs):
        return
    seconds = {name: results[name][0][1] for name in runs}
    own = (seconds["d no extraction"] - seconds["a bare"]) / seconds["c pool"]
    print(
        f"middleware's own cost beyond extraction ((d)-(a))/(c): {own:.1%} of the crawl's time (goal <= 10%)"
    )


if __name__ == "__main__":
    main()
