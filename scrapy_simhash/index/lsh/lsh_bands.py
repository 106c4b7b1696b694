"""LSH bands for MinHash sketches: bands and rows from a Jaccard threshold, 64-bit band keys, sketch checks.

Pure functions shared by every MinHash-LSH store (in memory, embedded, Redis), so that all of them cut
sketches into the same bands and hash them to the same keys.
"""

from __future__ import annotations

from math import comb
from typing import Any

import numpy as np

from ...fingerprint.bbit import VALUE_BITS, ValueBits
from ...fingerprint.minhash import SCHEME
from ..base import IndexSettingsError

try:
    from .._probe import band_keys as _native_keys
except ImportError:  # pragma: no cover - depends on the build
    _native_keys = None

_M64 = (1 << 64) - 1
_FMIX1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX2 = np.uint64(0xC4CEB9FE1A85EC53)
_MULTIPLIER_SEED = 0x6D696E68617368  # "minhash"
_OFFSET_SEED = 0x6C7368  # "lsh"
DEFAULT_WEIGHTS = (0.05, 0.95)


def splitmix64(seed: int, count: int) -> np.ndarray:
    """The first ``count`` outputs of Vigna's splitmix64 generator from ``seed`` (uint64)."""
    out = np.empty(count, dtype=np.uint64)
    state = seed & _M64
    for i in range(count):
        state = (state + 0x9E3779B97F4A7C15) & _M64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        out[i] = z ^ (z >> 31)
    return out


def fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser (a bijection that spreads every input bit), elementwise."""
    h = h ^ (h >> np.uint64(33))
    h *= _FMIX1
    h ^= h >> np.uint64(33)
    h *= _FMIX2
    h ^= h >> np.uint64(33)
    return h


class BandHasher:
    """The 64-bit key of each band of a sketch, for ``bands`` bands of ``rows`` values.

    ``key[t] = fmix64(O[t] + sum_j M[t*rows + j] * v[t*rows + j]  mod 2**64)`` where ``v`` are
    the sketch values as unsigned integers, ``M`` the first ``bands * rows`` outputs of
    :func:`splitmix64` seeded with ``0x6D696E68617368`` each forced odd (``| 1``), ``O`` the first
    ``bands`` outputs seeded with ``0x6C7368``. Multilinear hashing keeps collisions of
    different bands rare (about 2**-32 at worst) and numpy computes it for a whole batch at
    once; multipliers depend on the absolute position, so equal values in different bands
    give different keys. A collision only adds a candidate: answers check band equality.
    """

    def __init__(self, bands: int, rows: int) -> None:
        self.bands, self.rows = bands, rows
        self.multipliers = splitmix64(_MULTIPLIER_SEED, bands * rows) | np.uint64(1)
        self.offsets = splitmix64(_OFFSET_SEED, bands)

    def keys(self, sketch: np.ndarray) -> np.ndarray:
        """Band keys of one sketch: ``uint64`` array of shape ``(bands,)``."""
        if _native_keys is not None and sketch.dtype == np.uint32 and sketch.flags.c_contiguous:
            out = _native_keys(sketch, sketch.shape[0], self.multipliers, self.offsets, self.bands, self.rows)
            return np.frombuffer(out, dtype=np.uint64)
        width = self.bands * self.rows
        prod = sketch[:width].astype(np.uint64) * self.multipliers
        return fmix64(prod.reshape(self.bands, self.rows).sum(axis=1, dtype=np.uint64) + self.offsets)

    def keys_many(self, sketches: np.ndarray, chunk: int = 65536) -> np.ndarray:
        """Band keys of a batch: ``uint64`` array of shape ``(n, bands)``."""
        n, width = sketches.shape[0], self.bands * self.rows
        if _native_keys is not None and sketches.dtype == np.uint32 and sketches.flags.c_contiguous and n:
            out = _native_keys(
                sketches, sketches.shape[1], self.multipliers, self.offsets, self.bands, self.rows
            )
            return np.frombuffer(out, dtype=np.uint64).reshape(n, self.bands)
        out = np.empty((n, self.bands), dtype=np.uint64)
        for start in range(0, n, chunk):
            part = sketches[start : start + chunk, :width].astype(np.uint64)
            part *= self.multipliers
            sums = part.reshape(-1, self.bands, self.rows).sum(axis=2, dtype=np.uint64)
            out[start : start + chunk] = fmix64(sums + self.offsets)
        return out


def keys_in_slices(hasher: BandHasher, sketches: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
    """``hasher``'s keys of ``sketches`` (rows of any integer type), shape (n, bands), computed from
    uint32 copies of a slice at a time (no uint32 copy of a whole uint8 matrix)."""
    n = sketches.shape[0]
    keys = np.empty((n, hasher.bands), dtype=np.uint64)
    for start in range(0, n, chunk):
        part = np.ascontiguousarray(sketches[start : start + chunk], dtype=np.uint32)
        keys[start : start + part.shape[0]] = hasher.keys_many(part)
    return keys


def band_keys(sketch: Any, bands: int, rows: int) -> np.ndarray:
    """The 64-bit band keys of ``sketch`` (see :class:`BandHasher` for the definition)."""
    return BandHasher(bands, rows).keys(as_sketch(sketch))


def _error_integrals(
    threshold: float, num_values: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bands, rows, FP, FN) over every ``bands * rows <= num_values``, by Gauss-Legendre quadrature.

    The integrands are polynomials of degree ``bands * rows <= num_values``; a rule with
    ``num_values // 2 + 1`` points integrates them exactly (up to rounding).
    """
    pairs = [(b, r) for b in range(1, num_values + 1) for r in range(1, num_values // b + 1)]
    b = np.array([p[0] for p in pairs], dtype=np.float64)[:, None]
    r = np.array([p[1] for p in pairs], dtype=np.float64)[:, None]
    nodes, weights = np.polynomial.legendre.leggauss(max(8, num_values // 2 + 1))

    def integral(lo: float, hi: float, miss: bool) -> np.ndarray:
        s = (hi - lo) / 2 * nodes + (hi + lo) / 2
        none_equal = (1 - s[None, :] ** r) ** b  # P(no band equal) at similarity s
        f = none_equal if miss else 1 - none_equal
        return (f * weights).sum(axis=1) * (hi - lo) / 2

    fp, fn = integral(0.0, threshold, False), integral(threshold, 1.0, True)
    return b[:, 0].astype(int), r[:, 0].astype(int), fp, fn


def optimal_params(
    threshold: float, num_values: int, weights: tuple[float, float] = DEFAULT_WEIGHTS
) -> tuple[int, int]:
    """Bands and rows (``bands * rows <= num_values``) minimising ``w_fp * FP + w_fn * FN``.

    With ``P(s) = 1 - (1 - s**rows)**bands``, the probability that two sketches of Jaccard
    ``s`` share at least one band::

        FP = integral over s in [0, threshold] of P(s) ds          (candidates below threshold)
        FN = integral over s in [threshold, 1] of 1 - P(s) ds      (misses at or above it)

    as in datasketch's ``_optimal_param`` (ties go to fewer bands, then fewer rows). The
    default weights (0.05, 0.95) favour recall: a false positive costs one vectorised
    comparison (answers are verified), a false negative loses a duplicate. datasketch's
    default is (0.5, 0.5).
    """
    _check_threshold(threshold)
    w_fp, w_fn = weights
    b, r, fp, fn = _error_integrals(threshold, num_values)
    error = w_fp * fp + w_fn * fn
    best = int(np.flatnonzero(error == error.min())[0])  # order is bands, then rows, ascending
    return int(b[best]), int(r[best])


def recall_at(similarity: float, bands: int, rows: int, num_values: int, min_matches: int) -> float:
    """P(a stored sketch is returned) for a true Jaccard ``similarity``, positions independent.

    Returned = at least one band equal AND at least ``min_matches`` equal positions overall:
    the S-curve of the bands combined with the binomial noise of the estimate.
    """
    s = similarity
    band = np.array([comb(rows, k) * s**k * (1 - s) ** (rows - k) for k in range(rows + 1)])
    no_full = band.copy()
    no_full[-1] = 0.0
    rest = num_values - bands * rows
    total = np.array([comb(rest, k) * s**k * (1 - s) ** (rest - k) for k in range(rest + 1)])
    total_no_full = total.copy()
    for _ in range(bands):
        total = np.convolve(total, band)
        total_no_full = np.convolve(total_no_full, no_full)
    return float(total[min_matches:].sum() - total_no_full[min_matches:].sum())


def min_matches_for(threshold: float, num_values: int, value_bits: int = 32) -> int:
    """The fewest equal positions whose estimate reaches ``threshold`` (``m / num_values`` at 32 bits;
    corrected for chance agreement on fewer bits: :meth:`ValueBits.similarity`)."""
    return ValueBits(value_bits).min_equal(threshold, num_values)


def _check_threshold(threshold: float) -> None:
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")


def resolve_params(
    threshold: float,
    num_values: int,
    bands: int | None,
    rows: int | None,
    weights: tuple[float, float] = DEFAULT_WEIGHTS,
) -> tuple[int, int]:
    """Bands and rows: derived from the threshold, or given (one given: the other fills num_values)."""
    _check_threshold(threshold)
    if num_values < 1:
        raise ValueError(f"num_values must be positive, got {num_values!r}")
    if bands is None and rows is None:
        return optimal_params(threshold, num_values, weights)
    if bands is None:
        bands = num_values // rows if rows and rows > 0 else 0
    if rows is None:
        rows = num_values // bands if bands > 0 else 0
    if bands < 1 or rows < 1 or bands * rows > num_values:
        raise ValueError(f"need bands >= 1, rows >= 1, bands * rows <= {num_values}; got {bands} x {rows}")
    return bands, rows


def check_scheme(sketch: Any) -> None:
    """Refuse a sketch object labelled with another scheme: its values would be compared as if they
    were this scheme's. A bare array (no ``.scheme``) is taken as this scheme's values."""
    scheme = getattr(sketch, "scheme", SCHEME)
    if scheme != SCHEME:
        raise ValueError(f"this index holds {SCHEME} sketches, not {scheme}")


def as_sketch(sketch: Any, num_values: int | None = None) -> np.ndarray:
    """A sketch as a 1-D ``uint32`` array: a numpy array or an object with ``.values``."""
    if not isinstance(sketch, np.ndarray):
        values = getattr(sketch, "values", None)
        sketch = values if isinstance(values, np.ndarray) else sketch
    arr = _as_uint32(np.asarray(sketch), "a sketch holds")
    if arr.ndim != 1 or (num_values is not None and arr.shape[0] != num_values):
        want = f"({num_values},)" if num_values is not None else "(num_values,)"
        raise ValueError(f"a sketch has shape {want}, got {arr.shape}")
    return arr


def _as_uint32(arr: np.ndarray, what: str) -> np.ndarray:
    """``arr`` as uint32 values: itself when it is, unsigned narrower ones widened without a look at
    their range (a stored row's bytes), other integers checked first."""
    if arr.dtype == np.uint32:
        return arr
    narrower = arr.dtype.kind == "u" and arr.dtype.itemsize < 4
    in_range = narrower or not arr.size or (arr.min() >= 0 and arr.max() <= 0xFFFFFFFF)
    if arr.dtype.kind not in "iu" or not in_range:
        raise TypeError(f"{what} uint32 values, got dtype {arr.dtype}")
    return arr.astype(np.uint32)


def as_sketch_batch(sketches: Any, num_values: int | None = None) -> np.ndarray:
    """A batch of sketches as a 2-D ``uint32`` array ``(n, num_values)``."""
    if not isinstance(sketches, np.ndarray):
        sketches = [as_sketch(s, num_values) for s in sketches]
        if not sketches:
            return np.zeros((0, num_values or 0), dtype=np.uint32)
        sketches = np.stack(sketches)
    arr = _as_uint32(sketches, "sketches hold")
    if arr.ndim != 2 or (num_values is not None and arr.shape[1] != num_values):
        raise ValueError(f"a batch of sketches has shape (n, {num_values or 'num_values'}), got {arr.shape}")
    return arr


DEFAULT_THRESHOLD = 0.8
DEFAULT_NUM_VALUES = 128
DEFAULT_VALUE_BITS = 32
"""A MinHash store on its own keeps whole values; the verified index asks for 8 (``Rule.value_bits``)."""


def new_params(given: dict[str, Any], new_value_bits: int | None = None) -> dict[str, str]:
    """A new MinHash store's settings as stored (text), from the ``given`` ones (None: the default;
    ``new_value_bits`` is the width when ``value_bits`` is not given)."""
    threshold = DEFAULT_THRESHOLD if given["threshold"] is None else float(given["threshold"])
    num_values = DEFAULT_NUM_VALUES if given["num_values"] is None else int(given["num_values"])
    bands, rows = resolve_params(threshold, num_values, given["bands"], given["rows"])
    asked = given["value_bits"]
    bits = ValueBits(asked if asked is not None else new_value_bits or DEFAULT_VALUE_BITS).bits
    return {
        "num_values": str(num_values),
        "threshold": repr(threshold),
        "bands": str(bands),
        "rows": str(rows),
        "value_bits": str(bits),
    }


def stored_params(stored: dict[str, str]) -> dict[str, Any]:
    """A MinHash store's stored settings (text) as values: num_values, threshold, bands, rows,
    value_bits (32 for a store written before the setting existed)."""
    return {
        "num_values": int(stored["num_values"]),
        "threshold": float(stored["threshold"]),
        "bands": int(stored["bands"]),
        "rows": int(stored["rows"]),
        "value_bits": int(stored.get("value_bits", 32)),
    }


def readable_params(stored: dict[str, str], where: str, instead: str) -> dict[str, Any]:
    """:func:`stored_params` of a store this version can read: sketches of the scheme it computes, values
    of a width it reads (else :class:`IndexSettingsError`; ``where`` names the store, ``instead`` says
    what to do other than upgrading)."""
    if stored.get("scheme") != SCHEME:
        raise IndexSettingsError(
            f"{where} holds {stored.get('scheme')!r} sketches; this version computes {SCHEME!r}: "
            "rebuild the index from the documents"
        )
    have = stored_params(stored)
    if have["value_bits"] not in VALUE_BITS:  # written by a later version
        raise IndexSettingsError(
            f"{where} keeps {have['value_bits']}-bit sketch values, which this version does not read "
            f"({', '.join(map(str, VALUE_BITS))}): upgrade scrapy-simhash or {instead}"
        )
    return have


def check_given(given: dict[str, Any], have: dict[str, Any], where: str, remedy: str) -> None:
    """:class:`IndexSettingsError` when a ``given`` setting (not None) differs from the stored one."""
    wrong = mismatched_params(given, have)
    if wrong:
        raise IndexSettingsError(f"{where} was created with other settings: {', '.join(wrong)}; {remedy}")


def mismatched_params(given: dict[str, Any], have: dict[str, Any]) -> list[str]:
    """``name=value (stored: ...)`` for each setting given (not None) that differs from the stored one."""
    return [
        f"{name}={value!r} (stored: {have[name]!r})"
        for name, value in given.items()
        if value is not None and type(have[name])(value) != have[name]
    ]
