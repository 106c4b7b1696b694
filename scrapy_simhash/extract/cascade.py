"""Resiliparse first, trafilatura only where Resiliparse finds (almost) nothing.

Resiliparse costs about a seventh of trafilatura's CPU a page but finds no main text, or only a few
lines of it, on some pages where trafilatura finds the article (about 3 % of the corpus's pages). This
extractor asks Resiliparse first and hands the page to trafilatura only when Resiliparse's text has fewer
than :data:`MIN_WORDS` words: most pages pay Resiliparse's price, and the pages it cannot read still get
a text. The choice depends on the page's own text only, so the same bytes always take the same path.

Measured against the two alone in docs/quality.md ("The default", "Where the choice stands"): at about a
third of trafilatura's CPU it catches more moved articles (``template``) than either, and extracts as well as
trafilatura on every source of the corpus; it is the default extractor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, ClassVar

from .base import Extractor
from .identity import parse_description
from .resiliparse import ResiliparseExtractor
from .trafilatura import TrafilaturaExtractor

if TYPE_CHECKING:
    from lxml import etree

MIN_WORDS = 50
"""Resiliparse's text with fewer words than this goes to trafilatura: below it Resiliparse has most often
kept a heading or a teaser and missed the article (``bench/extract.py``'s ``no text`` and goose3 recall).
At 100, 7.1 % of the corpus's pages paid for both extractors; at 50, 3.2 %: CPU 0.37x -> 0.33x of
trafilatura's, the same detection (docs/quality.md, "Fewer pages to trafilatura")."""

_WORD = re.compile(r"\w+")


def has_words(text: str, count: int) -> bool:
    """``text`` holds at least ``count`` words (runs of letters and digits); stops counting there."""
    for seen, _ in enumerate(_WORD.finditer(text), 1):
        if seen >= count:
            return True
    return count <= 0


@dataclass(frozen=True)
class ResiliparseTrafilaturaExtractor(Extractor):
    """Resiliparse's main text; trafilatura's where Resiliparse's has fewer than ``min_words`` words."""

    name: ClassVar[str] = "resiliparse+trafilatura"

    min_words: int = MIN_WORDS
    fast: ResiliparseExtractor = field(default_factory=lambda: ResiliparseExtractor(drop_boilerplate=False))
    slow: TrafilaturaExtractor = field(default_factory=lambda: TrafilaturaExtractor(drop_boilerplate=False))

    @cached_property
    def identity(self) -> str:
        """``resiliparse+trafilatura/<resiliparse version>+<trafilatura version>;min_words=N;fast.*;slow.*``:
        both libraries' versions (a new one of either is a warning) and both configurations."""
        fast, slow = parse_description(self.fast.identity), parse_description(self.slow.identity)
        options = [
            f"min_words={self.min_words}",
            *(f"fast.{key}={value}" for key, value in fast.options),
            *(f"slow.{key}={value}" for key, value in slow.options),
        ]
        return f"{self.name}/{fast.version}+{slow.version};" + ";".join(options)

    def main_text(self, html: str, url: str | None) -> str | None:
        return self.main_text_and_tree(html, url)[0]

    def main_text_and_tree(self, html: str, url: str | None) -> tuple[str | None, etree._Element | None]:
        """Resiliparse's text when it is long enough (no lxml tree: the template step parses the page),
        else trafilatura's text and its tree."""
        text = self.fast.main_text(html, url)
        if text and has_words(text, self.min_words):
            return text, None
        return self.slow.main_text_and_tree(html, url)
