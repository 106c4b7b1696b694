"""Archives for the ``--keep`` tests: one story captured four times, so that each policy names another
copy the original, spread over two WARCs in an order none of the policies follows.

Built from a real corpus page's main text (see :mod:`verified_support`): a tracking-parameter copy
captured first, the canonical address, a print view with an extra paragraph (the longest text) and a
``fbclid`` copy captured last; plus an exact pair of another page captured at the same moment (a tie
only the URL breaks) and one unrelated page.
"""

from __future__ import annotations

from pathlib import Path

from verified_support import as_html, corpus_pages, write_warc

from scrapy_simhash.extract import DEFAULT_EXTRACTOR

STORY = "http://news.example/news/story.html"
EARLIEST = STORY + "?utm_source=newsletter&utm_medium=email"
LONGEST = "http://news.example/print/story.html?view=print&page=all"
LATEST = STORY + "?fbclid=IwAR0abcdefghijklmnop"
SHORTEST = STORY
TIED = ("http://news.example/b-other.html", "http://news.example/a-other.html")
EXPECTED = {"earliest": EARLIEST, "latest": LATEST, "longest": LONGEST, "shortest-url": SHORTEST}
"""The original each policy must choose in the story's cluster."""

EXTRA = (
    "Editor's note: this printable edition adds the full list of sources consulted, the names of the "
    "reporters who contributed interviews from the regional offices, and a short correction about the "
    "date of the council meeting that an earlier version of the article gave wrongly."
)


def keep_inputs(corpus: Path, base: Path) -> list[Path]:
    """first.warc.gz: the latest and the longest copy, one of the tied pair, an unrelated page;
    second.warc.gz: the earliest copy, the canonical one and the other of the tied pair."""
    pages = corpus_pages(corpus, 7)
    text = DEFAULT_EXTRACTOR(pages[6], None, None).text
    other = DEFAULT_EXTRACTOR(pages[1], None, None).text
    assert text is not None and other is not None
    story, longer = as_html(text), as_html(text + "\n" + EXTRA)
    first = [
        (LATEST, "2024-07-01T09:00:00Z", story),
        (LONGEST, "2024-02-01T09:00:00+01:00", longer),  # 08:00 UTC, still after the earliest
        (TIED[0], "2024-04-01T00:00:00Z", as_html(other)),
        ("http://news.example/unrelated.html", "2024-04-01T00:00:00Z", pages[2]),
    ]
    second = [
        (SHORTEST, "2024-03-01T09:00:00Z", story),
        (EARLIEST, "2024-02-01T07:59:59.5Z", story),
        (TIED[1], "2024-04-01T00:00:00.000Z", as_html(other)),
    ]
    return [write_warc(base / "first.warc.gz", first), write_warc(base / "second.warc.gz", second)]
