"""What the MinHash-LSH script returns, read back and verified: pure functions, no Redis.

The script (:mod:`.redis_minhash`) returns the records of the candidates sharing a band bucket with
the query; whether each is a match (a shared whole band and enough equal values) is decided here, in
Python, from exactly those records, so that the answer of ``check_and_add`` is the matches before its
own insert.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ...fingerprint.bbit import ValueBits
from ..embedded.minhash_store import LSHMatch


@dataclass(frozen=True)
class Candidate:
    """A stored document the script returned: its seq, key, sketch and raw meta."""

    seq: int
    key: str
    sketch: np.ndarray
    meta: bytes


def decode_record(seq: bytes, record: bytes, num_values: int, bands: int, bits: ValueBits) -> Candidate:
    at = 8 + bits.width * num_values
    sketch = bits.decode(record[8:at], num_values)[0]
    at += 8 * bands
    key_len = int.from_bytes(record[at : at + 4], "big")
    key = record[at + 4 : at + 4 + key_len].decode()
    return Candidate(int(seq), key, sketch, record[at + 4 + key_len :])


def verify(
    query: np.ndarray, candidates: list[Candidate], bands: int, rows: int, min_matches: int, bits: ValueBits
) -> list[LSHMatch]:
    """The candidates sharing a whole band with ``query`` (reduced to ``bits``) whose estimated Jaccard
    is at least the threshold (``min_matches`` equal positions), best first, ties oldest first:
    MinHashLSH's answer."""
    if not candidates:
        return []
    nv, width = query.shape[0], bands * rows
    eq = np.stack([c.sketch for c in candidates]) == query
    counts = np.count_nonzero(eq, axis=1)
    ok = (counts >= min_matches) & eq[:, :width].reshape(-1, bands, rows).all(axis=2).any(axis=1)
    chosen = sorted((-int(counts[i]), candidates[i].seq, i) for i in np.flatnonzero(ok).tolist())
    return [
        LSHMatch(
            candidates[i].key,
            bits.similarity(-c, nv),
            json.loads(candidates[i].meta) if candidates[i].meta else {},
        )
        for c, _, i in chosen
    ]
