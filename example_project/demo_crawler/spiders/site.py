"""SiteSpider: follows every link on the start URL's host and yields one item per HTML page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, start_url: str = "http://127.0.0.1:8000/", with_text: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start_url]
        # with_text=1: items carry the page's paragraphs, for SIMHASH_ITEM_FIELD = "text"
        self.with_text = bool(with_text)
        self.allowed_domains = [urlsplit(start_url).hostname or "127.0.0.1"]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if not isinstance(response, TextResponse):
            return
        item = {"url": response.url, "title": response.css("title::text").get(default="").strip()}
        if self.with_text:
            item["text"] = "\n".join(
                response.css("article p:not(.byline)::text, .story-body p::text").getall()
            )
        yield item
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)
