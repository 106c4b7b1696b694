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
import re
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
    if importlib.util.find_spec("scrapy_simhash.warc.write.crawl") is not None:
        settings.update({"SIMHASH_WARC_ENABLED": True, "SIMHASH_WARC_DIR": str(out / "warc")})

    pages = demo_site.build_site(args.articles)
    with demo_site.serve(pages) as base:
        print(f"Serving {len(pages)} pages at {base}/ and crawling them with scrapy-simhash ...")
        stats = crawl(base + "/", settings, str(out / "stats.json"))

    items = [json.loads(line) for line in items_path.read_text().splitlines()]
    base_len = len(base)
    rows = sorted(items, key=lambda i: i["url"])
    width = max([len("page"), *(len(item["url"]) - base_len for item in rows)])
    print(f"\n{'page':<{width}} {'simhash':<14} {'similarity':>10} {'bits':>4}  near-duplicate of")
    for item in rows:
        original = (item.get("near_duplicate_of") or "")[base_len:]
        similarity, bits = _verdict(item)
        print(
            f"{item['url'][base_len:]:<{width}} {item.get('simhash') or '-':<14} {similarity:>10} {bits:>4}  "
            f"{original}"
        )
    print(_rows_note(rows, len(pages), base_len))
    print(_legend(rows, base_len))
    print(
        f"\n{stats.get('simhash/computed', 0)} pages fingerprinted, {stats.get('simhash/unique', 0)} unique, "
        f"{stats.get('simhash/near_duplicate', 0)} near-duplicates; "
        f"skipped: { {k.split('/')[-1]: v for k, v in stats.items() if k.startswith('simhash/skipped/')} }"
    )
    print(
        f"Output in {out}/ (items.jsonl, stats.json, index/"
        + (", warc/)" if "SIMHASH_WARC_DIR" in settings else ")")
    )


def _verdict(item: dict) -> tuple[str, str]:
    """The similarity (as a percentage) and distance columns of a near-duplicate's row."""
    if not item.get("near_duplicate_of"):
        return "", ""
    similarity, bits = item.get("near_duplicate_similarity"), item.get("near_duplicate_distance")
    shown = "simhash" if similarity is None else f"{similarity:.0%}"  # decided by simhash alone
    return shown, "" if bits is None else str(bits)


def _legend(rows: list[dict], base_len: int) -> str:
    """What the planted near-duplicates are, and how the verified rule judged them."""
    by_url = {row["url"][base_len:]: row for row in rows}
    caught = {
        kind: sum(1 for path, row in by_url.items() if f"-{kind}." in path and row.get("near_duplicate_of"))
        for kind in ("corrected", "comments")
    }
    confused = [  # a page tagged as a near-duplicate of another article
        path
        for path, row in by_url.items()
        if row.get("near_duplicate_of") and _story(path) != _story(row["near_duplicate_of"])
    ]
    return (
        f"\n-corrected pages have one sentence rewritten ({caught['corrected']} caught), -comments pages "
        f"have readers' comments appended ({caught['comments']} caught): their simhashes are more than 3 "
        'bits off, so simhash alone misses them; the verified rule (SIMHASH_MODE = "verified", the default) '
        "compares their minhash sketches and shows their similarity. Different articles share one "
        "template: " + ("none is a near-duplicate of another." if not confused else f"{confused} matched!")
    )


def _story(url: str) -> str | None:
    found = re.search(r"story-\d+", url)
    return found[0] if found else None


def _rows_note(rows: list[dict], page_count: int, base_len: int) -> str:
    """Why the table may have more rows than the site has pages: URL variants are separate URLs."""
    variants = [row["url"][base_len:] for row in rows if "?" in row["url"]]
    if len(rows) <= page_count or not variants:
        return f"\n{len(rows)} rows: one per page crawled."
    return (
        f"\n{len(rows)} rows for the {page_count} pages the site serves: {len(variants)} link(s) add "
        f"tracking parameters (?utm_source=...) to an article's URL, e.g. {variants[0]}.\n"
        "A crawler fetches each such URL as a separate page, so each has its own row; scrapy-simhash "
        "then finds it is the same text as the URL without them (a near-duplicate at distance 0)."
    )


if __name__ == "__main__":
    main()
