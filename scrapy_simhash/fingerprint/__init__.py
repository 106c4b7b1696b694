"""simhash-doc/1 fingerprints: tokens, lookup3 token hashes, 64-bit simhash, text forms.

``simhash(text)`` is the whole scheme; the pieces are public for callers who
tokenise, weight or shingle themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from . import backend
from .backend import Backend, set_backend
from .codecs import from_base32, from_hex, parse, to_base32, to_hex
from .tokenizer import normalize, shingles, tokens

SCHEME = "simhash-doc/1"
"""Label of the default scheme: distinct tokens, weight 1 each."""


def shingle_scheme(n: int) -> str:
    """Label of the opt-in scheme whose features are ``n``-token shingles."""
    return SCHEME if n == 1 else f"{SCHEME}+shingles{n}"


def _backend(name: str | None) -> Backend:
    return backend.current() if name is None else backend.get(name)


def jenkins64(data: bytes, *, implementation: str | None = None) -> int:
    """64-bit lookup3 hash of ``data``: ``hashlittle2(data, 0, 0)`` as ``c | b << 32``."""
    return _backend(implementation).jenkins64(data)


def simhash_features(features: Iterable[str], *, implementation: str | None = None) -> int:
    """Simhash of the *distinct* ``features``, weight 1 each (duplicates count once)."""
    return _backend(implementation).simhash_features(set(features))


def simhash_weighted(
    weights: Mapping[str, float] | Iterable[tuple[str, float]], *, implementation: str | None = None
) -> int:
    """Simhash with an explicit weight per feature (for schemes of your own)."""
    pairs = weights.items() if isinstance(weights, Mapping) else weights
    return _backend(implementation).simhash_weighted([(str(f), w) for f, w in pairs])


def simhash(text: str, *, shingle: int = 1, implementation: str | None = None) -> int:
    """The simhash-doc/1 fingerprint of ``text`` (0 when it has no tokens).

    With ``shingle=n > 1`` the features are n-token shingles, a different
    scheme labelled by :func:`shingle_scheme`.
    """
    return simhash_with_count(text, shingle=shingle, implementation=implementation)[0]


def simhash_with_count(text: str, *, shingle: int = 1, implementation: str | None = None) -> tuple[int, int]:
    """``(simhash, token count)`` in one pass; callers skip texts with too few tokens."""
    if shingle == 1:
        return _backend(implementation).simhash_text(text)
    found = tokens(text)
    return simhash_features(shingles(found, shingle), implementation=implementation), len(found)


_MINHASH_NAMES = ("MinHash", "minhash_many")


def __getattr__(name: str) -> object:
    # minhash-doc/1 needs numpy: imported on first use so that the simhash core stays light.
    # (The function ``minhash`` is ``scrapy_simhash.minhash`` or ``fingerprint.minhash.minhash``:
    # here ``minhash`` is the submodule.)
    if name in _MINHASH_NAMES:
        from . import minhash

        return getattr(minhash, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def hamming(a: int, b: int) -> int:
    """Number of differing bits of two 64-bit fingerprints."""
    return (a ^ b).bit_count()


def similarity(a: int, b: int) -> float:
    """1 - hamming/64: 1.0 for identical fingerprints."""
    return 1.0 - hamming(a, b) / 64


__all__ = [
    "SCHEME",
    "Backend",
    "MinHash",
    "from_base32",
    "from_hex",
    "hamming",
    "jenkins64",
    "minhash_many",
    "normalize",
    "parse",
    "set_backend",
    "shingle_scheme",
    "shingles",
    "simhash",
    "simhash_features",
    "simhash_weighted",
    "simhash_with_count",
    "similarity",
    "to_base32",
    "to_hex",
    "tokens",
]
