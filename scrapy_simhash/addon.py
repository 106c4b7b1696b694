"""The Scrapy add-on: ``ADDONS = {"scrapy_simhash.Addon": 500}`` enables everything.

It installs the downloader middleware (543), the item-stamping spider
middleware, the item pipeline and, when ``SIMHASH_WARC_ENABLED`` is true, the
WARC writer, and sets the ``SIMHASH_*`` defaults at add-on priority, so
project settings still win. The report extension is always installed; it is
not configured unless ``SIMHASH_REPORT`` names a file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .settings import DEFAULTS

if TYPE_CHECKING:
    from scrapy.settings import Settings

DOWNLOADER_MIDDLEWARE = "scrapy_simhash.middleware.SimhashMiddleware"
SPIDER_MIDDLEWARE = "scrapy_simhash.spidermiddleware.SimhashItemMiddleware"
PIPELINE = "scrapy_simhash.pipeline.SimhashPipeline"
WARC_EXTENSION = "scrapy_simhash.warc.crawl.WarcWriterExtension"
REPORT_EXTENSION = "scrapy_simhash.report_extension.SimhashReportExtension"


class Addon:
    """Scrapy add-on for scrapy-simhash."""

    def update_settings(self, settings: Settings) -> None:
        for name, value in DEFAULTS.items():
            settings.set(name, value, priority="addon")
        settings["DOWNLOADER_MIDDLEWARES"][DOWNLOADER_MIDDLEWARE] = 543
        settings["SPIDER_MIDDLEWARES"][SPIDER_MIDDLEWARE] = 800
        settings["ITEM_PIPELINES"][PIPELINE] = 300
        if settings.getbool("SIMHASH_WARC_ENABLED"):
            settings["EXTENSIONS"][WARC_EXTENSION] = 500
        settings["EXTENSIONS"][REPORT_EXTENSION] = 510
