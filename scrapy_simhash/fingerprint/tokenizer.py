"""Text to tokens, exactly as simhash-doc/1 defines them (``shared/spec``).

1. NFC, then ``str.casefold()``.
2. Runs of L, M (Mn Mc Me), Nd and Pc characters; anything else separates runs.
3. A run without a letter is dropped.
4. Inside a run, stretches of Han, Hiragana, Katakana, Thai, Lao, Khmer and
   Myanmar characters (the Unicode *Script* property, not Script_Extensions)
   become overlapping character bigrams; what lies around them is a token of
   its own if it contains a letter.
"""

from __future__ import annotations

import functools
import unicodedata

import regex

_RUN = regex.compile(r"[\p{L}\p{M}\p{Nd}\p{Pc}]+")
_LETTER = regex.compile(r"\p{L}")
_UNSPACED_SCRIPTS = r"\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}"
_UNSPACED = regex.compile(f"[{_UNSPACED_SCRIPTS}]+")


def normalize(text: str) -> str:
    """NFC, then casefold: the order the scheme fixes."""
    return unicodedata.normalize("NFC", text).casefold()


def _split_unspaced(run: str, out: list[str]) -> None:
    """Append the tokens of a run that contains unspaced-script characters."""
    start = 0
    for stretch in _UNSPACED.finditer(run):
        before = run[start : stretch.start()]
        if before and _LETTER.search(before):
            out.append(before)
        chars = stretch.group()
        if len(chars) == 1:
            out.append(chars)
        else:
            out.extend(chars[i : i + 2] for i in range(len(chars) - 1))
        start = stretch.end()
    rest = run[start:]
    if rest and _LETTER.search(rest):
        out.append(rest)


def tokens(text: str) -> list[str]:
    """The tokens of ``text`` in text order, repeats included."""
    text = normalize(text)
    runs = _RUN.findall(text)
    # isalpha() settles the common case (a plain word) without a regex call.
    words = [run for run in runs if run.isalpha() or _LETTER.search(run)]
    if not _UNSPACED.search(text):
        return words
    out: list[str] = []
    for word in words:
        if _UNSPACED.search(word):
            _split_unspaced(word, out)
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


# Character classes for the native tokeniser, one byte per code point, built
# from the same `regex` patterns as above so both paths agree by construction.
CLASS_RUN, CLASS_LETTER, CLASS_UNSPACED = 1, 2, 4


@functools.cache
def class_table() -> bytes:
    """The 0x110000-byte table of CLASS_* flags (about 0.2 s to build, once per process)."""
    table = bytearray(0x110000)
    everything = "".join(map(chr, range(0x110000)))
    for match in _RUN.finditer(everything):
        table[match.start() : match.end()] = b"\x01" * (match.end() - match.start())
    letters = CLASS_RUN | CLASS_LETTER
    for match in regex.finditer(r"\p{L}+", everything):
        table[match.start() : match.end()] = bytes([letters]) * (match.end() - match.start())
    add_unspaced = bytes(value | CLASS_UNSPACED for value in range(256))
    for match in _UNSPACED.finditer(everything):
        table[match.start() : match.end()] = table[match.start() : match.end()].translate(add_unspaced)
    return bytes(table)
