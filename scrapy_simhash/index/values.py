"""What the embedded index accepts: fingerprints, keys and meta, checked before anything is stored."""

from __future__ import annotations

import json
import operator
from typing import Any

from .base import Meta

_MASK64 = (1 << 64) - 1


def check_simhash(value: Any) -> int:
    """A valid, storable fingerprint: an unsigned 64-bit int other than 0."""
    if type(value) is int and 0 < value <= _MASK64:  # the common case first: a batch checks every row
        return value
    if isinstance(value, bool):
        raise TypeError("a fingerprint is an int, not bool")
    try:
        h = operator.index(value)
    except TypeError:
        raise TypeError(f"a fingerprint is an int, not {type(value).__name__}") from None
    if h == 0:
        raise ValueError("the fingerprint 0 (a text without tokens) cannot be indexed or queried")
    if not 0 < h <= _MASK64:
        raise ValueError(f"a fingerprint is an unsigned 64-bit integer, got {h}")
    return h


def check_key(key: Any) -> str:
    """A valid key: a non-empty str."""
    if not isinstance(key, str):
        raise TypeError(f"a key is a str, not {type(key).__name__}")
    if not key:
        raise ValueError("a key must not be empty")
    return key


def encode_meta(key: str, meta: Meta | None) -> str | None:
    """Meta as stored: compact JSON text (None for no meta); ValueError when it is not JSON."""
    if meta is None:
        return None
    try:
        return json.dumps(dict(meta), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta of {key!r} must be a JSON-serialisable mapping: {exc}") from None
