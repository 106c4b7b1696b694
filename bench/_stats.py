"""The beta-binomial fitted to a histogram: the tail model both quality harnesses extrapolate with."""

from __future__ import annotations

import math

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
