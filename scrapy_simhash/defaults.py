"""Defaults shared by every layer (Scrapy settings, command line, WARC tools).

The values are chosen from measurements on real pages: see docs/quality.md.
"""

DISTANCE = 3
"""Near-duplicate when the Hamming distance is at most this (simhash-doc/1 recommends 3)."""

MIN_TOKENS = 30
"""Pages whose main text has fewer tokens are not fingerprinted: short texts collide too easily."""
