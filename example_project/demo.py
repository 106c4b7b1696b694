"""The demo, end to end: serve the demo site on 127.0.0.1, crawl it with
scrapy-simhash enabled, print which pages are near-duplicates of which, stop.

    make demo        (or: python example_project/demo.py [--out DIR])

Output goes to ``demo-output/``: the items (JSON Lines), the crawl's stats,
and the WARC files with the simhash metadata records when the WARC writer is
installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import shutil
from pathlib import Path

import demo_site
from run_crawl import crawl


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="demo-output", help="output directory (default: demo-output)")
    parser.add_argument("--articles", type=int, default=8)
    args = parser.parse_args()
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    items_path = out / "items.jsonl"
    settings = {
        "SIMHASH_INDEX": str(out / "index"),
        "FEEDS": {str(items_path): {"format": "jsonlines", "overwrite": True}},
        "LOG_LEVEL": "WARNING",
        # One page at a time, in link order, so that the original of each cluster is
        # the page listed first; a real crawl finds the same clusters in any order.
        "CONCURRENT_REQUESTS": 1,
        "DEPTH_PRIORITY": 1,
        "SCHEDULER_MEMORY_QUEUE": "scrapy.squeues.FifoMemoryQueue",
    }
    if importlib.util.find_spec("scrapy_simhash.warc.crawl") is not None:
        settings.update({"SIMHASH_WARC_ENABLED": True, "SIMHASH_WARC_DIR": str(out / "warc")})

    pages = demo_site.build_site(args.articles)
    with demo_site.serve(pages) as base:
        print(f"Serving {len(pages)} pages at {base}/ and crawling them with scrapy-simhash ...")
        stats = crawl(base + "/", settings, str(out / "stats.json"))

    items = [json.loads(line) for line in items_path.read_text().splitlines()]
    base_len = len(base)
    print(f"\n{'page':<58} {'simhash':<14} near-duplicate of")
    for item in sorted(items, key=lambda i: i["url"]):
        original = (item.get("near_duplicate_of") or "")[base_len:]
        print(f"{item['url'][base_len:]:<58} {item.get('simhash') or '-':<14} {original}")
    print(
        f"\n{stats.get('simhash/computed', 0)} pages fingerprinted, {stats.get('simhash/unique', 0)} unique, "
        f"{stats.get('simhash/near_duplicate', 0)} near-duplicates; "
        f"skipped: { {k.split('/')[-1]: v for k, v in stats.items() if k.startswith('simhash/skipped/')} }"
    )
    print(
        f"Output in {out}/ (items.jsonl, stats.json, index/"
        + (", warc/)" if "SIMHASH_WARC_DIR" in settings else ")")
    )


if __name__ == "__main__":
    main()
