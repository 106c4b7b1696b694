"""Crawl speed with scrapy-simhash, side by side in one run, on a generated local site.

(a) bare crawl (SIMHASH_ENABLED = False);
(b) extraction inline in the crawling process (SIMHASH_WORKERS = 0);
(c) the middleware with its process pool (SIMHASH_WORKERS default: the CPU count);
(d) the middleware inline with extraction replaced by a fixed text: what the
    middleware costs beyond extraction (hashing, index, bookkeeping).

Run: python bench/crawl.py [--pages 2000] [--concurrency 16]
Goals on 2 cores: (c) >= 1.5x (b) in pages/s; ((d) - (a)) / (c) <= 10% of the crawl's time.
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
    env = dict(os.environ, PYTHONPATH=str(REPO / "bench"))
    subprocess.run(command, cwd=workdir, env=env, check=True, capture_output=True, timeout=1800)
    return json.loads(stats_path.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    site = site_of(args.pages)
    common = {"LOG_LEVEL": "WARNING", "CONCURRENT_REQUESTS": args.concurrency, "HTTPERROR_ALLOW_ALL": True}
    runs = {
        "a bare": {"SIMHASH_ENABLED": False},
        "b inline": {"SIMHASH_WORKERS": 0},
        "c pool": {},
        "d no extraction": {"SIMHASH_WORKERS": 0, "SIMHASH_FINGERPRINT_FUNCTION": "_crawl_fake.fingerprint"},
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
    own = (results["d no extraction"][1] - results["a bare"][1]) / results["c pool"][1]
    print(
        f"middleware's own cost beyond extraction ((d)-(a))/(c): {own:.1%} of the crawl's time (goal <= 10%)"
    )


if __name__ == "__main__":
    main()
