"""The near-duplicate rule: whether two fingerprinted pages are near-duplicates, and why.

One rule, applied alike by :func:`compare`, every index backend, the Scrapy components and the
WARC tools, so that a pair judged here is judged the same in a crawl or a reprocessing run.

``verified`` (the default) is two stages, after Henzinger (SIGIR 2006): a pair is a *candidate*
when one of the ``bands`` LSH bands of their minhash-doc/1 sketches is equal (``rows`` values
each), and a candidate is a near-duplicate when the sketches' estimated Jaccard similarity (the
share of equal values, on the low ``value_bits`` bits of each value, corrected for chance
agreement: :mod:`.fingerprint.bbit`) is at least ``similarity``. ``simhash`` is the earlier rule: the Hamming
distance of the simhash-doc/1 fingerprints is at most ``distance``. A pair where either page has
no sketch (indexes and WARCs written before sketches existed) is judged by simhash alone in
either mode; the :class:`Verdict` says so (``method == "simhash"``).

Why these defaults (docs/quality.md): on the quality harness the verified rule reaches F1 0.990
with no false match, where simhash at k = 3 reaches 0.840.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .defaults import BANDS, DISTANCE, MODE, MODES, ROWS, SIMILARITY, VALUE_BITS
from .fingerprint.bbit import ValueBits

if TYPE_CHECKING:
    from .page import PageFingerprint


@dataclass(frozen=True)
class Verdict:
    """Two pages compared: the decision and the two measures behind it."""

    near_duplicate: bool
    distance: int
    """Hamming distance of the simhash-doc/1 fingerprints, in bits (0..64)."""
    similarity: float | None
    """Estimated Jaccard similarity of the sketches (0..1); None when a page has no sketch."""
    method: str
    """How it was decided: ``verified`` (by the sketches) or ``simhash`` (by distance alone)."""


@dataclass(frozen=True)
class Rule:
    """The decision rule and its parameters (the defaults are the shipped, measured ones)."""

    mode: str = MODE
    distance: int = DISTANCE
    similarity: float = SIMILARITY
    bands: int = BANDS
    rows: int = ROWS
    value_bits: int = VALUE_BITS
    """Low bits of each sketch value compared (:mod:`.fingerprint.bbit`): 8 keeps the decisions of 32
    on the quality harness, and lets an index store 128 bytes of sketch per page instead of 512."""
    bits: ValueBits = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        distance = self.distance
        if isinstance(distance, bool) or not isinstance(distance, int) or not 0 <= distance <= 64:
            raise ValueError(f"distance must be an int in 0..64, got {self.distance!r}")
        if not 0.0 < float(self.similarity) <= 1.0:
            raise ValueError(f"similarity must be in (0, 1], got {self.similarity!r}")
        if self.bands < 1 or self.rows < 1:
            raise ValueError(f"need bands >= 1 and rows >= 1, got {self.bands} x {self.rows}")
        object.__setattr__(self, "bits", ValueBits(self.value_bits))

    @property
    def verified(self) -> bool:
        return self.mode == "verified"

    def judge(self, distance: int, equal: np.ndarray | None) -> Verdict:
        """The verdict for a pair at ``distance`` whose sketches agree where ``equal`` is True.

        ``equal`` is the elementwise comparison of the two sketches' values (reduced to
        ``value_bits``), or None when a page has no sketch. Every backend calls this (or
        reimplements it: the LSH stores count equal values in C or numpy) so that
        all answer alike.
        """
        if equal is None:
            return Verdict(distance <= self.distance, distance, None, "simhash")
        similarity = self.bits.similarity(int(np.count_nonzero(equal)), equal.shape[0])
        if not self.verified:
            return Verdict(distance <= self.distance, distance, similarity, "simhash")
        width = self.bands * self.rows
        if width > equal.shape[0]:
            raise ValueError(f"{self.bands} x {self.rows} bands need {width} values, got {equal.shape[0]}")
        candidate = bool(equal[:width].reshape(self.bands, self.rows).all(axis=1).any())
        return Verdict(candidate and similarity >= self.similarity, distance, similarity, "verified")

    def compare_values(self, a_simhash: int, b_simhash: int, a_sketch: Any, b_sketch: Any) -> Verdict:
        """:meth:`judge` for raw values: 64-bit fingerprints and sketches (MinHash, uint32 arrays or None)."""
        distance = (int(a_simhash) ^ int(b_simhash)).bit_count()
        if a_sketch is None or b_sketch is None:
            return self.judge(distance, None)
        a, b = _values(a_sketch), _values(b_sketch)
        if a.shape != b.shape:
            raise ValueError(f"sketch sizes differ: {a.shape[0]} and {b.shape[0]} values")
        return self.judge(distance, self.bits.reduce(a) == self.bits.reduce(b))


DEFAULT_RULE = Rule()
"""The shipped rule: verified, similarity >= 0.5 over 32 x 4 bands of 8-bit values; simhash at k = 3."""


def _values(sketch: Any) -> np.ndarray:
    values = getattr(sketch, "values", sketch)
    return np.asarray(values, dtype=np.uint32)


def compare(a: PageFingerprint, b: PageFingerprint, rule: Rule = DEFAULT_RULE) -> Verdict:
    """Whether two pages (from :func:`~scrapy_simhash.page.fingerprint_page`) are near-duplicates.

    Applies exactly the rule the indexes apply by default. Raises ValueError for a page without
    a fingerprint (its ``reason`` says why it has none): there is nothing to compare.
    """
    for page in (a, b):
        if page.simhash is None:
            raise ValueError(f"cannot compare a page without a fingerprint (reason: {page.reason})")
    assert a.simhash is not None and b.simhash is not None
    return rule.compare_values(a.simhash, b.simhash, a.minhash, b.minhash)
