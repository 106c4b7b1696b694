"""SimhashItemMiddleware: stamps the items a page yields with that page's fingerprint.

Item pipelines never see the response an item came from; this spider
middleware does, and copies ``response.meta["simhash"]`` into each item as
``simhash`` (base32) and ``near_duplicate_of`` (URL of the original, or None),
where the item can hold those fields (dicts always; ``scrapy.Item`` and
dataclass items only when they declare them); and why, in
``near_duplicate_similarity`` (estimated Jaccard of the sketches, 0..1; None when
decided by simhash alone) and ``near_duplicate_distance`` (bits), where the item
holds those too (items declaring only the first two are stamped as before).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any

from itemadapter import ItemAdapter, is_item
from scrapy import Request

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from typing_extensions import Self

logger = logging.getLogger(__name__)

ITEM_FIELDS = ("simhash", "near_duplicate_of")
VERDICT_FIELDS = ("near_duplicate_similarity", "near_duplicate_distance")
"""Optional: set where the item can hold them, so items declared before they existed still work."""


def stamp(
    item: Any,
    simhash: str | None,
    near_duplicate_of: str | None,
    similarity: float | None = None,
    distance: int | None = None,
) -> bool:
    """Set the fields on ``item`` where it can hold them; False if it cannot hold the first two."""
    adapter = ItemAdapter(item)
    try:
        adapter["simhash"] = simhash
        adapter["near_duplicate_of"] = near_duplicate_of
    except KeyError:  # an Item or dataclass that does not declare the fields
        return False
    for name, value in zip(VERDICT_FIELDS, (similarity, distance), strict=True):
        with contextlib.suppress(KeyError):
            adapter[name] = value
    return True


class SimhashItemMiddleware:
    """Spider middleware: copy the response's fingerprint into the items it yields."""

    def __init__(self) -> None:
        self._warned: set[type] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Self:
        return cls()

    def _stamp(self, response: Response, element: Any) -> Any:
        if isinstance(element, Request) or not is_item(element):
            return element
        result = response.meta.get("simhash")
        if not result:
            return element
        original = result.get("duplicate_of") or {}
        stamped = stamp(
            element,
            result["simhash"],
            original.get("url"),
            original.get("similarity"),
            original.get("distance"),
        )
        if not stamped and type(element) not in self._warned:
            self._warned.add(type(element))
            logger.warning(
                "simhash: %s items do not declare the fields %s; they are not stamped",
                type(element).__name__,
                ", ".join(ITEM_FIELDS),
            )
        return element

    def process_spider_output(
        self, response: Response, result: Iterable[Any], spider: Spider | None = None
    ) -> Iterable[Any]:
        for element in result:
            yield self._stamp(response, element)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any], spider: Spider | None = None
    ) -> AsyncIterator[Any]:
        async for element in result:
            yield self._stamp(response, element)
