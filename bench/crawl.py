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

Run: python bench/crawl.py [--pages 2000] [--concurrency 16]
Goals on 2 cores: (c) >= 1.5x (b) in pages/s; ((d) - (a)) / (c) <= 10% of the crawl's time;
(c) verified within 10 % of (e) simhash mode in pages/s.
"""

from __future__ import annotations

import argparse
import json
import os
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
    args = parser.parse_args()
    site = site_of(args.pages) if args.synthetic else corpus_site(args.pages)
    # depth 2: front page, lists, pages (real pages link to paths this site does not have)
    common = {"LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": args.concurrency, "DEPTH_LIMIT": 2}
    runs = {
        "a bare": {"SIMHASH_ENABLED": False},
        "b inline": {"SIMHASH_WORKERS": 0},
        "c pool": {},
        "d no extraction": {"SIMHASH_WORKERS": 0, "SIMHASH_FINGERPRINT_FUNCTION": "_crawl_fake.fingerprint"},
        "e pool, simhash": {"SIMHASH_MODE": "simhash"},
    }
    print(f"site: {len(site)} pages; {os.cpu_count()} CPUs; concurrency {args.concurrency}")
    results = {}
    with demo_site.serve(site) as base, tempfile.TemporaryDirectory() as tmp:
        for name, extra in runs.items():
            workdir = Path(tmp) / name.replace(" ", "_")
            workdir.mkdir()
            stats = crawl(base, {**common, "SIMHASH_INDEX": str(workdir / "index"), **extra}, workdir)
            pages = stats.get("response_received_count", 0)
            seconds = float(stats["elapsed_time_seconds"])
            results[name] = (pages, seconds)
            print(
                f"({name:<16}) {pages:>5} pages in {seconds:7.2f} s = {pages / seconds:7.1f} pages/s; "
                f"fingerprinted {stats.get('simhash/computed', 0)}, "
                f"near-duplicates {stats.get('simhash/near_duplicate', 0)}"
            )
    rate = {name: pages / seconds for name, (pages, seconds) in results.items()}
    print(f"(c)/(b) pool vs inline: {rate['c pool'] / rate['b inline']:.2f}x (goal >= 1.5x)")
    print(
        f"(c)/(e) verified vs simhash mode: {rate['c pool'] / rate['e pool, simhash']:.2f}x "
        "(goal >= 0.90x; a single run on a shared machine: repeat it)"
    )
    own = (results["d no extraction"][1] - results["a bare"][1]) / results["c pool"][1]
    print(
        f"middleware's own cost beyond extraction ((d)-(a))/(c): {own:.1%} of the crawl's time (goal <= 10%)"
    )


if __name__ == "__main__":
    main()
