"""The Redis index's encoding: Manku tables as bit permutations, and the stored record.

Pure functions of the fingerprint (no Redis here): what the Lua script stores and compares is built,
validated and decoded in this module, so a bad insert is refused before anything is sent.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ..base import Match, Meta

MAX64 = (1 << 64) - 1
TABLE_KINDS = ("zset", "hash")


class PermutedTable:
    """One Manku table as a bijection of the 64 bits: the table's key bits first, then the others.

    Keeping all 64 bits (not only the key) lets the script compute the exact distance from the table
    member alone: a permutation of bits preserves Hamming distance.
    """

    def __init__(self, key_positions: Sequence[int]) -> None:
        rest = [p for p in range(63, -1, -1) if p not in set(key_positions)]
        order = [*key_positions, *rest]
        self.prefix_bits = len(key_positions)
        self._low_mask = (1 << (64 - self.prefix_bits)) - 1
        # contiguous runs of source bits: (source shift, width mask, destination shift)
        moves, i, dest = [], 0, 64
        while i < 64:
            j = i
            while j + 1 < 64 and order[j + 1] == order[j] - 1:
                j += 1
            width = j - i + 1
            dest -= width
            moves.append((order[j], (1 << width) - 1, dest))
            i = j + 1
        self._moves = tuple(moves)

    def permute(self, simhash: int) -> int:
        out = 0
        for shift, mask, dest in self._moves:
            out |= ((simhash >> shift) & mask) << dest
        return out

    def probe(self, permuted: int) -> bytes:
        """The permuted value and its bucket's lowest and highest value: 24 bytes for the script."""
        low = permuted & ~self._low_mask
        return b"".join(v.to_bytes(8, "big") for v in (permuted, low, low | self._low_mask))


def default_layout(k: int) -> str:
    """k + 1 blocks, one table each: the fewest tables, hence the least Redis memory per fingerprint.

    Memory grows with the number of tables (one entry each); candidates per lookup grow as
    size * tables / 2**key_bits and are filtered inside Redis. See docs/scaling.md for the trade-off.
    """
    return f"blocks:{k + 1}" if k > 0 else "blocks:1:1"


def encode_record(simhash: int, key_bytes: bytes, meta_bytes: bytes, permuted: Sequence[int]) -> bytes:
    """The stored record, with a fresh request id (recognises a retried call that already ran)."""
    return b"".join(
        [
            simhash.to_bytes(8, "big"),
            os.urandom(8),
            *(p.to_bytes(8, "big") for p in permuted),
            len(key_bytes).to_bytes(4, "big"),
            key_bytes,
            meta_bytes,
        ]
    )


def decode_record(seq8: bytes, distance: int, record: bytes, n_tables: int) -> Match:
    offset = 16 + 8 * n_tables
    key_len = int.from_bytes(record[offset : offset + 4], "big")
    key = record[offset + 4 : offset + 4 + key_len].decode()
    meta_bytes = record[offset + 4 + key_len :]
    return Match(
        key=key,
        simhash=int.from_bytes(record[:8], "big"),
        distance=int(distance),
        meta=json.loads(meta_bytes) if meta_bytes else {},
        seq=int.from_bytes(seq8, "big"),
    )


def check_simhash(simhash: int) -> None:
    if isinstance(simhash, bool) or not isinstance(simhash, int):
        raise TypeError(f"a simhash is an int, got {type(simhash).__name__}")
    if simhash == 0:
        raise ValueError("the fingerprint 0 (a text without tokens) cannot be indexed")
    if not 0 < simhash <= MAX64:
        raise ValueError(f"a simhash is an unsigned 64-bit int, got {simhash}")


def check_key(key: str) -> None:
    if not isinstance(key, str):
        raise TypeError(f"key must be a str, got {type(key).__name__}")


def encode_row(simhash: int, key: str, meta: Meta | None) -> tuple[int, bytes, bytes]:
    """A validated, encoded insert; raises before anything is sent."""
    check_simhash(simhash)
    check_key(key)
    return simhash, key.encode(), encode_meta(meta)


def encode_meta(meta: Meta | None) -> bytes:
    if not meta:
        return b""
    try:
        return json.dumps(dict(meta), ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        raise ValueError(f"meta must be a JSON-serialisable mapping: {exc}") from exc
