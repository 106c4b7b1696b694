"""Batch all-pairs and clusters over MinHash sketches: exactly the verified LSH pairs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_lsh import minhash_sets, planted_pairs

from scrapy_simhash.index.lsh.lsh import MinHashLSH, min_matches_for
from scrapy_simhash.index.lsh.minhash_batch import PAIR_DTYPE, minhash_clusters, minhash_pairs


def brute_force_pairs(s: np.ndarray, threshold: float, bands: int, rows: int, lsh: bool) -> dict:
    """{(i, j): similarity} over all i < j with estimate >= threshold (and sharing a band if lsh)."""
    n, num_values = s.shape
    m = min_matches_for(threshold, num_values)
    out = {}
    for i in range(n):
        for j in range(i + 1, n):
            eq = s[i] == s[j]
            shares = any(eq[t * rows : (t + 1) * rows].all() for t in range(bands))
            if eq.sum() >= m and (shares or not lsh):
                out[(i, j)] = float(eq.sum()) / num_values
    return out


def as_dict(pairs: np.ndarray) -> dict:
    return {(int(i), int(j)): float(s) for i, j, s in pairs.tolist()}


@st.composite
def sketch_batches(draw):
    num_values = draw(st.sampled_from([4, 8, 12, 16]))
    alphabet = draw(st.integers(1, 4))
    n = draw(st.integers(0, 30))
    values = draw(st.lists(st.integers(0, alphabet - 1), min_size=n * num_values, max_size=n * num_values))
    s = np.array(values, dtype=np.uint32).reshape(n, num_values) * np.uint32(2654435761)
    bands = draw(st.integers(1, num_values))
    rows = draw(st.integers(1, num_values // bands))
    threshold = draw(st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.8, 1.0]))
    return s, bands, rows, threshold


@settings(max_examples=200, deadline=None)
@given(sketch_batches())
def test_pairs_are_exactly_the_brute_force_lsh_pairs(case):
    s, bands, rows, threshold = case
    got = minhash_pairs(s, threshold, bands, rows)
    assert got.dtype == PAIR_DTYPE
    assert (got["i"] < got["j"]).all()
    keys = list(zip(got["i"].tolist(), got["j"].tolist(), strict=True))
    assert keys == sorted(set(keys))  # each pair once, sorted by i then j
    assert (got["similarity"] >= threshold).all()
    assert as_dict(got) == brute_force_pairs(s, threshold, bands, rows, lsh=True)
    exact = minhash_pairs(s, threshold, bands, rows, exact=True)
    assert as_dict(exact) == brute_force_pairs(s, threshold, bands, rows, lsh=False)
    assert set(as_dict(got)) <= set(as_dict(exact))


@settings(max_examples=100, deadline=None)
@given(sketch_batches())
def test_pairs_equal_the_index_answers(case):
    s, bands, rows, threshold = case
    index = MinHashLSH(threshold, s.shape[1], bands, rows)
    index.add_many((str(i), s[i]) for i in range(s.shape[0]))
    from_index = {}
    for i, res in enumerate(index.query_many(s)):
        for key, sim in res:
            if int(key) > i:
                from_index[(i, int(key))] = sim
    assert as_dict(minhash_pairs(s, threshold, bands, rows)) == from_index


@settings(max_examples=100, deadline=None)
@given(sketch_batches(), st.sampled_from([8, 32]), st.integers(0, 2**32 - 1))
def test_pairs_on_fewer_bits_equal_the_index_answers(case, value_bits: int, seed: int) -> None:
    """With ``value_bits`` (the verified rule's 8) the batch pairs are the index's, values that differ
    only above their low byte counting as equal at 8 bits; ``exact=True`` is every pair at the threshold."""
    s, bands, rows, threshold = case
    noise = np.random.default_rng(seed).integers(0, 2, size=s.shape, dtype=np.uint32) << np.uint32(12)
    s = s ^ noise
    index = MinHashLSH(threshold, s.shape[1], bands, rows, value_bits=value_bits)
    index.add_many((str(i), s[i]) for i in range(s.shape[0]))
    from_index = {
        (i, int(key)): sim for i, res in enumerate(index.query_many(s)) for key, sim in res if int(key) > i
    }
    got = minhash_pairs(s, threshold, bands, rows, value_bits=value_bits)
    assert as_dict(got) == from_index
    exact = as_dict(minhash_pairs(s, threshold, bands, rows, exact=True, value_bits=value_bits))
    low = s & np.uint32((1 << value_bits) - 1)
    m = index.min_matches
    want = {(i, j) for i in range(len(s)) for j in range(i + 1, len(s)) if int((low[i] == low[j]).sum()) >= m}
    assert set(exact) == want and set(as_dict(got)) <= want


def _components(n: int, pairs: dict) -> list[int]:
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in pairs:
        a, b = find(i), find(j)
        parent[max(a, b)] = min(a, b)
    return [min(k for k in range(n) if find(k) == find(i)) for i in range(n)]


@settings(max_examples=100, deadline=None)
@given(sketch_batches())
def test_clusters_are_the_connected_components_labelled_by_lowest_index(case):
    s, bands, rows, threshold = case
    labels = minhash_clusters(s, threshold, bands, rows)
    expected = _components(s.shape[0], brute_force_pairs(s, threshold, bands, rows, lsh=True))
    assert labels.tolist() == expected


def test_planted_pairs_recall_and_clusters():
    """Pairs with exact Jaccard uniform in [0.85, 1]: the batch finds >= 99% at the derived bands."""
    a_sets, b_sets, _ = planted_pairs(3000, 0.85, 1.0, seed=21)
    s = minhash_sets([*a_sets, *b_sets], 128, seed=22)
    n = len(a_sets)
    pairs = minhash_pairs(s, 0.8)
    found = {(int(i), int(j)) for i, j in zip(pairs["i"], pairs["j"], strict=True)}
    recall = np.mean([(p, p + n) in found for p in range(n)])
    print(f"\nbatch recall on {n} planted pairs: {recall:.4f}; {len(pairs)} pairs returned")
    assert recall >= 0.99
    assert all(j == i + n for i, j in found)  # sets of different plants are disjoint
    labels = minhash_clusters(s, 0.8)
    for i, j in found:
        assert labels[i] == labels[j] == i


def test_identical_sketches_make_one_cluster_and_every_pair_once():
    s = np.tile(np.arange(64, dtype=np.uint32), (40, 1))
    pairs = minhash_pairs(s, 0.9)
    assert len(pairs) == 40 * 39 // 2 and (pairs["similarity"] == 1.0).all()
    assert (minhash_clusters(s, 0.9) == 0).all()


def test_small_and_bad_inputs():
    assert len(minhash_pairs(np.zeros((0, 64), dtype=np.uint32), 0.8)) == 0
    assert len(minhash_pairs(np.zeros((1, 64), dtype=np.uint32), 0.8)) == 0
    assert minhash_clusters(np.zeros((0, 64), dtype=np.uint32), 0.8).tolist() == []
    with pytest.raises(TypeError, match="uint32"):
        minhash_pairs(np.zeros((3, 64), dtype=np.float32), 0.8)
    with pytest.raises(ValueError, match="shape"):
        minhash_pairs(np.zeros(64, dtype=np.uint32), 0.8)
    with pytest.raises(ValueError, match="threshold"):
        minhash_pairs(np.zeros((3, 64), dtype=np.uint32), 1.2)
