"""Test-only downloader middleware: split a crawl's URLs between processes, scrapy-redis style.

``PARTITION = "i/n"``: this process downloads the start page and the URLs whose CRC-32 is ``i`` modulo
``n``; the other processes download the rest. With a shared index, a page's original may have been
recorded by another process, which is what the multi-process end-to-end test needs.
"""

from __future__ import annotations

import zlib
from urllib.parse import urlsplit

from scrapy import Request, Spider
from scrapy.crawler import Crawler
from scrapy.exceptions import IgnoreRequest, NotConfigured


def share(url: str, n: int) -> int:
    """Which of ``n`` processes downloads ``url`` (the start page ``/``: all of them)."""
    return zlib.crc32(url.encode()) % n


class PartitionMiddleware:
    def __init__(self, part: int, parts: int) -> None:
        self.part, self.parts = part, parts

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> PartitionMiddleware:
        spec = crawler.settings.get("PARTITION")
        if not spec:
            raise NotConfigured("PARTITION not set")
        part, parts = (int(x) for x in str(spec).split("/"))
        return cls(part, parts)

    def process_request(self, request: Request, spider: Spider | None = None) -> None:
        parts = urlsplit(request.url)
        if share(request.url, self.parts) != self.part and not (parts.path == "/" and not parts.query):
            raise IgnoreRequest("another process's share")
