"""Extractors by name: what ``SIMHASH_EXTRACTOR`` and ``--extractor`` accept."""

from __future__ import annotations

from typing import Any

from .base import Extractor
from .cascade import ResiliparseTrafilaturaExtractor
from .resiliparse import ResiliparseExtractor
from .trafilatura import TrafilaturaExtractor

_EXTRACTORS: dict[str, type[Extractor]] = {
    TrafilaturaExtractor.name: TrafilaturaExtractor,
    ResiliparseExtractor.name: ResiliparseExtractor,
    ResiliparseTrafilaturaExtractor.name: ResiliparseTrafilaturaExtractor,
}

# Chosen by measurement (docs/quality.md, "The default: resiliparse+trafilatura"): about a third of
# trafilatura's CPU a page, more moved articles found, token F1 within 0.01 of trafilatura's on every source.
DEFAULT_NAME = ResiliparseTrafilaturaExtractor.name

DEFAULT_EXTRACTOR: Extractor = ResiliparseTrafilaturaExtractor()


def extractor_names() -> tuple[str, ...]:
    """The registered names, the default first."""
    return (DEFAULT_NAME, *sorted(n for n in _EXTRACTORS if n != DEFAULT_NAME))


def extractor_for(description: str | None) -> Extractor | None:
    """The registered extractor a description (``name/version;options``) names, with its default
    options; None when it names none registered (callers then use the default)."""
    name = (description or "").split("/", 1)[0]
    if name not in _EXTRACTORS:
        return None
    try:
        return get_extractor(name)
    except ImportError:  # its library is not installed here
        return None


def get_extractor(name: str, **options: Any) -> Extractor:
    """The extractor registered as ``name``, configured with ``options``.

    An unknown name is a ``ValueError`` that lists the known ones (callers turn it into a
    message about their own setting or option).
    """
    try:
        cls = _EXTRACTORS[name]
    except KeyError:
        known = ", ".join(extractor_names())
        raise ValueError(f"unknown extractor {name!r} (known: {known})") from None
    return cls(**options)
