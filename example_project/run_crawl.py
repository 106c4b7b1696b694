"""Run the demo spider once: ``python run_crawl.py START_URL [-s NAME=VALUE ...] [--stats F] [--items F]``.

Used by the demo, the end-to-end tests and the crawl benchmark; each call is
a fresh process, because a Twisted reactor cannot be restarted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def crawl(
    start_url: str, overrides: dict[str, Any], stats_path: str | None = None, **spider_args: Any
) -> dict[str, Any]:
    """Crawl the site at ``start_url`` with the project settings plus ``overrides``; returns the stats."""
    sys.path.insert(0, str(HERE))
    os.environ.setdefault("SCRAPY_SETTINGS_MODULE", "demo_crawler.settings")
    from scrapy import signals
    from scrapy.crawler import CrawlerProcess
    from scrapy.utils.project import get_project_settings

    settings = get_project_settings()
    for name, value in overrides.items():
        settings.set(name, value, priority="cmdline")
    process = CrawlerProcess(settings)
    crawler = process.create_crawler("site")
    stats: dict[str, Any] = {}

    def on_closed(spider: Any, reason: str) -> None:
        stats["finish_reason"] = reason

    crawler.signals.connect(on_closed, signal=signals.spider_closed)
    process.crawl(crawler, start_url=start_url, **spider_args)
    process.start()
    # Read after the crawl: the components' closing stats and elapsed_time_seconds are in by then.
    stats.update(crawler.stats.get_stats())
    if stats_path:
        Path(stats_path).write_text(json.dumps(stats, default=str, indent=1, sort_keys=True))
    return stats


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("start_url")
    parser.add_argument(
        "-s",
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a Scrapy setting (VALUE parsed as JSON when it is JSON)",
    )
    parser.add_argument("--stats", help="write the crawl's stats here as JSON")
    parser.add_argument("--items", help="write the items here as JSON Lines")
    parser.add_argument(
        "-a", dest="spider_args", action="append", default=[], metavar="NAME=VALUE", help="a spider argument"
    )
    args = parser.parse_args()
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = _parse_value(value)
    if args.items:
        overrides["FEEDS"] = {args.items: {"format": "jsonlines", "overwrite": True}}
    spider_args = dict(item.partition("=")[::2] for item in args.spider_args)
    stats = crawl(args.start_url, overrides, args.stats, **spider_args)
    if "finish_reason" not in stats:
        sys.exit("run_crawl: the crawl did not run to its end (see the log above)")


if __name__ == "__main__":
    main()
