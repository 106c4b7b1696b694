"""The slim LSH-band join (scrapy_simhash.spark.bands) on a real local[2] Spark: the band rows carry
no sketch, and the answer is exactly the rule's pair set, also with many identical pages, heavy skew
split into blocks, a stored collection and forced key collisions."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scrapy_simhash.decision import DEFAULT_RULE, Rule
from scrapy_simhash.fingerprint.minhash import MinHash
from scrapy_simhash.spark.convert import to_signed

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not installed (pip install -e '.[test]' installs it)"
)

from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import BinaryType, StructType  # noqa: E402

from scrapy_simhash.spark import near_duplicates  # noqa: E402
from scrapy_simhash.spark.bands import band_groups, candidate_pairs, verified_pairs  # noqa: E402

Page = tuple[int, "np.ndarray | None"]


def _flip(value: int, bits: int, rnd: random.Random) -> int:
    for bit in rnd.sample(range(64), bits):
        value ^= 1 << bit
    return value


def skewed_pages(seed: int, hot: int, copies: int, variants: int, bare: int) -> list[Page]:
    """``hot`` sketches each copied ``copies`` times (same or nearby simhash, or a far one), variants
    keeping 30..100 % of a hot or random sketch's values, random pages and ``bare`` sketchless pages."""
    rnd = random.Random(seed)
    gen = np.random.default_rng(seed)
    sources: list[Page] = [
        (rnd.getrandbits(64), gen.integers(0, 2**32, 128, dtype=np.uint32)) for _ in range(hot)
    ]
    pages: list[Page] = []
    for h, s in sources:
        for _ in range(copies):
            near = rnd.choice([h, _flip(h, rnd.randint(1, 3), rnd), rnd.getrandbits(64)])
            pages.append((near, s))
    randoms = [(rnd.getrandbits(64), gen.integers(0, 2**32, 128, dtype=np.uint32)) for _ in range(20)]
    pages += randoms
    for _ in range(variants):
        h, s = rnd.choice(sources + randoms)
        assert s is not None
        sketch = s.copy()
        changed = gen.random(128) < rnd.choice([0.05, 0.3, 0.5, 0.7])
        sketch[changed] = gen.integers(0, 2**32, int(changed.sum()), dtype=np.uint32)
        pages.append((_flip(h, rnd.randint(0, 4), rnd), sketch))
    for _ in range(bare):
        pages.append((_flip(rnd.choice(pages)[0], rnd.randint(0, 4), rnd), None))
    rnd.shuffle(pages)
    return pages


def rule_brute_force(pages: list[Page], new: list[bool] | None = None, rule: Rule = DEFAULT_RULE) -> set:
    found = set()
    for i, j in itertools.combinations(range(len(pages)), 2):
        if new is not None and not (new[i] or new[j]):
            continue
        verdict = rule.compare_values(pages[i][0], pages[j][0], pages[i][1], pages[j][1])
        if verdict.near_duplicate:
            found.add((i, j, verdict.distance, verdict.similarity))
    return found


def frame(spark, pages: list[Page], new: list[bool] | None = None):
    rows = [
        (
            i,
            to_signed(h),
            None if s is None else bytearray(MinHash(s).to_bytes()),
            True if new is None else new[i],
        )
        for i, (h, s) in enumerate(pages)
    ]
    return spark.createDataFrame(rows, "id long, simhash long, minhash binary, new boolean")


def _found(df) -> set:
    got = [(r.a, r.b, r.distance, r.similarity) for r in df.collect()]
    assert len(got) == len(set(got)), "a pair was reported twice"
    return set(got)


def _binary_fields(schema) -> list[str]:
    """Names of the BinaryType fields anywhere in a (nested) schema."""
    found = []
    for field in schema.fields:
        kind = field.dataType
        while hasattr(kind, "elementType"):
            kind = kind.elementType
        if isinstance(kind, BinaryType):
            found.append(field.name)
        elif isinstance(kind, StructType):
            found += [f"{field.name}.{name}" for name in _binary_fields(kind)]
    return found


