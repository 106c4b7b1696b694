"""b-bit sketch values (Li & König, WWW 2010): would the verified rule keep its quality on fewer bits?

Called by ``bench/quality_verified.py`` with the pairs it judged. An index that kept only the low
``b`` bits of each of the 128 minhash-doc/1 values would store ``16 * b`` bytes of sketch per page
instead of 512 (``b = 8``: 128 B, the size that lets a verified index fit ~400 B per page). Two
unequal values then still agree with probability ``C = 2**-b``, so the estimated Jaccard becomes
``(P - C) / (1 - C)`` where ``P`` is the share of equal b-bit values; bands are cut from the b-bit
values. This section applies that rule at the shipped threshold, bands and rows, side by side with
the full 32-bit rule, on the same positives, negatives and every pair of different corpus pages.
This measurement is why the shipped rule compares 8 bits (``Rule.value_bits``).
"""

from __future__ import annotations

import math
from typing import Any, TextIO

import numpy as np
from _stats import beta_binomial_pmf, print_header, scores

from scrapy_simhash.decision import Rule

BITS = (32, 16, 8, 4)
PAGES = 10_000_000


def _equal_needed(rule: Rule, bits: int, nv: int) -> int:
    """Fewest equal b-bit values whose corrected estimate reaches the threshold."""
    chance = 0.0 if bits >= 32 else 2.0**-bits
    return math.ceil((rule.similarity * (1 - chance) + chance) * nv - 1e-9)


def _judge(rule: Rule, bits: int, a: np.ndarray, b: np.ndarray) -> bool:
    mask = np.uint32(0xFFFFFFFF if bits >= 32 else (1 << bits) - 1)
    equal = (a & mask) == (b & mask)
    width = rule.bands * rule.rows
    shared = bool(equal[:width].reshape(rule.bands, rule.rows).all(axis=1).any())
    return shared and int(np.count_nonzero(equal)) >= _equal_needed(rule, bits, a.shape[0])


def report_bbit(
    pos: dict[str, list[tuple[Any, Any]]],
    neg: list[tuple[Any, Any]],
    same_site: list[tuple[Any, Any]],
    sk: np.ndarray,
    unrelated: list[np.ndarray],
    rule: Rule,
    out: TextIO,
) -> dict[str, Any]:
    """Print the b-bit table; ``unrelated[i]`` masks the pairs (i, j > i) of ``sk`` that are unrelated."""
    nv = sk.shape[1]
    n = sk.shape[0]
    print("## b-bit sketch values: the shipped rule on fewer bits per value\n", file=out)
    print(
        f"The low b bits of each of the {nv} values; estimate (P - 2^-b) / (1 - 2^-b); {rule.bands} x "
        f"{rule.rows} bands cut from the b-bit values; near-duplicate at estimate >= {rule.similarity}. "
        f"Unrelated: all pairs of different corpus pages; expected false matches among {PAGES:,} pages "
        "from a beta-binomial fitted to their equal-value counts (fewer bits add chance agreement, which the "
        "fit treats as less overdispersion: compare the rows' false-match columns, not the tails). *chance*: "
        "band candidates per page at 10M between pages that share no value, from chance agreement alone.\n",
        file=out,
    )
    print_header(
        out,
        ["bits", "sketch bytes/page", "F1", "precision", "recall"],
        pos,
        ["same-site FP", "unrelated judged", "unrelated band candidates/page at 10M", "expected FP 10M"],
    )
    summary: dict[str, Any] = {}
    for bits in BITS:
        mask = np.uint32(0xFFFFFFFF if bits >= 32 else (1 << bits) - 1)
        need = _equal_needed(rule, bits, nv)

        def judged(a: Any, b: Any, bits: int = bits) -> bool:
            return b is not None and _judge(rule, bits, a.values, b.values)

        hits = {kind: [judged(a, b) for a, b in pairs] for kind, pairs in pos.items()}
        fp = sum(judged(a, b) for a, b in neg)
        fp_site = sum(judged(a, b) for a, b in same_site)
        precision, recall, f1 = scores(hits, fp)
        masked = sk & mask
        histogram = np.zeros(nv + 1, dtype=np.int64)
        judged_unrelated = candidates = pairs_seen = 0
        width = rule.bands * rule.rows
        for i in range(n - 1):
            keep = unrelated[i]
            eq = masked[i + 1 :][keep] == masked[i]
            counts = eq.sum(axis=1)
            histogram += np.bincount(counts, minlength=nv + 1)
            shared = eq[:, :width].reshape(-1, rule.bands, rule.rows).all(axis=2).any(axis=1)
            candidates += int(shared.sum())
            judged_unrelated += int((shared & (counts >= need)).sum())
            pairs_seen += int(keep.sum())
        expected = float(beta_binomial_pmf(histogram, nv)[need:].sum()) * PAGES * (PAGES - 1) / 2
        rate = candidates / pairs_seen if pairs_seen else 0.0
        per_kind = " | ".join(f"{sum(v) / len(v):.3f}" for v in hits.values())
        chance = rule.bands * 2.0 ** (-bits * rule.rows) * PAGES  # pairs of pages sharing nothing
        shipped = " (shipped)" if bits == rule.value_bits else ""
        print(
            f"| {bits}{shipped} | {nv * bits // 8} | {f1:.4f} | {precision:.4f} | {recall:.4f} | {per_kind} "
            f"| {fp_site} | {judged_unrelated} of {pairs_seen:,} | {rate * PAGES:.2f} (chance {chance:.1e}) "
            f"| {expected:.1e} |",
            file=out,
        )
        summary[str(bits)] = {
            "f1": f1,
            "precision": precision,
            "recall": recall,
            "same_site_false": fp_site,
            "unrelated_judged": judged_unrelated,
            "unrelated_candidates_per_page_10M": rate * PAGES,
            "chance_candidates_per_page_10M": chance,
            "expected_false_matches_10M": expected,
        }
    print(file=out)
    return summary
