"""Shared by the quality harnesses: scores of judged pairs, and the beta-binomial tail model."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TextIO

import numpy as np


def beta_binomial_pmf(hist: np.ndarray, n: int) -> np.ndarray:
    """P(X = x) for x = 0..n under a beta-binomial(n) fitted to ``hist``'s mean and variance.

    Each pair of unrelated pages agrees on each bit (or sketch value) with its own probability
    p ~ Beta(a, b): the overdispersed binomial that fits unrelated pages far better than a plain
    binomial. Without overdispersion it is the plain binomial.
    """
    x = np.arange(len(hist))
    total = hist.sum()
    mean = float((hist * x).sum() / total)
    var = float((hist * (x - mean) ** 2).sum() / total)
    p = mean / n
    rho = (var / (n * p * (1 - p)) - 1) / (n - 1)
    if rho <= 0:
        return np.array([math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)])
    s = 1 / rho - 1
    a, b = p * s, (1 - p) * s
    const = math.lgamma(n + 1) - math.lgamma(n + a + b) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    return np.array(
        [
            math.exp(
                const
                - math.lgamma(k + 1)
                - math.lgamma(n - k + 1)
                + math.lgamma(k + a)
                + math.lgamma(n - k + b)
            )
            for k in range(n + 1)
        ]
    )


def scores(hits: dict[str, list[bool]], false_matches: int) -> tuple[float, float, float]:
    """(precision, recall, F1) of judged positives ``hits`` (per kind) given the false matches."""
    tp = sum(sum(v) for v in hits.values())
    total = sum(len(v) for v in hits.values())
    precision = tp / (tp + false_matches) if tp + false_matches else 1.0
    recall = tp / total if total else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def print_header(out: TextIO, leading: Iterable[str], kinds: Iterable[str], trailing: Iterable[str]) -> None:
    """A markdown table's header: the leading columns, one per kind of change, the trailing ones."""
    columns = [*leading, *kinds, *trailing]
    print("| " + " | ".join(columns) + " |", file=out)
    print("|" + "---|" * len(columns), file=out)
