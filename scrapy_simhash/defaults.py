"""Defaults shared by every layer (Scrapy settings, command line, WARC tools).

The values are chosen from measurements on real pages: see docs/quality.md.
"""

DISTANCE = 3
"""Near-duplicate when the Hamming distance is at most this (simhash-doc/1 recommends 3)."""

MIN_TOKENS = 30
"""Pages whose main text has fewer tokens are not fingerprinted: short texts collide too easily."""

MODE = "verified"
"""How a near-duplicate is decided: ``verified`` (candidates that share an LSH band of the
minhash-doc/1 sketches, kept when their estimated Jaccard similarity is at least SIMILARITY) or
``simhash`` (the Hamming distance of the simhash-doc/1 fingerprints is at most DISTANCE)."""

MODES = ("verified", "simhash")

SIMILARITY = 0.5
"""Verified mode: near-duplicate when the sketches' estimated Jaccard similarity is at least this.
On the quality harness no unrelated pair of corpus pages comes above 0.14; see docs/quality.md."""

BANDS = 32
ROWS = 4
"""Verified mode's candidate stage: 32 LSH bands of 4 sketch values (a pair is a candidate when
one band is equal). It catches a pair of similarity 0.5 with probability 0.87, 0.7 with 0.9995."""

VALUE_BITS = 8
"""Verified mode compares the low 8 bits of each sketch value, with the estimate corrected for the
1/256 chance that two unequal values agree there (b-bit minwise hashing): the same decisions as the
full 32 bits on the quality harness, and an index keeps 128 bytes of sketch per page instead of 512."""
