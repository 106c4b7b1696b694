"""Text to tokens, exactly as simhash-doc/1 defines them (``shared/spec``).

1. NFC, then ``str.casefold()``.
2. Runs of L, M (Mn Mc Me), Nd and Pc characters; anything else separates runs.
3. A run without a letter is dropped.
4. Inside a run, stretches of Han, Hiragana, Katakana, Thai, Lao, Khmer and
   Myanmar characters (the Unicode *Script* property, not Script_Extensions)
   become overlapping character bigrams; what lies around them is a token of
   its own if it contains a letter.

Every Unicode property above is that of Unicode 15.0 (``pinned_unicode``), whatever the
Python or `regex` version: a code point Unicode 15.0 does not assign separates runs and
is left as it is by NFC and case folding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .pinned_unicode import (
    ASTRAL,
    CLASS_LETTER,
    CLASS_RUN,
    CLASS_UNSPACED,
    UNICODE_VERSION,
    ClassPatterns,
    astral_chars,
    class_ranges,
    class_table,
    normalize,
)

__all__ = [
    "CLASS_LETTER",
    "CLASS_RUN",
    "CLASS_UNSPACED",
    "UNICODE_VERSION",
    "class_table",
    "normalize",
    "shingles",
    "tokens",
]


@dataclass(frozen=True)
class _Patterns:
    run: re.Pattern[str]
    letter: re.Pattern[str]
    unspaced: re.Pattern[str]


def _patterns(full: bool) -> _Patterns:
    """Run, letter and unspaced-stretch patterns: exact on any text (``full``) or on BMP-only text."""

    def pattern(flag: int, repeat: str) -> re.Pattern[str]:
        patterns = ClassPatterns.of(class_ranges(flag), repeat)
        found = patterns.full if full else patterns.bmp
        assert found is not None  # every class has code points in the BMP
        return found

    return _Patterns(pattern(CLASS_RUN, "+"), pattern(CLASS_LETTER, ""), pattern(CLASS_UNSPACED, "+"))


_BMP = _patterns(full=False)
_ALL = _patterns(full=True)


def _split_unspaced(run: str, out: list[str], patterns: _Patterns) -> None:
    """Append the tokens of a run that contains unspaced-script characters."""
    start = 0
    for stretch in patterns.unspaced.finditer(run):
        before = run[start : stretch.start()]
        if before and patterns.letter.search(before):
            out.append(before)
        chars = stretch.group()
        if len(chars) == 1:
            out.append(chars)
        else:
            out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        start = stretch.end()
    rest = run[start:]
    if rest and patterns.letter.search(rest):
        out.append(rest)


def tokens(text: str) -> list[str]:
    """The tokens of ``text`` in text order, repeats included."""
    text = normalize(text)
    patterns = _BMP
    astral = astral_chars(text)
    if astral:
        table = class_table()
        if any(table[ord(ch)] for ch in astral):
            patterns = _ALL
        else:  # separators all (emoji, most often): spaces for the patterns, and tokens stay the same
            text = ASTRAL.sub(" ", text)
    runs = patterns.run.findall(text)
    # An ASCII run of letters settles the common case without a regex call (str.isalpha
    # alone would ask this Python's Unicode version, not the pinned one).
    letter = patterns.letter.search
    words = [run for run in runs if (run.isascii() and run.isalpha()) or letter(run)]
    if not patterns.unspaced.search(text):
        return words
    out: list[str] = []
    for word in words:
        if patterns.unspaced.search(word):
            _split_unspaced(word, out, patterns)
        else:
            out.append(word)
    return out


def shingles(token_list: list[str], n: int) -> list[str]:
    """Word n-grams (``n`` consecutive tokens joined by one space).

    A text with fewer than ``n`` tokens yields its tokens as one shingle, so a
    short text still has a fingerprint.
    """
    if n < 1:
        raise ValueError(f"shingle size must be at least 1, got {n}")
    if n == 1:
        return list(token_list)
    if len(token_list) < n:
        return [" ".join(token_list)] if token_list else []
    return [" ".join(token_list[i : i + n]) for i in range(len(token_list) - n + 1)]
