"""Main text with Resiliparse: a lexbor HTML parser and main-content heuristics in C++.

About seven times cheaper in CPU than trafilatura in fast mode on the corpus's real pages, at a
lower extraction quality (``bench/extract.py``, docs/quality.md). Configured for fingerprints of
what a reader reads:

- ``main_content=True``: navigation, headers, footers and sidebars are dropped by Resiliparse's
  own rules (class and id names, link density);
- alt texts, link targets, form fields and ``<noscript>`` content are left out: they are not the
  article, and they change with the site's markup rather than with the text;
- comment sections and post metadata (bylines, dates) are left out: reader comments change over time,
  the article does not (trafilatura's configuration leaves comments out too). Resiliparse includes
  both by default; leaving them out raised token F1 against the corpus's ground truth;
- picture captions and credits (elements whose class names a ``caption`` or a ``credit``) are left out:
  Resiliparse keeps them, trafilatura and the corpus's ground truth do not, and a photo's caption is not
  the article (token F1 on scrapinghub-aeb's pages 0.941 -> 0.950, docs/quality.md);
- the page's headline (``h1``) is left out: it is the page's title, not its text (trafilatura's text and
  the corpus's ground truth leave it out too). A page whose ``h1`` swallows its article (an unclosed tag)
  then has little text, and the cascade hands it to trafilatura.

The parser never sees bytes: decoding happens once in :mod:`.base`, as for every extractor.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

from .base import Extractor

CAPTIONS = ("[class*=caption i]", "[class*=credit i]")
"""CSS selectors of pictures' captions and credits (``wp-caption-text``, ``InlineImage-imageEmbedCredit``)."""


@dataclass(frozen=True)
class ResiliparseExtractor(Extractor):
    """Resiliparse's ``extract_plain_text`` on the main content only."""

    name: ClassVar[str] = "resiliparse"

    main_content: bool = True
    preserve_formatting: bool = True
    comments: bool = False
    post_meta: bool = False
    captions: bool = False
    headline: bool = False

    def __post_init__(self) -> None:
        # Without the package every page would fail with ``extractor_error``: refuse at configuration.
        try:
            import resiliparse.extract.html2text  # noqa: F401
        except ImportError as exc:
            needs = "the resiliparse extractor needs the resiliparse package"
            raise ImportError(f"{needs} (a dependency of scrapy-simhash): pip install resiliparse") from exc

    @cached_property
    def identity(self) -> str:
        from importlib.metadata import version

        options = [
            f"main={int(self.main_content)}",
            "alt=0",
            "links=0",
            "forms=0",
            "noscript=0",
            f"format={int(self.preserve_formatting)}",
            f"comments={int(self.comments)}",
            f"meta={int(self.post_meta)}",
            f"captions={int(self.captions)}",
            f"h1={int(self.headline)}",
        ]
        return f"resiliparse/{version('resiliparse')};" + ";".join(options)

    @cached_property
    def _skipped(self) -> tuple[str, ...]:
        """The CSS selectors of what is left out besides Resiliparse's own rules."""
        return (() if self.captions else CAPTIONS) + (() if self.headline else ("h1",))

    def main_text(self, html: str, url: str | None) -> str | None:
        from resiliparse.extract.html2text import extract_plain_text
        from resiliparse.parse.html import HTMLTree

        text = extract_plain_text(
            HTMLTree.parse(html),
            preserve_formatting=self.preserve_formatting,
            main_content=self.main_content,
            alt_texts=False,
            links=False,
            form_fields=False,
            noscript=False,
            comments=self.comments,
            post_meta=self.post_meta,
            skip_elements=self._skipped or None,
        )
        return text or None
