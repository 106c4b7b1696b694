"""minhash-doc/1 sketches: Jaccard similarity of word 3-shingle sets, estimated from k values.

A simhash tells "one sentence edited" from "unrelated" poorly; a MinHash sketch
estimates the Jaccard similarity of the two texts' shingle sets directly, with
a standard error of at most about sqrt(J(1-J)/k).  minhash-doc/1 is one-permutation
MinHash with optimal densification: one hash per shingle, not k.  The scheme is
defined bit for bit in docs/minhash-doc-1.md; the C extension ``_minhash`` and the
pure-Python ``_minhash_purepy`` produce the same values.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import _minhash_purepy as _ref
from . import backend
from .tokenizer import class_table, normalize


def _optional(name: str) -> Any:
    """One of the optional C extensions, or None where it was not built (no compiler) or was built
    for another interpreter."""
    try:
        return importlib.import_module(name, __package__)
    except ImportError:
        return None


_native = _optional("._minhash")
_simhash_native = _optional("._native")

SCHEME = "minhash-doc/1"
"""Label of the scheme; stored and written sketches carry it."""

DEFAULT_NUM_VALUES = 128
"""Values per sketch: mean absolute error 0.026 on real pairs, 0.039 at 64 (docs/minhash-doc-1.md §9)."""

MAX_NUM_VALUES = 4096
SHINGLE = _ref.SHINGLE
EMPTY_VALUE = _ref.EMPTY

MAGIC = b"mh\x01\x00"
"""First 4 bytes of the byte form: "mh", format version 1, a zero byte."""

TEXT_FORM_SPACE = " \t\r\n"
"""The characters :meth:`MinHash.from_text` ignores around a text form (ASCII only: NBSP is junk)."""
_TEXT_FORM = re.compile(r"[A-Za-z0-9_-]+")


def _check_num_values(num_values: int) -> int:
    if isinstance(num_values, bool) or not isinstance(num_values, int | np.integer):
        raise TypeError(f"num_values must be an int, not {type(num_values).__name__}")
    if not 1 <= num_values <= MAX_NUM_VALUES:
        raise ValueError(f"num_values must be between 1 and {MAX_NUM_VALUES}, got {num_values}")
    return int(num_values)


class MinHash:
    """An immutable minhash-doc/1 sketch: ``num_values`` uint32 values (bin minima)."""

    __slots__ = ("_hash", "_values")

    def __init__(self, values: np.ndarray | Iterable[int]) -> None:
        array = values if isinstance(values, np.ndarray) else np.array(list(values))
        if array.ndim != 1:
            raise ValueError(f"a sketch is one row of values, got shape {array.shape}")
        _check_num_values(array.shape[0])
        if array.dtype != np.uint32 and (
            array.dtype.kind not in "iu" or array.size == 0 or array.min() < 0 or array.max() > EMPTY_VALUE
        ):
            raise ValueError("sketch values must be integers in 0 .. 2**32-1")
        owned = np.array(array, dtype=np.uint32, copy=True)
        owned.flags.writeable = False
        self._values = owned
        self._hash: int | None = None

    @property
    def values(self) -> np.ndarray:
        """The values, read-only uint32 array of shape (num_values,)."""
        return self._values

    @property
    def num_values(self) -> int:
        return int(self._values.shape[0])

    @property
    def scheme(self) -> str:
        return SCHEME

    @property
    def is_empty(self) -> bool:
        """True for the sketch of a text without tokens (every value 0xFFFFFFFF)."""
        return bool((self._values == EMPTY_VALUE).all())

    def jaccard(self, other: MinHash) -> float:
        """Estimated Jaccard similarity: the fraction of positions whose values are equal.

        Two empty sketches give 1.0 (the rule, no special case); callers that must not
        match empty texts check :attr:`is_empty` or the token count.
        """
        if not isinstance(other, MinHash):
            raise TypeError(f"jaccard needs a MinHash, not {type(other).__name__}")
        if other.scheme != self.scheme:
            raise ValueError(f"cannot compare a {self.scheme} sketch with a {other.scheme} one")
        if other.num_values != self.num_values:
            raise ValueError(f"sketch sizes differ: {self.num_values} and {other.num_values} values")
        return float(np.count_nonzero(self._values == other._values)) / self.num_values

    def to_bytes(self) -> bytes:
        """MAGIC, then the values as little-endian uint32 (4 + 4 * num_values bytes)."""
        return MAGIC + self._values.astype("<u4").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> MinHash:
        data = bytes(data)
        if data[:4] != MAGIC:
            if data[:2] == MAGIC[:2] and len(data) >= 4:
                raise ValueError(f"unsupported minhash byte format version {data[2]} (this reads 1)")
            raise ValueError("not a minhash-doc/1 sketch: bytes do not start with b'mh\\x01\\x00'")
        body = len(data) - 4
        if body <= 0 or body % 4:
            raise ValueError(f"bad sketch length: {len(data)} bytes is not 4 + 4 * num_values")
        return cls(np.frombuffer(data, dtype="<u4", offset=4))

    def to_text(self) -> str:
        """base64url of :meth:`to_bytes`, without padding."""
        return base64.urlsafe_b64encode(self.to_bytes()).rstrip(b"=").decode("ascii")

    @classmethod
    def from_text(cls, text: str) -> MinHash:
        """Read :meth:`to_text`'s form back, and nothing else: ASCII spaces, tabs, CR and LF around it
        are ignored; any other character, ``=`` padding or a set unused bit is a ``ValueError``, so one
        sketch has one text form (Python's base64 decoder alone skips stray characters)."""
        if not isinstance(text, str):
            raise TypeError(f"sketch text must be str, not {type(text).__name__}")
        body = text.strip(TEXT_FORM_SPACE)
        if not _TEXT_FORM.fullmatch(body):
            raise ValueError(f"not a base64url minhash sketch (A-Z a-z 0-9 - _, no padding): {text[:40]!r}")
        try:
            data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"not a base64url minhash sketch: {text[:40]!r} ({exc})") from None
        if base64.urlsafe_b64encode(data).rstrip(b"=") != body.encode("ascii"):
            raise ValueError(f"the unused bits of the last character must be 0: {text[:40]!r}")
        return cls.from_bytes(data)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MinHash):
            return NotImplemented
        return self.num_values == other.num_values and bool((self._values == other._values).all())

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._values.tobytes())
        return self._hash

    def __reduce__(self) -> tuple[type[MinHash], tuple[np.ndarray]]:
        # Rebuilt through __init__, so an unpickled sketch is read-only too.
        return (MinHash, (self._values,))

    def __setattr__(self, name: str, value: object) -> None:
        if name == "_hash" or not hasattr(self, "_values"):
            object.__setattr__(self, name, value)
        else:
            raise AttributeError("MinHash is immutable")

    def __repr__(self) -> str:
        if self.is_empty:
            return f"MinHash({self.num_values} values, empty)"
        head = ", ".join(f"{int(v):08x}" for v in self._values[:3])
        return f"MinHash({self.num_values} values: {head}{', ...' if self.num_values > 3 else ''})"


