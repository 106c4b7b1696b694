"""b-bit sketch values (Li & König, WWW 2010): keep only the low b bits of each minhash value.

An index stores 128 values per page; at 32 bits that is 512 bytes, at 8 bits 128. Two unequal
values still agree on their low b bits with probability ``C = 2**-b``, so the share ``P`` of
equal b-bit values estimates ``C + (1 - C) * J``, and ``(P - C) / (1 - C)`` estimates the
Jaccard similarity ``J``. On the quality harness 8 bits give the same decisions as 32 on every
kind of change and no unrelated pair (docs/quality.md, "Fewer bits per sketch value").

The sketch itself (minhash-doc/1, written to WARCs and sidecars) keeps its 32-bit values; only
what an index keeps and compares is reduced, by :meth:`ValueBits.reduce`, which is idempotent,
so reducing a stored (already reduced) sketch again changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import overload

import numpy as np

VALUE_BITS = (8, 16, 32)
"""The widths an index can keep: a whole number of bytes per value."""


@dataclass(frozen=True)
class ValueBits:
    """How many low bits of each sketch value are kept, and the estimate and storage that follow."""

    bits: int = 32
    mask: np.uint32 = field(init=False, repr=False, compare=False)
    chance: float = field(init=False, repr=False, compare=False)
    """Probability that two unequal values agree on their low ``bits`` bits."""

    def __post_init__(self) -> None:
        if isinstance(self.bits, bool) or self.bits not in VALUE_BITS:
            raise ValueError(
                f"value_bits must be one of {', '.join(map(str, VALUE_BITS))}, got {self.bits!r}"
            )
        object.__setattr__(self, "mask", np.uint32((1 << self.bits) - 1))
        object.__setattr__(self, "chance", 0.0 if self.bits == 32 else 2.0**-self.bits)

    @property
    def width(self) -> int:
        """Bytes per stored value."""
        return self.bits // 8

    def reduce(self, values: np.ndarray) -> np.ndarray:
        """``values`` (uint32, any shape) with only their low bits: the array itself at 32 bits."""
        return values if self.bits == 32 else values & self.mask

    @overload
    def similarity(self, equal: int, num_values: int) -> float: ...
    @overload
    def similarity(self, equal: np.ndarray, num_values: int) -> np.ndarray: ...
    def similarity(self, equal: int | np.ndarray, num_values: int) -> float | np.ndarray:
        """Estimated Jaccard from ``equal`` equal values of ``num_values``, corrected for chance, >= 0;
        for an array of counts, the same floats elementwise (a batch's answers in one operation)."""
        share = equal / num_values
        if self.bits == 32:
            return share
        estimate = (share - self.chance) / (1.0 - self.chance)
        return np.maximum(estimate, 0.0) if isinstance(estimate, np.ndarray) else max(0.0, estimate)

    def min_equal(self, threshold: float, num_values: int) -> int:
        """The fewest equal values whose :meth:`similarity` reaches ``threshold`` (the same floats)."""
        m = max(0, math.ceil((threshold * (1.0 - self.chance) + self.chance) * num_values) - 1)
        while m <= num_values and self.similarity(m, num_values) < threshold:
            m += 1
        while m > 0 and self.similarity(m - 1, num_values) >= threshold:
            m -= 1
        return m

    def encode(self, values: np.ndarray) -> bytes:
        """Reduced values (uint32, any shape) as little-endian bytes, ``width`` each."""
        return np.ascontiguousarray(values, dtype=f"<u{self.width}").tobytes()

    def decode(self, data: bytes, num_values: int) -> np.ndarray:
        """:meth:`encode`'s bytes back as uint32 rows of ``num_values`` (shape ``(n, num_values)``)."""
        width = self.width * num_values
        if len(data) % width:
            raise ValueError(f"{len(data)} bytes are not rows of {num_values} values of {self.width} bytes")
        return np.frombuffer(data, dtype=f"<u{self.width}").reshape(-1, num_values).astype(np.uint32)