def test_band_rows_carry_no_sketch(spark):
    """What the band stage shuffles and groups: (band, key, id, block, new), no sketch and no simhash."""
    df = frame(spark, skewed_pages(1, hot=1, copies=5, variants=5, bare=0))
    groups = band_groups(df, DEFAULT_RULE)
    assert groups.columns == ["table", "key", "first", "second", "members"]
    assert groups.schema["key"].dataType.typeName() == "long"
    member = groups.schema["members"].dataType.elementType
    assert [f.name for f in member.fields] == ["id", "block", "new"]
    assert _binary_fields(groups.schema) == []
    assert _binary_fields(candidate_pairs(df, DEFAULT_RULE).schema) == []


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 2**32),
    copies=st.integers(25, 60),
    max_group=st.sampled_from([3, 5, 8]),
    bare=st.sampled_from([0, 12]),
)
def test_many_identical_pages_heavy_skew_equal_the_rule(spark, seed, copies, max_group, bare):
    """Hot sketches copied far beyond max_group (every band's group split into blocks): exactly the
    rule's pairs, each once, with or without sketchless pages; no group holds a hot key whole."""
    pages = skewed_pages(seed, hot=2, copies=copies, variants=30, bare=bare)
    want = rule_brute_force(pages)
    assert sum(1 for *_, s in want if s == 1.0) >= copies * (copies - 1) // 2
    df = frame(spark, pages)
    assert _found(near_duplicates(df, 3, max_group=max_group)) == want
    sizes = [
        r.n
        for r in band_groups(df, DEFAULT_RULE, max_group=max_group)
        .select(F.size("members").alias("n"))
        .collect()
    ]
    assert max(sizes) < copies  # at least 4 blocks per hot key: no group holds one whole


@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), share=st.sampled_from([0.1, 0.5]))
def test_against_a_stored_collection_only_pairs_with_a_new_page(spark, seed, share):
    pages = skewed_pages(seed, hot=1, copies=12, variants=40, bare=0)
    rnd = random.Random(seed)
    new = [rnd.random() < share for _ in pages]
    want = rule_brute_force(pages, new)
    got = _found(verified_pairs(frame(spark, pages, new), DEFAULT_RULE, max_group=5, new_col="new"))
    assert got == want


def test_key_collisions_add_candidates_never_pairs(spark):
    """Keys cut to 3 bits: unrelated pages share keys in every band; the rule still sees the real band
    values, so the pairs are exactly the rule's."""
    pages = [p for p in skewed_pages(5, hot=2, copies=6, variants=40, bare=0) if p[1] is not None]
    want = rule_brute_force(pages)
    df = frame(spark, pages)
    candidates = candidate_pairs(df, DEFAULT_RULE, key_bits=3).count()
    got = _found(verified_pairs(df, DEFAULT_RULE, key_bits=3, max_group=7))
    assert got == want
    assert candidates > 2 * len(want)  # collisions did add candidates, which the rule turned down
    assert candidates <= len(pages) * (len(pages) - 1) // 2
    with pytest.raises(ValueError, match="key_bits"):
        band_groups(df, DEFAULT_RULE, key_bits=0)


def test_bands_are_cut_from_the_bits_the_rule_compares(spark):
    """At 8 bits (the default) a page whose values differ from another's only above their low byte is
    that page again, and one that differs only in the low bytes shares nothing; at 32 bits neither is
    a pair. The JVM cuts the band keys from the same bytes the rule compares, so Spark finds exactly
    the rule's pairs either way."""
    gen = np.random.default_rng(11)
    base = gen.integers(0, 2**32, 128, dtype=np.uint32)
    pages: list[Page] = [
        (1, base),
        (1 << 20, base ^ np.uint32(0xFFFFFF00)),  # the low bytes alike: the same page at 8 bits
        (1 << 40, base ^ np.uint32(0x000000FF)),  # the high bytes alike: nothing shared at 8 bits
        (3, gen.integers(0, 2**32, 128, dtype=np.uint32)),
    ]
    df = frame(spark, pages)
    for rule, pairs in ((DEFAULT_RULE, {(0, 1)}), (Rule(value_bits=32), set())):
        want = rule_brute_force(pages, rule=rule)
        assert {(a, b) for a, b, _, _ in want} == pairs
        assert _found(verified_pairs(df, rule)) == want
