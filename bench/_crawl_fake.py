"""A fingerprint function without extraction, for bench/crawl.py run (d)."""

from __future__ import annotations

import hashlib

from scrapy_simhash.fingerprint import simhash_with_count
from scrapy_simhash.page import PageFingerprint

TEXT = " ".join(f"word{i} token{i % 97} term{i % 31}" for i in range(300))


def fingerprint(body: bytes, url: str | None, encoding: str | None, **options: object) -> PageFingerprint:
    # Pay for hashing an article-sized text, but give every URL its own unrelated
    # fingerprint, so the index sees the unique pages of a real crawl.
    _, count = simhash_with_count(TEXT)
    value = int.from_bytes(hashlib.blake2b((url or "").encode(), digest_size=8).digest(), "big") or 1
    return PageFingerprint(value, count)
