"""The pairwise decision rule (scrapy_simhash.decision): what compare() says and why."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import PageFingerprint, Rule, compare, fingerprint_page
from scrapy_simhash.decision import DEFAULT_RULE
from scrapy_simhash.fingerprint.minhash import MinHash


def _article(seed: int, sentences: int = 40) -> list[str]:
    rng = random.Random(seed)
    words = [f"w{seed}x{i}" for i in range(600)] + ["the", "of", "and", "a", "to", "in"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(8, 16))) + "." for _ in range(sentences)]


def _page(sentences: list[str]) -> bytes:
    paragraphs = "".join(f"<p>{' '.join(sentences[i : i + 4])}</p>" for i in range(0, len(sentences), 4))
    return f"<html><head><title>t</title></head><body><article>{paragraphs}</article></body></html>".encode()


def test_one_sentence_edit_is_a_verified_near_duplicate_with_a_readable_similarity() -> None:
    original = _article(1)
    edited = list(original)
    edited[17] = "An entirely new sentence replaces the old one in the middle of the article."
    a, b = fingerprint_page(_page(original)), fingerprint_page(_page(edited))
    verdict = compare(a, b)
    assert verdict.near_duplicate and verdict.method == "verified"
    assert 0.5 <= verdict.similarity < 1.0
    assert verdict.distance == (a.simhash ^ b.simhash).bit_count()
    assert compare(b, a) == verdict


def test_different_articles_are_not_near_duplicates() -> None:
    a, b = fingerprint_page(_page(_article(1))), fingerprint_page(_page(_article(2)))
    verdict = compare(a, b)
    assert not verdict.near_duplicate
    assert verdict.similarity is not None and verdict.similarity < 0.1


def test_a_page_without_sketch_is_judged_by_simhash_alone() -> None:
    a = fingerprint_page(_page(_article(1)))
    legacy = PageFingerprint(a.simhash ^ 0b111, a.tokens)  # 3 bits away, no sketch (an old record)
    verdict = compare(a, legacy)
    assert verdict == compare(legacy, a)
    assert (verdict.near_duplicate, verdict.distance, verdict.similarity, verdict.method) == (
        True,
        3,
        None,
        "simhash",
    )
    assert not compare(a, PageFingerprint(a.simhash ^ 0b1111, a.tokens)).near_duplicate


def test_simhash_mode_ignores_the_sketches_but_still_reports_the_similarity() -> None:
    original = _article(3)
    edited = original[:-6]  # a shorter copy: far in bits, close in shingles
    a, b = fingerprint_page(_page(original)), fingerprint_page(_page(edited))
    rule = Rule(mode="simhash")
    verdict = compare(a, b, rule)
    assert verdict.method == "simhash" and verdict.similarity is not None
    assert verdict.near_duplicate == (verdict.distance <= rule.distance)


def test_a_page_without_fingerprint_cannot_be_compared() -> None:
    a = fingerprint_page(_page(_article(1)))
    empty = fingerprint_page(b"<html><body></body></html>")
    with pytest.raises(ValueError, match="reason: "):
        compare(a, empty)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mode": "fuzzy"},
        {"distance": 65},
        {"distance": True},
        {"similarity": 0},
        {"bands": 0},
        {"value_bits": 4},
    ],
)
def test_bad_rule_parameters_are_refused(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        Rule(**kwargs)


@settings(max_examples=200, deadline=None)
@given(
    base=st.lists(st.integers(0, 2**32 - 1), min_size=128, max_size=128),
    changed=st.sets(st.integers(0, 127), max_size=128),
    change=st.integers(1, 2**32 - 1),
    flips=st.integers(0, 64),
    value_bits=st.sampled_from([8, 16, 32]),
)
def test_verdict_is_band_share_and_threshold_exactly(
    base: list[int], changed: set[int], change: int, flips: int, value_bits: int
) -> None:
    """The rule on the low ``value_bits`` bits: a change above them is no change; the share of
    equal values is corrected for the 2**-bits chance agreement (b-bit minwise hashing)."""
    a = np.array(base, dtype=np.uint32)
    b = a.copy()
    for i in changed:
        b[i] ^= change
    ha, hb = 0x0123456789ABCDEF, 0x0123456789ABCDEF ^ ((1 << flips) - 1)
    rule = Rule(value_bits=value_bits)
    verdict = rule.compare_values(ha, hb, MinHash(a), MinHash(b))
    differs = change % (1 << value_bits) != 0
    equal = [not (differs and i in changed) for i in range(128)]
    share = any(all(equal[i * 4 : i * 4 + 4]) for i in range(32))
    chance = 0.0 if value_bits == 32 else 2.0**-value_bits
    similarity = max(0.0, (sum(equal) / 128 - chance) / (1 - chance))
    assert verdict.similarity == pytest.approx(similarity, abs=1e-12) and verdict.distance == flips
    assert verdict.near_duplicate == (share and verdict.similarity >= 0.5)


def test_the_default_rule_compares_8_bit_values() -> None:
    """Two sketches equal in every value's low byte are identical to the default rule, not to 32 bits."""
    a = np.arange(128, dtype=np.uint32) * np.uint32(2654435761)
    b = a ^ np.uint32(0xFFFFFF00)
    assert DEFAULT_RULE.value_bits == 8
    assert DEFAULT_RULE.compare_values(1, 1, a, b).similarity == 1.0
    assert Rule(value_bits=32).compare_values(1, 1, a, b).similarity == 0.0
