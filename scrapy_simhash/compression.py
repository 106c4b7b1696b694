"""Scrapy's HttpCompressionMiddleware, counting the responses it drops for their decompressed size.

Scrapy stops decompressing a body once it passes ``DOWNLOAD_MAXSIZE`` and drops the response
(``IgnoreRequest``); with Scrapy's default of 1 GiB, a small gzip bomb still takes the crawler past
1 GB of memory first. The add-on therefore lowers ``DOWNLOAD_MAXSIZE`` when the project left it at
Scrapy's default (see :mod:`scrapy_simhash.addon`), and installs this subclass in the place of
Scrapy's middleware, because nothing downstream of it learns of the drop: no downloader middleware
sees the exception, and the spider gets no response. Each page dropped so is counted in
``simhash/skipped/too_large_decompressed`` and logged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.downloadermiddlewares.httpcompression import HttpCompressionMiddleware
from scrapy.exceptions import IgnoreRequest

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.http import Response

logger = logging.getLogger(__name__)

DROPPED_STAT = "simhash/skipped/too_large_decompressed"


class SizeCountingHttpCompressionMiddleware(HttpCompressionMiddleware):
    """Decompresses as Scrapy's middleware does; counts and logs the responses dropped for size."""

    def process_response(
        self, request: Request, response: Response, spider: Spider | None = None
    ) -> Request | Response:
        try:
            if spider is None:  # Scrapy 2.14+: no spider argument
                return super().process_response(request, response)
            return super().process_response(request, response, spider)
        except IgnoreRequest as dropped:  # the only reason it drops a response: the size limit
            if self.stats is not None:
                self.stats.inc_value(DROPPED_STAT)
            logger.info("simhash: %s dropped (%s): %s", request.url, DROPPED_STAT, dropped)
            raise
