"""Opt-in cleanup before hashing: only the long lines of the main text count.

Main-text extractors emit one paragraph per line. The short lines are what changes when the same
article is served again: a dateline ("Updated March 3, 14:05"), a byline, "Advertisement", a photo
credit, a share bar, a heading the template adds. Dropping lines with fewer than ``min_line_tokens``
tokens before hashing made timestamp and byline changes almost always land within k = 3
(``docs/quality.md``) at no cost for unrelated pages.

This is a scheme of its own, ``simhash-doc/1+lines<N>``: its fingerprints are not comparable with
plain simhash-doc/1 ones, and every store records the label. simhash-doc/1 itself is unchanged.
"""

from __future__ import annotations

from . import SCHEME, simhash_features
from .tokenizer import tokens

DEFAULT_MIN_LINE_TOKENS = 8
"""Lines with fewer tokens than this are dropped (measured: 8 removes datelines and bylines, keeps
the paragraphs of the article)."""


def lines_scheme(min_line_tokens: int = DEFAULT_MIN_LINE_TOKENS) -> str:
    """Scheme label of the long-lines fingerprint: ``simhash-doc/1+lines8`` by default."""
    if min_line_tokens < 1:
        raise ValueError(f"min_line_tokens must be at least 1, got {min_line_tokens}")
    return f"{SCHEME}+lines{min_line_tokens}"


def long_line_tokens(text: str, min_line_tokens: int = DEFAULT_MIN_LINE_TOKENS) -> list[str]:
    """Tokens of the lines of ``text`` that have at least ``min_line_tokens`` tokens, in order."""
    if min_line_tokens < 1:
        raise ValueError(f"min_line_tokens must be at least 1, got {min_line_tokens}")
    out: list[str] = []
    for line in text.splitlines():
        found = tokens(line)
        if len(found) >= min_line_tokens:
            out.extend(found)
    return out


def simhash_lines(text: str, min_line_tokens: int = DEFAULT_MIN_LINE_TOKENS) -> tuple[int, int]:
    """``(fingerprint, token count)`` of the long lines of ``text``; ``(0, 0)`` when none is long enough.

    The count is that of the kept tokens, so a minimum-token rule applies to what is hashed.
    """
    kept = long_line_tokens(text, min_line_tokens)
    return (simhash_features(kept) if kept else 0), len(kept)


__all__ = ["DEFAULT_MIN_LINE_TOKENS", "lines_scheme", "long_line_tokens", "simhash_lines"]
