"""find_all / clusters against brute force, including identical fingerprints and distance exactly k."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.index import LayoutError
from scrapy_simhash.index.tables.batch import cluster_groups, clusters, find_all, popcount64, popcount64_swar

MASK = (1 << 64) - 1


def brute_pairs(hashes: list[int], k: int) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i in range(len(hashes))
        for j in range(i + 1, len(hashes))
        if bin(hashes[i] ^ hashes[j]).count("1") <= k
    ]


def flip(value: int, bits: list[int]) -> int:
    for b in bits:
        value ^= 1 << b
    return value


@st.composite
def planted(draw: st.DrawFn, max_k: int = 6) -> tuple[list[int], int]:
    """Random fingerprints plus neighbours planted at distances 0 .. k + 2 (identical copies too)."""
    k = draw(st.integers(0, max_k))
    seeds = draw(st.lists(st.integers(1, MASK), min_size=1, max_size=25))
    hashes = list(seeds)
    for seed in seeds:
        for _ in range(draw(st.integers(0, 3))):
            distance = draw(st.integers(0, k + 2))
            bits = draw(st.lists(st.integers(0, 63), min_size=distance, max_size=distance, unique=True))
            hashes.append(flip(seed, bits))
    order = draw(st.permutations(range(len(hashes))))
    return [hashes[i] for i in order], k


@settings(max_examples=150, deadline=None)
@given(planted())
def test_find_all_equals_brute_force(case: tuple[list[int], int]) -> None:
    hashes, k = case
    got = find_all(hashes, k)
    assert got.dtype == np.int64 and got.shape[1] == 2
    assert [tuple(p) for p in got.tolist()] == brute_pairs(hashes, k)


@settings(max_examples=60, deadline=None)
@given(
    planted(max_k=3), st.sampled_from(["blocks:5", "blocks:4", "tiered:4:1:4:1", "tiered:5:2:4:1", "auto"])
)
def test_find_all_other_layouts(case: tuple[list[int], int], layout: str) -> None:
    hashes, k = case
    got = find_all(hashes, k, layout=layout)
    assert [tuple(p) for p in got.tolist()] == brute_pairs(hashes, k)


def test_distance_exactly_k_and_identical_are_pairs() -> None:
    base = 0x0123456789ABCDEF
    hashes = [base, base, flip(base, [0, 17, 40]), flip(base, [1, 2, 3, 4])]
    assert find_all(hashes, 3).tolist() == [[0, 1], [0, 2], [1, 2]]


def test_many_identical_fingerprints_give_every_pair() -> None:
    hashes = np.full(60, 0xDEADBEEF, dtype=np.uint64)
    assert len(find_all(hashes, 3)) == 60 * 59 // 2


def test_random_million_scale_sample_agrees_with_brute_force() -> None:
    rng = np.random.default_rng(7)
    seeds = rng.integers(1, 2**63, size=400, dtype=np.uint64)
    noise = rng.integers(0, 64, size=(400, 3))
    near = seeds ^ np.bitwise_or.reduce(np.uint64(1) << noise.astype(np.uint64), axis=1)
    hashes = np.concatenate([seeds, near, rng.integers(1, 2**63, size=1200, dtype=np.uint64)])
    got = find_all(hashes, 3, blocks=5)
    dist = popcount64(hashes[:, None] ^ hashes[None, :])
    i, j = np.nonzero(np.triu(dist <= 3, 1))
    assert np.array_equal(got, np.stack([i, j], axis=1))


def test_popcount_fallback_matches_python() -> None:
    values = np.array([0, 1, MASK, 0x8000000000000001, 0x0F0F0F0F0F0F0F0F], dtype=np.uint64)
    expected = [bin(int(v)).count("1") for v in values]
    assert popcount64(values).tolist() == expected
    assert popcount64_swar(values).tolist() == expected


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        find_all([-1, 2], 3)
    with pytest.raises(ValueError):
        find_all([1 << 64], 3)
    with pytest.raises(LayoutError):
        find_all([1, 2], 3, blocks=3)
    with pytest.raises(LayoutError):
        find_all([1, 2], 9)
    assert find_all([], 3).shape == (0, 2)
    assert find_all([5], 3).shape == (0, 2)


def brute_labels(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))

    def root(x: int) -> int:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return [root(i) for i in range(n)]


@settings(max_examples=100, deadline=None)
@given(planted(max_k=4))
def test_clusters_equal_union_find(case: tuple[list[int], int]) -> None:
    hashes, k = case
    labels = clusters(hashes, k)
    assert labels.tolist() == brute_labels(len(hashes), brute_pairs(hashes, k))


@settings(max_examples=100, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1))))
    )
)
def test_clusters_from_pairs_chain_transitively(case: tuple[int, list[tuple[int, int]]]) -> None:
    n, pairs = case
    labels = clusters(pairs=np.array(pairs, dtype=np.int64).reshape(-1, 2), n=n)
    assert labels.tolist() == brute_labels(n, pairs)


def test_cluster_groups_lists_members() -> None:
    base = 0xABCDEF0123456789
    hashes = [base, 0x1111, flip(base, [3]), 0x2222, flip(base, [3, 9])]
    labels = clusters(hashes, 1)
    assert labels.tolist() == [0, 1, 0, 3, 0]
    assert [g.tolist() for g in cluster_groups(labels)] == [[0, 2, 4]]


def test_clusters_rejects_out_of_range_pairs() -> None:
    with pytest.raises(ValueError):
        clusters(pairs=np.array([[0, 5]]), n=3)


@pytest.mark.parametrize("mode", ["simhash", "verified"])
def test_add_many_checks_every_item_before_it_writes(tmp_path, mode: str) -> None:
    """A batch's fingerprints and keys are checked on a fast path for plain ints and str: what it
    lets through is what the full check accepts (numpy integers, int subclasses), and one bad item
    (a bool, 0, a 65-bit int, an empty or non-str key) stores nothing of the batch."""
    import enum

    from scrapy_simhash.index import open_index

    class Flag(enum.IntEnum):
        A = 0x77

    with open_index(tmp_path / mode, mode=mode) as index:
        index.add_many([(np.uint64(2**64 - 1), "numpy"), (Flag.A, "intenum"), (0x55, "plain")])
        assert index.get("numpy").simhash == 2**64 - 1 and index.get("intenum").simhash == 0x77
        for bad, error in (
            ((True, "b"), TypeError),
            ((0, "b"), ValueError),
            ((2**64, "b"), ValueError),
            ((-1, "b"), ValueError),
            ((0x1, ""), ValueError),
            ((0x1, b"bytes"), TypeError),
        ):
            with pytest.raises(error):
                index.add_many([(0x10, "first"), bad, (0x20, "last")])
        assert len(index) == 3 and "first" not in index and "last" not in index
