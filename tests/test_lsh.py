"""MinHashLSH: verified answers equal to brute force, recall on planted data, index semantics.

Sketches are built here with classic MinHash over synthetic integer sets (k universal hash
functions ``(a*x + b) mod (2**61 - 1)`` truncated to 32 bits), so the exact Jaccard of every
pair is known, independently of the project's own sketch scheme.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.index.lsh.lsh import (
    MinHashLSH,
    as_sketch,
    band_keys,
    min_matches_for,
    optimal_params,
    recall_at,
    resolve_params,
)

MERSENNE = (1 << 61) - 1
_P = np.uint64(MERSENNE)


def _mod_p(t: np.ndarray) -> np.ndarray:
    t = (t & _P) + (t >> np.uint64(61))
    return np.where(t >= _P, t - _P, t)


def universal_hash(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``((a*x + b) mod (2**61 - 1)) & 0xFFFFFFFF`` for ``x < 2**32``, ``a, b < 2**61`` (uint64, broadcast).

    ``a*x`` does not fit 64 bits, so ``a = a_hi * 2**32 + a_lo`` and ``2**61 = 1 (mod p)``.
    """
    x = x.astype(np.uint64)
    a_hi, a_lo = a >> np.uint64(32), a & np.uint64(0xFFFFFFFF)
    u = a_hi * x  # < 2**61
    high = (u >> np.uint64(29)) + ((u & np.uint64((1 << 29) - 1)) << np.uint64(32))  # u * 2**32 mod p
    total = _mod_p(high) + _mod_p(a_lo * x) + b
    return (_mod_p(total) & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def hash_params(k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.integers(1, MERSENNE, size=k, dtype=np.uint64),
        rng.integers(0, MERSENNE, size=k, dtype=np.uint64),
    )


def minhash_sets(sets: list[np.ndarray], k: int = 128, seed: int = 7) -> np.ndarray:
    """Classic k-function MinHash of each integer set: ``(len(sets), k)`` uint32."""
    a, b = hash_params(k, seed)
    out = np.empty((len(sets), k), dtype=np.uint32)
    # 16 sets at a time: the hash's temporaries then stay in the CPU's cache (256 at a time took 5x longer)
    for start in range(0, len(sets), 16):
        group = sets[start : start + 16]
        flat = np.concatenate(group)
        hashed = universal_hash(flat[:, None], a[None, :], b[None, :])
        offsets = np.cumsum([0] + [len(s) for s in group[:-1]])
        out[start : start + len(group)] = np.minimum.reduceat(hashed, offsets, axis=0)
    return out


def planted_pairs(
    count: int, low: float, high: float, union: int = 200, seed: int = 3
) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """``count`` set pairs (A, B) with exact Jaccard ``c / union`` spread uniformly over [low, high];
    elements are distinct across pairs, so pairs from different plants have Jaccard 0."""
    rng = np.random.default_rng(seed)
    elements = rng.permutation(count * union).astype(np.uint64) * np.uint64(2654435761) % np.uint64(2**32)
    lo_c, hi_c = int(np.ceil(low * union - 1e-9)), int(np.floor(high * union + 1e-9))
    a_sets, b_sets, jac = [], [], np.empty(count)
    for p in range(count):
        c = int(rng.integers(lo_c, hi_c + 1))
        own = elements[p * union : (p + 1) * union]
        only_a = int(rng.integers(0, union - c + 1))
        a_sets.append(own[: c + only_a])
        b_sets.append(np.concatenate([own[:c], own[c + only_a :]]))
        jac[p] = c / union
    return a_sets, b_sets, jac


def brute_force(stored: np.ndarray, query: np.ndarray, bands: int, rows: int, min_matches: int) -> list[int]:
    """Positions sharing a band with ``query`` and with >= ``min_matches`` equal values."""
    eq = stored == query
    share = np.zeros(stored.shape[0], dtype=bool)
    for t in range(bands):
        share |= eq[:, t * rows : (t + 1) * rows].all(axis=1)
    return [i for i in range(stored.shape[0]) if share[i] and eq[i].sum() >= min_matches]


# -- the helpers themselves ------------------------------------------------------------------


def test_universal_hash_equals_python_integers():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 2**32, size=50, dtype=np.uint64)
    a, b = hash_params(16, 1)
    got = universal_hash(x[:, None], a[None, :], b[None, :])
    want = [
        [((int(ai) * int(xi) + int(bi)) % MERSENNE) & 0xFFFFFFFF for ai, bi in zip(a, b, strict=True)]
        for xi in x
    ]
    assert got.tolist() == want


