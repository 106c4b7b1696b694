"""The one interface every near-duplicate index backend implements.

Backends: the embedded index (:mod:`.embedded`, a local directory, no server)
and the Redis index (:mod:`.redis_store`, shared by many crawler processes).
Callers (the Scrapy middleware, the WARC tools, the command line) only ever see
this interface, obtained from :func:`scrapy_simhash.index.open_index`.

Semantics shared by all backends:

- ``key`` is the caller's unique identifier of a document (a URL, a
  WARC-Record-ID). Adding an existing key replaces its fingerprint and meta.
- ``meta`` is a small JSON-serialisable mapping (url, date, record id, ...).
- ``query`` returns *every* stored fingerprint within Hamming distance ``k``:
  identical fingerprints, one fingerprint stored under several keys, and
  distance exactly ``k`` included; ordered by distance, then by age (oldest
  first), so ``matches[0]`` is the best and earliest original.
- ``check_and_add`` is atomic: the matches that existed before the insert,
  then the insert. Two concurrent callers with near-duplicate pages cannot both
  see "no match".
- An insert is acknowledged when the call returns; it survives a crash.
- The fingerprint 0 (a text without tokens) is refused with ValueError.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

Meta = Mapping[str, Any]


@dataclass(frozen=True, order=False)
class Match:
    """A stored fingerprint found by a query (or fetched by key)."""

    key: str
    simhash: int
    distance: int
    meta: dict[str, Any] = field(default_factory=dict)
    seq: int = 0
    """Insertion order (age): smaller is older. Ties in distance are ordered by it."""
    similarity: float | None = None
    """Estimated Jaccard similarity of the sketches (0..1); None when the match was decided by
    simhash alone (a side without a sketch, or simhash-only mode)."""

    def __init__(
        self,
        key: str,
        simhash: int,
        distance: int,
        meta: dict[str, Any] | None = None,
        seq: int = 0,
        similarity: float | None = None,
    ) -> None:
        # Frozen all the same: the fields are set once, here, in the instance's __dict__. The __init__
        # a frozen dataclass generates sets each through object.__setattr__: 1.45 µs a Match instead
        # of ~0.6, and a verified hit makes ~5 of them in ~55 µs.
        fields = self.__dict__
        fields["key"] = key
        fields["simhash"] = simhash
        fields["distance"] = distance
        fields["meta"] = {} if meta is None else meta
        fields["seq"] = seq
        fields["similarity"] = similarity


class SimhashIndexError(Exception):
    """Base of the index's own errors."""


class IndexSettingsError(SimhashIndexError, ValueError):
    """The index was created with other settings (scheme, num_values, threshold, bands, rows, value_bits)."""


class IndexCorruptError(SimhashIndexError):
    """A file of the index is damaged and could not be rebuilt automatically."""


class IndexLostError(IndexCorruptError):
    """The index's data is gone from its server (a Redis restarted empty): retrying will not bring it back."""


class IndexLockedError(SimhashIndexError):
    """Another process holds the index open for writing."""


class IndexUnavailableError(SimhashIndexError):
    """The index's server (Redis) cannot be reached."""


class LayoutError(ValueError):
    """The requested table layout cannot guarantee exact answers for this k."""


class NearDuplicateIndex(ABC):
    """Exact near-duplicate lookups over 64-bit fingerprints."""

    k: int
    """Default query distance, and the largest distance the layout guarantees."""

    @abstractmethod
    def add(self, simhash: int, key: str, meta: Meta | None = None) -> None:
        """Store ``simhash`` under ``key`` (replacing what ``key`` held)."""

    def add_many(self, items: Iterable[tuple[int, str, Meta | None]]) -> int:
        """Store many ``(simhash, key, meta)``; one durable commit. Returns the count."""
        count = 0
        for simhash, key, meta in items:
            self.add(simhash, key, meta)
            count += 1
        return count

    @abstractmethod
    def query(self, simhash: int, k: int | None = None) -> list[Match]:
        """Every stored fingerprint within ``k`` (default ``self.k``) of ``simhash``."""

    def query_many(self, simhashes: Iterable[int], k: int | None = None) -> list[list[Match]]:
        """``query`` for each fingerprint; backends override this with a batched path."""
        return [self.query(h, k) for h in simhashes]

    @abstractmethod
    def check_and_add(self, simhash: int, key: str, meta: Meta | None = None) -> list[Match]:
        """Atomically: the matches within ``self.k`` before this insert, then the insert."""

    @abstractmethod
    def remove(self, key: str) -> bool:
        """Forget ``key``; True if it was stored."""

    @abstractmethod
    def get(self, key: str) -> Match | None:
        """The fingerprint stored under ``key`` (distance 0), or None."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of stored keys."""

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def compact(self) -> None:  # noqa: B027 - optional for backends without a merge step
        """Merge recent inserts into the bulk tables (a no-op where meaningless)."""

    @abstractmethod
    def stats(self) -> dict[str, Any]:
        """Sizes and counters for monitoring (``size`` at least)."""

    def notes(self) -> dict[str, str]:
        """What the index records about its pages beside its own settings (the extractor that made
        their fingerprints: :mod:`.extractor_record`); empty where nothing is recorded."""
        return {}

    def note(self, name: str, value: str, *, replacing: str | None = None) -> str:
        """Record ``value`` as note ``name`` unless another value is recorded (or it is ``replacing``):
        compare-and-set, durable when it returns, so that two writers opening an index at the same
        moment agree on one value. Returns the value recorded afterwards."""
        raise SimhashIndexError(f"{type(self).__name__} keeps no notes")

    @abstractmethod
    def close(self) -> None:
        """Flush and release files, locks and connections. Idempotent."""

    def __enter__(self) -> NearDuplicateIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Match]:
        raise NotImplementedError(f"{type(self).__name__} cannot be iterated")
