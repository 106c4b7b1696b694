"""The crawl's ``SIMHASH_*`` configuration, or a clear refusal to start; stopping a crawl.

Why: a setting the crawl cannot honour (a bad value, an index built with another
``SIMHASH_DISTANCE``) must stop the crawl before its first page, with a non-zero exit status, or
detection is silently off. Scrapy gives a failed exit status only to a crawl that fails before its
spider opens, so such errors are raised from ``from_crawler``; raised as they are, they reach the
user at the end of a long traceback (asyncio's "Task exception was never retrieved"). Here they are
logged once, as one ERROR line naming the setting, and asyncio does not log them again.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, NoReturn

from scrapy.utils.defer import deferred_from_coro

from .settings import SimhashConfigError, SimhashSettings

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def crawl_settings(crawler: Crawler) -> SimhashSettings:
    """The crawler's ``SIMHASH_*`` settings; a wrong value refuses the crawl (:func:`refuse_to_start`)."""
    try:
        return SimhashSettings.from_settings(crawler.settings)
    except SimhashConfigError as exc:
        refuse_to_start(exc)
    except ValueError as exc:  # a value Scrapy's own getters refuse (getbool, getlist)
        refuse_to_start(SimhashConfigError(str(exc)))


def refuse_to_start(error: SimhashConfigError) -> NoReturn:
    """Log ``error`` as one line and raise it: the crawl fails to start (non-zero exit status)."""
    logger.error("simhash: %s. The crawl does not start.", error)
    _not_logged_again(error)
    raise error


def spider_name(spider: Spider | None, crawler: Crawler) -> str:
    """The name of the crawl's spider: handlers get ``spider=None`` from Scrapy 2.14 on."""
    spider = spider or crawler.spider
    assert spider is not None, "the spider is created before any component"
    return spider.name


def stop_crawl(crawler: Crawler, reason: str) -> None:
    """Close the crawler's spider with ``reason``, on any supported Scrapy (``close_spider`` is
    deprecated from 2.14; 2.13 never ends a crawl closed before its engine started, so it waits)."""
    engine, spider = getattr(crawler, "engine", None), getattr(crawler, "spider", None)
    if engine is None or spider is None:
        return
    close_async = getattr(engine, "close_spider_async", None)
    if close_async is not None:
        deferred_from_coro(close_async(reason=reason))
    elif not engine.running:
        from twisted.internet import reactor

        clock: Any = reactor  # the installed reactor (typed as the module that holds it)
        clock.callLater(0, stop_crawl, crawler, reason)
    else:
        engine.close_spider(spider, reason)


def _not_logged_again(error: BaseException) -> None:
    """Mark ``error`` as seen when it ends the crawl's asyncio task, so asyncio does not log it again
    with its traceback; any other exception ending that task is still reported as asyncio would.

    On a Deferred-based crawl (no current task) Twisted logs the failure as before."""
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running event loop
        return
    if task is None:
        return

    def seen(done: asyncio.Task[Any]) -> None:
        if done.cancelled():
            return
        exc = done.exception()  # retrieved: asyncio no longer logs it when the task is collected
        if exc is not None and exc is not error:
            done.get_loop().call_exception_handler(
                {"message": "Task exception was never retrieved", "exception": exc, "future": done}
            )

    task.add_done_callback(seen)