def test_planted_sets_have_the_stated_jaccard():
    a_sets, b_sets, jac = planted_pairs(20, 0.5, 1.0)
    for a, b, j in zip(a_sets, b_sets, jac, strict=True):
        sa, sb = set(a.tolist()), set(b.tolist())
        assert len(sa & sb) / len(sa | sb) == j


# -- parameters ----------------------------------------------------------------------------


def test_optimal_params_equal_datasketch():
    lsh = pytest.importorskip("datasketch.lsh")
    for num_values in (32, 64, 128):
        for threshold in (0.3, 0.5, 0.7, 0.8, 0.85, 0.9, 0.95):
            for weights in ((0.5, 0.5), (0.1, 0.9), (0.05, 0.95)):
                got = optimal_params(threshold, num_values, weights)
                assert got == lsh._optimal_param(threshold, num_values, *weights), (num_values, threshold)


def test_params_overrides_and_errors():
    assert resolve_params(0.8, 128, 16, 8) == (16, 8)
    assert resolve_params(0.8, 128, 10, None) == (10, 12)
    assert resolve_params(0.8, 128, None, 5) == (25, 5)
    assert MinHashLSH(0.8, 64).bands * MinHashLSH(0.8, 64).rows <= 64
    for bad in ((20, 8), (0, 4), (4, 0), (129, None)):
        with pytest.raises(ValueError):
            resolve_params(0.8, 128, *bad)
    for threshold in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError):
            MinHashLSH(threshold)


def test_min_matches_is_the_float_comparison():
    for num_values in (7, 64, 100, 128):
        for threshold in [*np.linspace(0.01, 1.0, 100).tolist(), 0.7, 0.8, 0.9, 0.3]:
            m = min_matches_for(threshold, num_values)
            assert m / num_values >= threshold
            assert m == 0 or (m - 1) / num_values < threshold


def test_band_keys_depend_on_the_band_values_and_position():
    sketch = np.arange(128, dtype=np.uint32)
    keys = band_keys(sketch, 16, 8)
    assert keys.dtype == np.uint64 and keys.shape == (16,)
    assert len(set(keys.tolist())) == 16
    same_values_everywhere = np.zeros(128, dtype=np.uint32)
    assert len(set(band_keys(same_values_everywhere, 16, 8).tolist())) == 16
    changed = sketch.copy()
    changed[9] += 1  # band 1 only
    diff = band_keys(changed, 16, 8) != keys
    assert diff.tolist() == [t == 1 for t in range(16)]
    # the first bands*rows values only; the tail does not enter any key
    tail = sketch.copy()
    tail[127] += 1
    assert (band_keys(tail, 25, 5) == band_keys(sketch, 25, 5)).all()


# -- exactness: hypothesis -----------------------------------------------------------------


