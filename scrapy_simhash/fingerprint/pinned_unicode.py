"""Unicode 15.0 for the tokenizer on any Python: character classes, NFC and case folding.

A fingerprint must not depend on the machine that computes it. The `regex` module and
Python's `unicodedata` each carry the Unicode version of their release, so their character
categories, scripts, NFC and case folding differ between installs for every code point one
version assigns and another does not. The tokenizer therefore takes all of them from one
pinned version, shipped as the generated module ``_unicode_data``:

- character classes (run, letter, unspaced script) come only from the pinned tables;
- a code point the pinned version leaves unassigned is of category Cn: it separates runs,
  and NFC and case folding leave it unchanged;
- NFC and ``str.casefold()`` come from Python's `unicodedata` whenever the text holds no code
  point on which the interpreter's Unicode and the pinned one can disagree (Unicode's
  normalization and case folding stability policies make them equal on the rest); otherwise
  the text is normalized from the pinned tables by :class:`Normalizer`.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import _unicode_data

try:
    from ._native import any_flagged as _any_flagged
except ImportError:  # not built: the pure-Python lookups below give the same answers
    _any_flagged = None

UNICODE_VERSION: str = _unicode_data.UNICODE_VERSION
"""The Unicode version of every property the tokenizer uses."""

CLASS_RUN, CLASS_LETTER, CLASS_UNSPACED = 1, 2, 4
"""Flags of the class table: part of a run (L, M, Nd, Pc); a letter (L); an unspaced script."""

# Hangul syllables compose and decompose algorithmically (Unicode 15.0, section 3.12).
_S_BASE, _L_BASE, _V_BASE, _T_BASE = 0xAC00, 0x1100, 0x1161, 0x11A7
_V_COUNT, _T_COUNT = 21, 28
_N_COUNT = _V_COUNT * _T_COUNT
_S_COUNT = 19 * _N_COUNT


def _pairs(flat: tuple[int, ...]) -> list[tuple[int, int]]:
    return list(zip(flat[0::2], flat[1::2], strict=True))


def _version(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


@functools.cache
def class_table() -> bytes:
    """The 0x110000-byte table of CLASS_* flags, one byte per code point (for the C tokenizers)."""
    runs = _pairs(_unicode_data.CLASS_RUNS)
    table = bytearray(0x110000)
    for (start, flags), (end, _) in zip(runs, [*runs[1:], (0x110000, 0)], strict=True):
        if flags:
            table[start:end] = bytes([flags]) * (end - start)
    return bytes(table)


def class_ranges(flag: int) -> list[tuple[int, int]]:
    """(first, last) ranges of the code points whose class has ``flag``."""
    runs = _pairs(_unicode_data.CLASS_RUNS)
    out: list[tuple[int, int]] = []
    for (start, flags), (end, _) in zip(runs, [*runs[1:], (0x110000, 0)], strict=True):
        if flags & flag:
            if out and out[-1][1] == start - 1:
                out[-1] = (out[-1][0], end - 1)
            else:
                out.append((start, end - 1))
    return out


def char_class(ranges: Iterable[tuple[int, int]]) -> str:
    """A ``re`` character class (without brackets) of the ranges, every code point escaped."""
    return "".join(
        f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}" for first, last in ranges
    )


def has_astral(text: str) -> bool:
    """Whether ``text`` has a code point above U+FFFF (each takes two UTF-16 units)."""
    return len(text.encode("utf-16-le", "surrogatepass")) != 2 * len(text)


ASTRAL = re.compile("[\\U00010000-\\U0010ffff]")


def astral_chars(text: str) -> set[str]:
    """The distinct code points above U+FFFF in ``text``."""
    return set(ASTRAL.findall(text)) if has_astral(text) else set()


@dataclass(frozen=True)
class ClassPatterns:
    """``re`` patterns of one set of code points, made for speed.

    ``re`` looks a code point of the Basic Multilingual Plane up in one table but tests
    every range above U+FFFF one after the other, for every code point that is not in the
    table. ``bmp`` leaves those ranges out: it is exact on a text without code points above
    U+FFFF (see :func:`has_astral`). ``full`` tests them only for a code point above U+FFFF.
    A pattern is None when it can match nothing.
    """

    bmp: re.Pattern[str] | None
    full: re.Pattern[str] | None

    @classmethod
    def of(cls, ranges: Iterable[tuple[int, int]], repeat: str = "") -> ClassPatterns:
        ranges = list(ranges)
        bmp = char_class((first, min(last, 0xFFFF)) for first, last in ranges if first <= 0xFFFF)
        above = char_class((max(first, 0x10000), last) for first, last in ranges if last > 0xFFFF)
        parts = [f"[{bmp}]"] if bmp else []
        if above:
            parts.append(f"(?=[\\U00010000-\\U0010ffff])[{above}]")
        return cls(
            re.compile(f"[{bmp}]{repeat}") if bmp else None,
            re.compile(f"(?:{'|'.join(parts)}){repeat}") if parts else None,
        )


class Normalizer:
    """NFC and full case folding computed from tables (``_unicode_data``'s names), not `unicodedata`.

    Exact for the tables' Unicode version and the same on every Python; slower than
    `unicodedata`, so :func:`normalize` uses it only where the interpreter could disagree.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._ccc: dict[int, int] = data["CANONICAL_COMBINING_CLASS"]
        one_level: dict[int, tuple[int, ...]] = data["CANONICAL_DECOMPOSITION"]

        def full(cp: int) -> list[int]:
            parts = one_level.get(cp)
            return [cp] if parts is None else [x for part in parts for x in full(part)]

        self._decomposed = {cp: full(cp) for cp in one_level}
        excluded = {
            cp for first, last in _pairs(data["FULL_COMPOSITION_EXCLUSION"]) for cp in range(first, last + 1)
        }
        self._composed = {
            (parts[0], parts[1]): cp
            for cp, parts in one_level.items()
            if len(parts) == 2 and cp not in excluded
        }
        self._casefold: dict[int, str] = data["CASEFOLD"]

    def _decompose(self, text: str) -> list[int]:
        """Canonical decomposition, then canonical ordering of each run of nonzero classes."""
        out: list[int] = []
        for ch in text:
            cp = ord(ch)
            if _S_BASE <= cp < _S_BASE + _S_COUNT:
                index = cp - _S_BASE
                out += [_L_BASE + index // _N_COUNT, _V_BASE + index % _N_COUNT // _T_COUNT]
                if index % _T_COUNT:
                    out.append(_T_BASE + index % _T_COUNT)
            else:
                out += self._decomposed.get(cp, (cp,))
        ccc = self._ccc
        i = 0
        while i < len(out):
            if ccc.get(out[i], 0) == 0:
                i += 1
                continue
            end = i
            while end < len(out) and ccc.get(out[end], 0):
                end += 1
            out[i:end] = sorted(out[i:end], key=ccc.__getitem__)  # stable: equal classes keep their order
            i = end
        return out

    def _compose_pair(self, starter: int, cp: int) -> int | None:
        if _L_BASE <= starter < _L_BASE + 19 and _V_BASE <= cp < _V_BASE + _V_COUNT:
            return _S_BASE + ((starter - _L_BASE) * _V_COUNT + cp - _V_BASE) * _T_COUNT
        if (
            _S_BASE <= starter < _S_BASE + _S_COUNT
            and (starter - _S_BASE) % _T_COUNT == 0
            and _T_BASE < cp < _T_BASE + _T_COUNT
        ):
            return starter + cp - _T_BASE
        return self._composed.get((starter, cp))

    def nfc(self, text: str) -> str:
        """Canonical decomposition, canonical ordering, canonical composition (UAX #15)."""
        ccc = self._ccc
        out: list[int] = []
        starter = -1  # index in out of the last starter, -1 before the first one
        for cp in self._decompose(text):
            cls = ccc.get(cp, 0)
            if starter >= 0:
                last = ccc.get(out[-1], 0) if len(out) - 1 > starter else None
                # Not blocked: adjacent to the starter, or every character between has a lower nonzero class.
                if last is None or (last != 0 and last < cls):
                    composite = self._compose_pair(out[starter], cp)
                    if composite is not None:
                        out[starter] = composite
                        continue
            if cls == 0:
                starter = len(out)
            out.append(cp)
        return "".join(map(chr, out))

    def casefold(self, text: str) -> str:
        """Full case folding, as ``str.casefold()`` does with the tables' Unicode version."""
        return text.translate(self._casefold)


@functools.cache
def pinned_normalizer() -> Normalizer:
    """The :class:`Normalizer` of the pinned Unicode version (built on first use)."""
    return Normalizer(vars(_unicode_data))


@dataclass(frozen=True)
class _Finder:
    """Tells whether a text holds one of a set of code points, as cheaply as the set allows."""

    bmp_chars: str
    """The set's code points up to U+FFFF when they are few: ``in`` finds each one fast."""
    bmp: re.Pattern[str] | None
    """When they are many: one table lookup per code point of the text."""
    astral_starts: tuple[int, ...]
    """First code point of each of the set's ranges above U+FFFF (a text's such code points are bisected)."""
    astral_ends: tuple[int, ...]
    table: bytes
    """One byte per code point, 1 for the set's: for the C extension's any_flagged."""

    @classmethod
    def of(cls, bmp: list[tuple[int, int]], astral: list[tuple[int, int]]) -> _Finder:
        astral = sorted(astral)  # bisected
        chars = "".join(chr(cp) for first, last in bmp for cp in range(first, last + 1))
        few = len(chars) <= 16
        table = bytearray(0x110000)
        for first, last in [*bmp, *astral]:
            table[first : last + 1] = b"\x01" * (last + 1 - first)
        return cls(
            chars if few else "",
            None if few else ClassPatterns.of(bmp).bmp,
            tuple(first for first, _ in astral),
            tuple(last for _, last in astral),
            bytes(table),
        )

    def found_in(self, text: str) -> bool:
        if _any_flagged is not None:
            return _any_flagged(text, self.table)
        return self.found_in_python(text)

    def found_in_python(self, text: str) -> bool:
        """:meth:`found_in` without the C extension."""
        if self.bmp is not None:
            if self.bmp.search(text) is not None:
                return True
        elif any(ch in text for ch in self.bmp_chars):
            return True
        for ch in astral_chars(text):
            i = bisect.bisect_right(self.astral_starts, ord(ch)) - 1
            if i >= 0 and ord(ch) <= self.astral_ends[i]:
                return True
        return False


def _split_at_bmp(ranges: Iterable[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    bmp, astral = [], []
    for first, last in ranges:
        if first <= 0xFFFF:
            bmp.append((first, min(last, 0xFFFF)))
        if last > 0xFFFF:
            astral.append((max(first, 0x10000), last))
    return bmp, astral


def _known_here(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The code points of ``ranges`` that this interpreter's `unicodedata` assigns, as ranges."""
    out: list[tuple[int, int]] = []
    for first, last in ranges:
        for cp in range(first, last + 1):
            if unicodedata.category(chr(cp)) != "Cn":
                if out and out[-1][1] == cp - 1:
                    out[-1] = (out[-1][0], cp)
                else:
                    out.append((cp, cp))
    return out


@functools.cache
def _disagreeing() -> _Finder | None:
    """Code points on which this interpreter's NFC or casefold may differ from the pinned ones.

    None when the interpreter has the pinned version. With an older one: those the pinned
    version assigned since (the interpreter knows nothing of them). With a newer one: those
    the pinned version leaves unassigned and the interpreter assigns (pinned, they stay as
    they are); above U+FFFF, all that the pinned version leaves unassigned (looking each up
    would cost more than the rare texts with them). The text around them needs no care:
    both versions agree on the code points they both assign.
    """
    python, pinned = _version(unicodedata.unidata_version), _version(UNICODE_VERSION)
    if python == pinned:
        return None
    if python > pinned:
        bmp, astral = _split_at_bmp(_pairs(_unicode_data.UNASSIGNED))
        return _Finder.of(_known_here(bmp), astral)
    if python < _version(_unicode_data.OLDEST_PYTHON_UNICODE):
        return _Finder.of([(0, 0xFFFF)], [(0x10000, 0x10FFFF)])  # older than the tables reach: all of it
    bmp, astral = _split_at_bmp(
        pair
        for age, flat in _unicode_data.ASSIGNED_SINCE.items()
        if _version(age) > python
        for pair in _pairs(flat)
    )
    return _Finder.of(bmp, astral)


def needs_tables(text: str) -> bool:
    """Whether :func:`normalize` must use the pinned tables for ``text`` (this interpreter could differ)."""
    if text.isascii():
        return False  # every Unicode version assigns ASCII alike
    disagreeing = _disagreeing()
    return disagreeing is not None and disagreeing.found_in(text)


def normalize(text: str) -> str:
    """NFC, then full case folding, both as Unicode 15.0 defines them, on any Python."""
    if not needs_tables(text):
        return unicodedata.normalize("NFC", text).casefold()
    normalizer = pinned_normalizer()
    return normalizer.casefold(normalizer.nfc(text))
