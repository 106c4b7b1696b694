"""The Scrapy add-on: ``ADDONS = {"scrapy_simhash.Addon": 500}`` enables everything.

It installs the downloader middleware (543), the item-stamping spider
middleware, the item pipeline and, when ``SIMHASH_WARC_ENABLED`` is true, the
WARC writer, and sets the ``SIMHASH_*`` defaults at add-on priority, so
project settings still win. The report extension is always installed; it is
not configured unless ``SIMHASH_REPORT`` names a file.

Two Scrapy settings change too, so that one hostile page cannot take the crawl's memory:
``DOWNLOAD_MAXSIZE`` becomes 16 MiB (or twice ``SIMHASH_MAX_BODY_SIZE``, when that is larger)
instead of Scrapy's 1 GiB, at add-on priority (a value the project sets wins), and Scrapy's
HttpCompressionMiddleware is replaced by a subclass that counts the pages it drops for size
(:mod:`scrapy_simhash.compression`), unless the project configures that middleware itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .settings import DEFAULTS

if TYPE_CHECKING:
    from scrapy.settings import Settings

DOWNLOADER_MIDDLEWARE = "scrapy_simhash.middleware.SimhashMiddleware"
SPIDER_MIDDLEWARE = "scrapy_simhash.spidermiddleware.SimhashItemMiddleware"
PIPELINE = "scrapy_simhash.pipeline.SimhashPipeline"
WARC_EXTENSION = "scrapy_simhash.warc.write.crawl.WarcWriterExtension"
REPORT_EXTENSION = "scrapy_simhash.report_extension.SimhashReportExtension"
SCRAPY_COMPRESSION = "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware"
COUNTING_COMPRESSION = "scrapy_simhash.compression.SizeCountingHttpCompressionMiddleware"

DOWNLOAD_MAXSIZE = 16 * 1024 * 1024
"""The add-on's DOWNLOAD_MAXSIZE (at least; twice SIMHASH_MAX_BODY_SIZE when that is larger): with
Scrapy's 1 GiB a 2 MB gzip bomb took a crawl to 1.1 GB of memory before it was dropped; with 16 MiB
the crawl stayed at 119 MB. Pages are fingerprinted up to SIMHASH_MAX_BODY_SIZE (8 MiB) anyway."""


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
        self._bound_download_size(settings)

    @staticmethod
    def _bound_download_size(settings: Settings) -> None:
        """A bounded DOWNLOAD_MAXSIZE (the project's own value wins), and the pages that Scrapy's
        decompression drops for it counted."""
        bound = max(DOWNLOAD_MAXSIZE, 2 * settings.getint("SIMHASH_MAX_BODY_SIZE"))
        settings.set("DOWNLOAD_MAXSIZE", bound, priority="addon")
        middlewares = settings["DOWNLOADER_MIDDLEWARES"]
        priority = settings["DOWNLOADER_MIDDLEWARES_BASE"].get(SCRAPY_COMPRESSION)
        configured = any(_name(key) == SCRAPY_COMPRESSION for key in middlewares)
        if priority is not None and not configured:
            middlewares[SCRAPY_COMPRESSION] = None
            middlewares[COUNTING_COMPRESSION] = priority


def _name(component: object) -> str:
    """A component's import path, whether the setting names it or holds the class."""
    if isinstance(component, str):
        return component
    return f"{getattr(component, '__module__', '')}.{getattr(component, '__qualname__', '')}"