def _use_native(implementation: str | None) -> bool:
    """The C path unless asked for Python (here or by the process-wide backend) or not built."""
    if implementation is None:
        return _native is not None and backend.current().name != "python"
    name = implementation
    if name == "auto":
        return _native is not None
    if name == "python":
        return False
    if name == "native":
        if _native is None:
            raise RuntimeError(
                "the native minhash extension is not available (it was not compiled, or failed "
                "to import); reinstall with a C compiler, or use implementation 'python'"
            )
        return True
    raise ValueError(f"unknown implementation {name!r}; choose 'native', 'python' or 'auto'")


def _sketch_into(text: str, out: np.ndarray, native: bool) -> int:
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if native:
        return _native.sketch_into(normalize(text), class_table(), SHINGLE, out)
    values, count = _ref.sketch(text, out.shape[0])
    out[:] = values
    return count


def minhash_with_count(
    text: str, num_values: int = DEFAULT_NUM_VALUES, *, implementation: str | None = None
) -> tuple[MinHash, int]:
    """``(sketch, token count)`` in one pass; callers skip texts with too few tokens."""
    out = np.empty(_check_num_values(num_values), dtype=np.uint32)
    count = _sketch_into(text, out, _use_native(implementation))
    return MinHash(out), count


def minhash(text: str, num_values: int = DEFAULT_NUM_VALUES, *, implementation: str | None = None) -> MinHash:
    """The minhash-doc/1 sketch of ``text`` (all 0xFFFFFFFF when it has no tokens)."""
    return minhash_with_count(text, num_values, implementation=implementation)[0]


def simhash_and_minhash(
    text: str, num_values: int = DEFAULT_NUM_VALUES, *, implementation: str | None = None
) -> tuple[int, MinHash, int]:
    """``(simhash-doc/1 fingerprint, sketch, token count)``: a crawl that keeps both normalises once."""
    k = _check_num_values(num_values)
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    if _use_native(implementation) and _simhash_native is not None:
        normalized, table = normalize(text), class_table()
        value, count = _simhash_native.simhash_text(normalized, table)
        out = np.empty(k, dtype=np.uint32)
        _native.sketch_into(normalized, table, SHINGLE, out)
        return value, MinHash(out), count
    from . import simhash_with_count

    sketch, count = minhash_with_count(text, k, implementation=implementation)
    return simhash_with_count(text, implementation=implementation)[0], sketch, count


def minhash_many(
    texts: Iterable[str], num_values: int = DEFAULT_NUM_VALUES, *, implementation: str | None = None
) -> np.ndarray:
    """Sketches of many texts as one (n, num_values) uint32 array, row i for text i."""
    k = _check_num_values(num_values)
    native = _use_native(implementation)
    items = texts if isinstance(texts, list | tuple) else list(texts)
    out = np.empty((len(items), k), dtype=np.uint32)
    for row, text in enumerate(items):
        _sketch_into(text, out[row], native)
    return out


def shingle_hashes(text: str, *, implementation: str | None = None) -> list[int]:
    """lookup3 hashes of the shingles of ``text``, in text order (the scheme's features)."""
    if _use_native(implementation):
        return _native.shingle_hashes(normalize(text), class_table(), SHINGLE)
    return _ref.shingle_hashes(text)


def minhash_of_hashes(hashes: Iterable[int], num_values: int = DEFAULT_NUM_VALUES) -> MinHash:
    """A sketch of features hashed by the caller (64-bit ints), e.g. a scheme of one's own."""
    return MinHash(_ref.sketch_of_hashes(list(hashes), _check_num_values(num_values)))


__all__ = [
    "DEFAULT_NUM_VALUES",
    "EMPTY_VALUE",
    "SCHEME",
    "SHINGLE",
    "MinHash",
    "minhash",
    "minhash_many",
    "minhash_of_hashes",
    "minhash_with_count",
    "shingle_hashes",
    "simhash_and_minhash",
]