@st.composite
def sketch_sets(draw):
    num_values = draw(st.sampled_from([4, 8, 12, 16]))
    alphabet = draw(st.integers(1, 4))  # few distinct values, so bands often collide
    n = draw(st.integers(0, 25))
    values = draw(st.lists(st.integers(0, alphabet - 1), min_size=n * num_values, max_size=n * num_values))
    stored = np.array(values, dtype=np.uint32).reshape(n, num_values) * np.uint32(0x9E3779B1)
    # differences above the low 16 bits: equal to an index that keeps 8 or 16 bits of each value
    noise = draw(st.lists(st.integers(0, 3), min_size=n * num_values, max_size=n * num_values))
    stored ^= np.array(noise, dtype=np.uint32).reshape(n, num_values) << np.uint32(24)
    bands = draw(st.integers(1, num_values))
    rows = draw(st.integers(1, num_values // bands))
    threshold = draw(st.sampled_from([0.1, 0.25, 0.5, 0.6, 0.75, 0.8, 0.9, 1.0]))
    pending_limit = draw(st.sampled_from([1, 3, 1000]))
    value_bits = draw(st.sampled_from([8, 16, 32]))
    return stored, bands, rows, threshold, pending_limit, value_bits, draw(st.randoms(use_true_random=False))


def estimate(equal: int, num_values: int, value_bits: int) -> float:
    """b-bit minwise hashing's estimate: the share of equal values, corrected for chance agreement."""
    chance = 0.0 if value_bits == 32 else 2.0**-value_bits
    return max(0.0, (equal / num_values - chance) / (1 - chance))


@settings(max_examples=150, deadline=None)
@given(sketch_sets())
def test_query_is_exactly_brute_force_and_never_below_threshold(case):
    stored, bands, rows, threshold, pending_limit, value_bits, rnd = case
    n, num_values = stored.shape
    index = MinHashLSH(threshold, num_values, bands, rows, pending_limit=pending_limit, value_bits=value_bits)
    for i in range(n):
        index.add(f"k{i}", stored[i])
    removed = {i for i in range(n) if rnd.random() < 0.3}
    for i in removed:
        assert index.remove(f"k{i}")
    if rnd.random() < 0.5:
        index.compact()
    live = [i for i in range(n) if i not in removed]
    queries = [*stored, np.full(num_values, 0x9E3779B1, dtype=np.uint32), np.zeros(num_values, np.uint32)]
    batched = index.query_many(np.array(queries, dtype=np.uint32).reshape(-1, num_values))
    m = next(m for m in range(num_values + 1) if estimate(m, num_values, value_bits) >= threshold)
    assert index.min_matches == m
    low = np.uint32((1 << value_bits) - 1)
    kept = stored & low
    for q, got_batch in zip(queries, batched, strict=True):
        got = index.query(q)
        expected_pos = [live[p] for p in brute_force(kept[live], q & low, bands, rows, m)] if live else []
        sims = {i: estimate(int((kept[i] == q & low).sum()), num_values, value_bits) for i in expected_pos}
        expected = sorted(expected_pos, key=lambda i: (-sims[i], i))
        assert got == [(f"k{i}", sims[i]) for i in expected]
        assert got_batch == got
        assert all(sim >= threshold for _, sim in got)


# -- recall on planted data ----------------------------------------------------------------


def test_recall_on_planted_pairs_matches_the_s_curve():
    """Pairs with exact Jaccard uniform in [t + 0.05, 1]: recall >= 0.99 at the derived bands/rows.

    The prediction combines the band S-curve with the binomial noise of the 128-value estimate
    (answers are verified by estimate): recall is lowest at t + 0.05 and that edge, not the
    bands, is what limits it. Printed per Jaccard bin with ``pytest -s``.
    """
    threshold, num_values = 0.8, 128
    a_sets, b_sets, jac = planted_pairs(5000, threshold + 0.05, 1.0)
    sa, sb = minhash_sets(a_sets, num_values), minhash_sets(b_sets, num_values)
    index = MinHashLSH(threshold, num_values)
    index.add_many((str(p), sa[p]) for p in range(len(a_sets)))
    results = index.query_many(sb)
    found = np.array([any(k == str(p) for k, _ in res) for p, res in enumerate(results)])
    for res in results:
        assert all(sim >= threshold for _, sim in res)
    predicted = np.array(
        [recall_at(j, index.bands, index.rows, num_values, index.min_matches) for j in jac.tolist()]
    )
    recall = found.mean()
    print(f"\nbands={index.bands} rows={index.rows}: recall {recall:.4f}, predicted {predicted.mean():.4f}")
    for lo in (0.85, 0.875, 0.9, 0.95):
        sel = (jac >= lo) & (jac < lo + (0.025 if lo < 0.9 else 0.05) + 1e-9)
        print(
            f"  J in [{lo:.3f}, ...): {sel.sum()} pairs, recall {found[sel].mean():.4f}, "
            f"predicted {predicted[sel].mean():.4f}"
        )
    assert recall >= 0.99
    sd = np.sqrt((predicted * (1 - predicted)).sum()) / len(jac)
    assert abs(recall - predicted.mean()) <= 4 * sd + 1e-3


def test_default_weights_raise_recall_over_datasketch_defaults():
    """At 128 values and t = 0.8 the (0.5, 0.5) weights leave the S-curve at 0.67 at J = 0.85."""
    b, r = optimal_params(0.8, 128, (0.5, 0.5))
    ours = MinHashLSH(0.8, 128)
    m = ours.min_matches
    assert recall_at(0.85, b, r, 128, m) < 0.7
    assert recall_at(0.85, ours.bands, ours.rows, 128, m) > 0.93


# -- index semantics -----------------------------------------------------------------------


def _noisy_copy(sketch: np.ndarray, changed: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = sketch.copy()
    pos = rng.choice(sketch.shape[0], size=changed, replace=False)
    out[pos] = rng.integers(0, 2**32, size=changed, dtype=np.uint32)
    return out


class _Sketch:
    """Stands for the other engineer's MinHash: anything with ``.values``."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.num_values = values.shape[0]


def test_add_query_remove_get_len_contains():
    rng = np.random.default_rng(5)
    base = rng.integers(0, 2**32, size=128, dtype=np.uint32)
    index = MinHashLSH(0.8)
    assert len(index) == 0 and index.query(base) == []
    index.add("a", base)
    index.add("b", _noisy_copy(base, 10, 1))
    index.add("c", _Sketch(_noisy_copy(base, 20, 2)))
    index.add("far", rng.integers(0, 2**32, size=128, dtype=np.uint32))
    assert len(index) == 4 and "a" in index and "zzz" not in index and 3 not in index
    assert (index.get("a") == base).all() and index.get("zzz") is None
    got = index.query(_Sketch(base))
    assert [k for k, _ in got] == ["a", "b", "c"]
    assert [s for _, s in got] == [1.0, 118 / 128, 108 / 128]
    assert index.remove("b") is True and index.remove("b") is False
    assert [k for k, _ in index.query(base)] == ["a", "c"]
    assert len(index) == 3 and "b" not in index
    index.compact()
    assert [k for k, _ in index.query(base)] == ["a", "c"] and (
        index.get("c") == _noisy_copy(base, 20, 2)
    ).all()


def test_ties_are_ordered_oldest_first_and_re_adding_replaces():
    rng = np.random.default_rng(6)
    base = rng.integers(0, 2**32, size=64, dtype=np.uint32)
    index = MinHashLSH(0.7, 64, pending_limit=2)
    for key in ("x", "y", "z"):
        index.add(key, base)
    assert index.query(base) == [("x", 1.0), ("y", 1.0), ("z", 1.0)]
    index.add("x", base)  # replaced: now the newest
    assert [k for k, _ in index.query(base)] == ["y", "z", "x"]
    index.add("y", rng.integers(0, 2**32, size=64, dtype=np.uint32))
    assert [k for k, _ in index.query(base)] == ["z", "x"]
    assert len(index) == 3


def test_check_and_add_returns_matches_before_the_insert():
    rng = np.random.default_rng(8)
    base = rng.integers(0, 2**32, size=128, dtype=np.uint32)
    index = MinHashLSH(0.8)
    assert index.check_and_add("first", base) == []
    assert index.check_and_add("second", _noisy_copy(base, 5, 3)) == [("first", 123 / 128)]
    assert [k for k, _ in index.check_and_add("third", base)] == ["first", "second"]
    # re-adding a key: its old sketch is among the matches (as for the simhash index), then replaced
    other = rng.integers(0, 2**32, size=128, dtype=np.uint32)
    assert [k for k, _ in index.check_and_add("first", other)] == []
    assert [k for k, _ in index.check_and_add("first", other)] == ["first"]
    assert len(index) == 3 and [k for k, _ in index.query(base)] == ["third", "second"]


def test_many_removes_trigger_compaction_and_answers_stay_exact():
    rng = np.random.default_rng(9)
    stored = rng.integers(0, 4, size=(12000, 16), dtype=np.uint32)
    index = MinHashLSH(0.5, 16, 4, 4, pending_limit=500)
    index.add_many((str(i), stored[i]) for i in range(12000))
    for i in range(0, 12000, 3):
        index.remove(str(i))
    for i in range(1, 12000, 3):
        index.remove(str(i))
    assert index.stats()["removed_not_compacted"] < 8000  # compacted at least once
    live = list(range(2, 12000, 3))
    for q in stored[:30]:
        expected = [live[p] for p in brute_force(stored[live], q, 4, 4, index.min_matches)]
        assert sorted(int(k) for k, _ in index.query(q)) == expected


def test_bad_sketches_are_refused_clearly():
    index = MinHashLSH(0.8, 64)
    with pytest.raises(ValueError, match=r"shape \(64,\)"):
        index.add("a", np.zeros(128, dtype=np.uint32))
    with pytest.raises(TypeError, match="uint32"):
        index.query(np.zeros(64, dtype=np.float64))
    with pytest.raises(TypeError, match="uint32"):
        index.add("a", np.full(64, -1, dtype=np.int64))
    with pytest.raises(TypeError, match="str"):
        index.add(7, np.zeros(64, dtype=np.uint32))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        index.check_and_add(b"a", np.zeros(64, dtype=np.uint32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="shape"):
        index.check_and_add("a", np.zeros((2, 64), dtype=np.uint32))
    assert len(index) == 0
    assert as_sketch(np.arange(64, dtype=np.int64)).dtype == np.uint32


# -- agreement with datasketch -------------------------------------------------------------


def _datasketch_candidates(sketches_a, sketches_b, threshold, params=None):
    ds = pytest.importorskip("datasketch")
    num_values = sketches_a.shape[1]
    lsh = ds.MinHashLSH(threshold=threshold, num_perm=num_values, params=params)
    for p, values in enumerate(sketches_a):
        lsh.insert(str(p), ds.MinHash(num_perm=num_values, hashvalues=values, scheme="affine32"))
    return lsh, [
        set(lsh.query(ds.MinHash(num_perm=num_values, hashvalues=v, scheme="affine32"))) for v in sketches_b
    ]


def test_agreement_with_datasketch_on_planted_pairs():
    """Same sketches, same threshold: every pair found by one side only is explained.

    datasketch returns its band candidates unverified; we verify by estimate and derive more
    bands (recall weights). With datasketch given our bands/rows, our answer is exactly its
    candidates whose estimate passes. With each side's own parameters, a pair only datasketch
    returns is below the threshold by estimate or shares no band under our parameters; a pair
    only we return shares a band under ours and none under datasketch's.
    """
    threshold, num_values = 0.8, 128
    a_sets, b_sets, jac = planted_pairs(1500, 0.6, 1.0, seed=11)
    sa, sb = minhash_sets(a_sets, num_values, seed=12), minhash_sets(b_sets, num_values, seed=12)
    index = MinHashLSH(threshold, num_values)
    index.add_many((str(p), sa[p]) for p in range(len(sa)))
    ours = [{k for k, _ in res} for res in index.query_many(sb)]
    m = index.min_matches

    def est(p: int, q: int) -> int:
        return int((sa[p] == sb[q]).sum())

    def shares(p: int, q: int, bands: int, rows: int) -> bool:
        eq = sa[p][: bands * rows] == sb[q][: bands * rows]
        return bool(eq.reshape(bands, rows).all(axis=1).any())

    _, same_params = _datasketch_candidates(sa, sb, threshold, params=(index.bands, index.rows))
    for q in range(len(sb)):
        assert ours[q] == {k for k in same_params[q] if est(int(k), q) >= m}

    lsh, theirs = _datasketch_candidates(sa, sb, threshold)
    b2, r2 = lsh.b, lsh.r
    only_theirs = only_ours = below = 0
    for q in range(len(sb)):
        for k in theirs[q] - ours[q]:
            only_theirs += 1
            below += est(int(k), q) < m
            assert est(int(k), q) < m or not shares(int(k), q, index.bands, index.rows)
        for k in ours[q] - theirs[q]:
            only_ours += 1
            assert shares(int(k), q, index.bands, index.rows) and not shares(int(k), q, b2, r2)
    planted_found_ours = sum(str(q) in ours[q] for q in range(len(sb)) if jac[q] >= threshold + 0.05)
    planted_found_theirs = sum(
        str(q) in theirs[q] and est(q, q) >= m for q in range(len(sb)) if jac[q] >= threshold + 0.05
    )
    print(
        f"\nours {index.bands}x{index.rows}, datasketch {b2}x{r2}: only datasketch {only_theirs} "
        f"({below} below threshold by estimate), only ours {only_ours}; planted J >= 0.85 found: "
        f"ours {planted_found_ours}, datasketch verified {planted_found_theirs} "
        f"of {(jac >= threshold + 0.05).sum()}"
    )
    assert planted_found_ours >= planted_found_theirs


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=300),
    st.lists(st.integers(0, 45), max_size=20),
    st.integers(0, 3),
)
def test_sorted_buckets_lookup_equals_a_scan(key_numbers, query_numbers, spread):
    """Skewed buckets (longer than the directory window) included: the binary-search fallback."""
    from scrapy_simhash.index.lsh.lsh_buckets import HI, SortedBuckets

    def prefix(x: int) -> int:  # few distinct prefixes, some in the same directory cell
        return ((x * 0x9E3779B97F4A7C15 >> (spread * 8)) & 0xFFFFFFFF) << 32

    entries = np.array(sorted(prefix(x) | i for i, x in enumerate(key_numbers)), dtype=np.uint64)
    buckets = SortedBuckets(entries)
    hi = np.array([prefix(x) for x in query_numbers], dtype=np.uint64)
    k, ids = buckets.lookup(hi)
    got = sorted(zip(k.tolist(), ids.tolist(), strict=True))
    want = sorted(
        (q, int(e) & 0xFFFFFFFF)
        for q, h in enumerate(hi.tolist())
        for e in entries.tolist()
        if e & int(HI) == h
    )
    assert got == want


def test_a_band_key_prefix_collision_is_not_an_answer():
    """Buckets keep 32 bits of the band key: two different bands can share a bucket. The band
    check drops such a candidate even when its estimate passes (here 63 of 64 values equal)."""
    from scrapy_simhash.index.lsh.lsh import BandHasher
    from scrapy_simhash.index.lsh.lsh_buckets import HI

    values = np.arange(1 << 20, dtype=np.uint32)
    prefixes = (BandHasher(1, 1).keys_many(values[:, None]) & HI)[:, 0]
    order = np.argsort(prefixes, kind="stable")
    same = np.flatnonzero(prefixes[order][1:] == prefixes[order][:-1])
    v1, v2 = (int(x) for x in values[order][[same[0], same[0] + 1]])
    stored = np.full(64, 12345, dtype=np.uint32)
    stored[0] = v1
    query = stored.copy()
    query[0] = v2
    index = MinHashLSH(0.5, 64, bands=1, rows=1)
    index.add("stored", stored)
    assert index.query(query) == [] and index.query_many(query[None, :]) == [[]]
    index.flush()
    assert index.query(query) == [] and index.query_many(query[None, :]) == [[]]
    assert index.query(stored) == [("stored", 1.0)]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(0, 2**64 - 1), min_size=0, max_size=400),
    repeats=st.integers(0, 300),
    queries=st.lists(st.integers(0, 2**64 - 1), max_size=50),
)
def test_native_bucket_lookup_finds_exactly_what_numpy_finds(
    keys: list[int], repeats: int, queries: list[int]
) -> None:
    """The C lookup of the LSH buckets against the numpy path: the same (query, id) pairs, long
    cells (many documents sharing a band) and empty cells included."""
    from scrapy_simhash.index.lsh import lsh_buckets
    from scrapy_simhash.index.lsh.lsh_buckets import HI, SortedBuckets

    if lsh_buckets._native_lookup is None:
        pytest.skip("the C extension is not built")
    hashes = np.array(keys + keys[:1] * repeats, dtype=np.uint64)
    entries = np.sort((hashes & HI) | np.arange(hashes.shape[0], dtype=np.uint64))
    buckets = SortedBuckets(entries)
    asked = np.array(queries + keys[::3], dtype=np.uint64) & HI
    found = [buckets.lookup(asked, native=flag) for flag in (True, False)]
    as_sets = [set(zip(q.tolist(), i.tolist(), strict=True)) for q, i in found]
    assert as_sets[0] == as_sets[1]
    assert len(found[0][0]) == len(found[1][0])


@settings(max_examples=80, deadline=None)
@given(
    stored=st.integers(1, 40),
    asked=st.integers(1, 6),
    shape=st.sampled_from([(16, 4, 4), (16, 3, 5), (12, 2, 2), (8, 8, 1)]),
    keep=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
    threshold=st.sampled_from([0.3, 0.5, 0.8]),
    value_bits=st.sampled_from([8, 32]),
)
def test_native_verification_counts_exactly_what_numpy_counts(
    stored: int,
    asked: int,
    shape: tuple[int, int, int],
    keep: float,
    seed: int,
    threshold: float,
    value_bits: int,
) -> None:
    """The C verification (equal values counted, band checked, threshold applied) against the numpy
    path, for candidates of one query and of a batch, values left past the bands included, on
    uint32 values and on the byte-a-value matrix of 8-bit values; then the index's answers with it
    equal brute force over the stored sketches."""
    from scrapy_simhash.index.lsh import lsh as lsh_module

    if lsh_module._native_verify is None:
        pytest.skip("the C extension is not built")
    num_values, bands, rows = shape
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 3, size=(stored, num_values), dtype=np.uint32)  # few values: many equal
    small |= rng.integers(0, 2, size=small.shape, dtype=np.uint32) << np.uint32(8)  # beyond 8 bits
    index = MinHashLSH(threshold, num_values, bands=bands, rows=rows, value_bits=value_bits)
    assert index._sketches.itemsize == (1 if value_bits == 8 else 4)
    for i, sketch in enumerate(small):
        index.add(f"k{i}", sketch)
    queries = small[rng.integers(0, stored, size=asked)].copy()
    change = rng.random(queries.shape) >= keep
    queries[change] = rng.integers(0, 3, size=int(change.sum()), dtype=np.uint32)
    ids = np.repeat(np.arange(stored), asked)
    query_of = np.tile(np.arange(asked), stored)
    for of in (query_of, None):
        native = index._counts(ids, index._batch(queries), of, native=True)
        numpy_counts = index._counts(ids, index._batch(queries), of, native=False)
        assert native.tolist() == numpy_counts.tolist()
    low = np.uint32((1 << value_bits) - 1)
    for q in queries:
        equal = (small & low) == (q & low)
        banded = equal[:, : bands * rows].reshape(stored, bands, rows).all(axis=2).any(axis=1)
        counts = equal.sum(axis=1)
        want = sorted(
            (
                (f"k{i}", estimate(int(counts[i]), num_values, value_bits))
                for i in range(stored)
                if banded[i] and counts[i] >= index.min_matches
            ),
            key=lambda kv: (-kv[1], int(kv[0][1:])),
        )
        assert index.query(q) == want
    assert index.query_many(queries) == [index.query(q) for q in queries]


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    stored=st.integers(0, 60),
    shape=st.sampled_from([(16, 4, 4), (128, 32, 4)]),
    value_bits=st.sampled_from([8, 32]),
)
def test_the_index_answers_alike_with_and_without_the_c_extension(
    seed: int, stored: int, shape: tuple[int, int, int], value_bits: int
) -> None:
    """Band keys, lookups and verification in C give exactly the pure-numpy answers (the
    extension is optional), with recent inserts pending, merged and removed."""
    from scrapy_simhash.index.lsh import lsh as lsh_module
    from scrapy_simhash.index.lsh import lsh_bands, lsh_buckets

    num_values, bands, rows = shape
    rng = np.random.default_rng(seed)
    seeds = rng.integers(0, 2**32, size=(max(1, stored // 4), num_values), dtype=np.uint32)
    sketches = seeds[rng.integers(0, seeds.shape[0], size=stored)]
    sketches[rng.random(sketches.shape) < 0.3] = 7
    queries = np.concatenate(
        [sketches[: stored // 2], rng.integers(0, 2**32, size=(3, num_values), dtype=np.uint32)]
    )
    natives = ("_native_query", "_native_verify"), ("_native_keys",), ("_native_lookup",)
    modules = (lsh_module, lsh_bands, lsh_buckets)
    answers = []
    for native in (True, False):
        saved = [
            {name: getattr(m, name) for name in names} for m, names in zip(modules, natives, strict=True)
        ]
        try:
            if not native:
                for m, names in zip(modules, natives, strict=True):
                    for name in names:
                        setattr(m, name, None)
            index = MinHashLSH(
                0.5, num_values, bands=bands, rows=rows, pending_limit=16, value_bits=value_bits
            )
            assert index._hasher.keys_many(queries).tolist() == [
                index._hasher.keys(q).tolist() for q in queries
            ]
            got = [index._hasher.keys_many(queries).tolist()]
            for i, sketch in enumerate(sketches):
                index.add(f"k{i}", sketch)
                if i % 7 == 3:
                    index.remove(f"k{i - 1}")
                if i % 5 == 0:
                    got.append([index.query(q) for q in queries[:4]])
            got.append([index.query(q) for q in queries])
            got.append(index.query_many(queries))
            index.set_tags((f"k{i}", 100 + i) for i in range(0, stored, 3))
            tagged = [index.query_tagged(q) for q in queries]  # the verified index's lean lookup
            assert [[(k, s) for k, s, _ in found] for found in tagged] == got[-2]
            assert [[t for _, _, t in found] for found in tagged] == [
                index.tags(k for k, _ in found) for found in got[-2]
            ]
            got.append(tagged)
            answers.append(got)
        finally:
            for m, values in zip(modules, saved, strict=True):
                for name, value in values.items():
                    setattr(m, name, value)
    assert answers[0] == answers[1]
