"""How a page's main text changed since its URL's last capture: four kinds, from cheap to costly.

- ``unchanged``: the same payload (equal payload digests, the bytes received are identical);
- ``same-text``: other bytes, the same main text (equal text digests: only ads, timestamps, markup or
  boilerplate changed);
- ``minor``: the text changed, but the decision rule still judges the two captures near-duplicates
  (the similarity says how close they are);
- ``changed``: the rule says they are different pages now.

The text is compared by its digest (:func:`scrapy_simhash.page.text_digest`), not by fingerprints:
two different texts may share a simhash, never (in practice) a sha1.
"""

from __future__ import annotations

from dataclasses import dataclass

from .decision import DEFAULT_RULE, Rule
from .fingerprint.minhash import MinHash
from .index.archive.captures import Capture

UNCHANGED = "unchanged"
SAME_TEXT = "same-text"
MINOR = "minor"
CHANGED = "changed"
KINDS = (UNCHANGED, SAME_TEXT, MINOR, CHANGED)
TEXT_UNCHANGED = frozenset({UNCHANGED, SAME_TEXT})
"""The kinds whose main text is the one already captured (``SIMHASH_ACTION = "drop_unchanged"``)."""


@dataclass(frozen=True)
class Change:
    """A capture compared with its URL's previous (last) capture."""

    kind: str
    similarity: float | None
    """Estimated Jaccard similarity of the two sketches (1.0 for ``unchanged`` and ``same-text``);
    None when a capture has no sketch (simhash mode)."""
    distance: int
    """Hamming distance of the two simhashes, in bits."""
    previous: Capture


def classify(previous: Capture, current: Capture, rule: Rule = DEFAULT_RULE) -> Change:
    """The change from ``previous`` to ``current`` (two captures of one URL)."""
    distance = (previous.simhash ^ current.simhash).bit_count()
    if previous.payload_digest == current.payload_digest:
        return Change(UNCHANGED, 1.0, distance, previous)
    if previous.text_digest is not None and previous.text_digest == current.text_digest:
        return Change(SAME_TEXT, 1.0, distance, previous)
    verdict = rule.compare_values(previous.simhash, current.simhash, _sketch(previous), _sketch(current))
    return Change(MINOR if verdict.near_duplicate else CHANGED, verdict.similarity, distance, previous)


def _sketch(capture: Capture) -> MinHash | None:
    return None if capture.sketch is None else MinHash.from_text(capture.sketch)
