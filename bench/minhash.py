"""Text -> minhash-doc/1 sketch speed: native and pure-Python paths beside rensa and datasketch in one run.

Texts are real article bodies from the corpus ground truth: the 20 scrapinghub-aeb articles closest to
1,000 words (times are per text, averaged over the 20).  Every implementation makes 128 values (or
--num-values) from word 3-shingles:
- scrapy-simhash: ``minhash(text)``, tokens, shingles and hashing inside (native C, or pure Python);
- rensa ``RMinHash.update(shingles)``, shingles built in Python as its users do, two ways: with
  scrapy-simhash's own tokens (the same features) and with ``text.lower().split()`` (the cheapest);
- datasketch ``MinHash.update_batch`` of the UTF-8 shingles (same two ways).
Then what the crawl pays per page: simhash alone against simhash + sketch (two calls, or
``simhash_and_minhash``, which normalises the text once for both).

Run: python bench/minhash.py [--repeat N] [--num-values K]     (peers: pip install -e ".[bench]")
Goal: native <= 0.15 ms per 1,000-word text, >= 3x rensa, >= 15x datasketch.

``--design`` instead prints the measurements behind the scheme's choices (docs/minhash-doc-1.md), a few
minutes: the shingle size (exact Jaccard of edited copies against unrelated articles for n = 1..7), and
the estimator (k independent permutations against one-permutation hashing with optimal densification,
64 and 128 values, MAE against the exact shingle Jaccard on the pairs of tests/test_minhash.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from _corpus import corpus

from scrapy_simhash.fingerprint import shingles, simhash, tokens
from scrapy_simhash.fingerprint._minhash_purepy import mix64
from scrapy_simhash.fingerprint.minhash import minhash, simhash_and_minhash


def texts(count: int = 20) -> list[str]:
    root = corpus() / "truth"
    aeb = json.loads((root / "scrapinghub-aeb/ground-truth.json").read_text(encoding="utf-8"))
    bodies = sorted({entry["articleBody"] for entry in aeb.values() if entry.get("articleBody")})
    return sorted(bodies, key=lambda b: (abs(len(b.split()) - 1000), b))[:count]


def per_text(fn: Callable[[str], object], items: list[str], repeat: int, budget: float = 2.0) -> float:
    """Median seconds per text over `repeat` rounds (each round: every text, several times)."""

    def round_once() -> None:
        for text in items:
            fn(text)

    start = time.perf_counter()
    round_once()
    once = max(time.perf_counter() - start, 1e-6)
    number = max(1, int(budget / repeat / once))
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            round_once()
        rounds.append((time.perf_counter() - start) / number / len(items))
    return statistics.median(rounds)


def split_shingles(text: str) -> list[str]:
    words = text.lower().split()
    return [" ".join(words[i : i + 3]) for i in range(max(1, len(words) - 2))]


def design() -> None:
    import itertools
    import random
    import re
    import sys

    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the pairs of the MAE test
    from test_minhash import corpus_texts, variant

    from scrapy_simhash.fingerprint import jenkins64
    from scrapy_simhash.fingerprint.minhash import minhash_of_hashes

    base = corpus_texts(corpus())
    sentence_end = re.compile(r"(?<=[.!?])\s+")
    base = [t for t in base if len(sentence_end.split(t)) >= 5]
    rng = random.Random(1)
    edited = []
    for i, text in enumerate(base):
        sentences, other = sentence_end.split(text), sentence_end.split(base[(i + 7) % len(base)])
        j = rng.randrange(len(sentences))
        edited.append((text, " ".join([*sentences[:j], rng.choice(other), *sentences[j + 1 :]])))
        ad = "Advertisement " + " ".join(rng.choice(other).split()[:30])
        half = len(sentences) // 2
        edited.append((text, " ".join([*sentences[:half], ad, *sentences[half:]])))
        edited.append((text, "Updated March 3, 2024 10:42 am By Staff Writer " + text))
        edited.append((text, text + " " + " ".join(other[:3])))
    print(
        f"shingle size: {len(base)} distinct articles; {len(edited)} edited copies (one sentence replaced, "
        f"an ad inserted, a timestamp line, comments appended)"
    )
    print(f"{'n':>2} {'unrelated mean':>15} {'unrelated p99.9':>16} {'edited p5':>10} {'edited median':>14}")
    toks = [tokens(t) for t in base]
    for n in (1, 2, 3, 4, 5, 7):
        sets = [set(shingles(t, n)) for t in toks]
        unrelated = np.array([len(a & b) / len(a | b) for a, b in itertools.combinations(sets, 2)])
        near = []
        for a, b in edited:
            sa, sb = set(shingles(tokens(a), n)), set(shingles(tokens(b), n))
            near.append(len(sa & sb) / len(sa | sb))
        print(
            f"{n:>2} {unrelated.mean():15.4f} {np.quantile(unrelated, 0.999):16.3f} "
            f"{np.quantile(near, 0.05):10.3f} {np.median(near):14.3f}"
        )

    pairs = []
    texts_all = corpus_texts(corpus())
    for i, text in enumerate(texts_all):
        rng = random.Random(f"minhash-pairs:{i}")
        for _ in range(24):
            other = texts_all[(i + 1 + rng.randrange(len(texts_all) - 1)) % len(texts_all)]
            pairs.append((text, variant(text, other, rng)))
    hashed: dict[str, np.ndarray] = {}

    def hashes(text: str) -> np.ndarray:
        if text not in hashed:
            found = {jenkins64(s.encode("utf-8")) for s in shingles(tokens(text), 3)}
            hashed[text] = np.array(sorted(found), dtype=np.uint64)
        return hashed[text]

    def k_permutations(x: np.ndarray, k: int) -> np.ndarray:
        # ((a_i * x + b_i) mod 2**64) >> 32 on the 32-bit key, a_i odd, a_i and b_i from splitmix64
        state, coef = 0x6D696E6861736831, []
        for _ in range(2 * k):
            state = (state + 0x9E3779B97F4A7C15) & (2**64 - 1)
            coef.append(mix64(state))
        a = np.array([c | 1 for c in coef[0::2]], dtype=np.uint64)
        b = np.array(coef[1::2], dtype=np.uint64)
        with np.errstate(over="ignore"):
            keys = x & np.uint64(0xFFFFFFFF)
            return ((a[:, None] * keys[None, :] + b[:, None]) >> np.uint64(32)).min(axis=1)

    rows = []
    for a, b in pairs:
        x, y = hashes(a), hashes(b)
        exact = len(np.intersect1d(x, y)) / len(np.union1d(x, y))
        if 0.2 <= exact <= 1.0:
            rows.append((x, y, exact))
    truth = np.array([r[2] for r in rows])
    print(f"\nestimator: {len(rows)} real pairs (tests/test_minhash.py), exact shingle Jaccard 0.2-1.0")
    print(f"{'k':>4} {'scheme':34} {'MAE':>7} {'bias':>8}")
    for k in (64, 128):
        for name, sketch in (
            ("k permutations (multiply-shift)", k_permutations),
            ("one permutation + optimal densif.", lambda x, k: minhash_of_hashes(x.tolist(), k).values),
        ):
            estimate = np.array([(sketch(x, k) == sketch(y, k)).mean() for x, y, _ in rows])
            print(
                f"{k:>4} {name:34} {np.abs(estimate - truth).mean():7.4f} {(estimate - truth).mean():+8.4f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--num-values", type=int, default=128)
    parser.add_argument("--design", action="store_true", help="print the design measurements instead")
    args = parser.parse_args()
    if args.design:
        design()
        return
    k, items = args.num_values, texts()
    words = statistics.mean(len(t.split()) for t in items)
    print(f"{len(items)} real article texts, {words:.0f} words on average; {k} values per sketch\n")

    rows: dict[str, float] = {}
    rows["scrapy-simhash native"] = per_text(
        lambda t: minhash(t, k, implementation="native"), items, args.repeat
    )
    rows["scrapy-simhash python"] = per_text(
        lambda t: minhash(t, k, implementation="python"), items, args.repeat, budget=1.0
    )
    try:
        import rensa
    except ImportError:
        print("rensa not installed (pip install -e '.[bench]'): skipped")
    else:

        def rensa_same(text: str) -> object:
            sketch = rensa.RMinHash(num_perm=k, seed=42)
            sketch.update(shingles(tokens(text), 3))
            return sketch.digest()

        def rensa_split(text: str) -> object:
            sketch = rensa.RMinHash(num_perm=k, seed=42)
            sketch.update(split_shingles(text))
            return sketch.digest()

        rows["rensa RMinHash, our tokens"] = per_text(rensa_same, items, args.repeat)
        rows["rensa RMinHash, str.split"] = per_text(rensa_split, items, args.repeat)
    try:
        import datasketch
    except ImportError:
        print("datasketch not installed (pip install -e '.[bench]'): skipped")
    else:

        def datasketch_same(text: str) -> object:
            sketch = datasketch.MinHash(num_perm=k)
            sketch.update_batch([s.encode("utf-8") for s in shingles(tokens(text), 3)])
            return sketch.hashvalues

        def datasketch_split(text: str) -> object:
            sketch = datasketch.MinHash(num_perm=k)
            sketch.update_batch([s.encode("utf-8") for s in split_shingles(text)])
            return sketch.hashvalues

        rows["datasketch MinHash, our tokens"] = per_text(datasketch_same, items, args.repeat, budget=1.0)
        rows["datasketch MinHash, str.split"] = per_text(datasketch_split, items, args.repeat, budget=1.0)

    native = rows["scrapy-simhash native"]
    print(f"{'text -> sketch':34} {'ms/text':>9} {'x native':>9}")
    for name, seconds in rows.items():
        print(f"{name:34} {seconds * 1e3:9.3f} {seconds / native:9.1f}")

    alone = per_text(simhash, items, args.repeat)
    both = per_text(lambda t: (simhash(t), minhash(t, k)), items, args.repeat)
    shared = per_text(lambda t: simhash_and_minhash(t, k), items, args.repeat)
    print(f"\n{'what the crawl pays per page':34} {'ms/text':>9}")
    print(f"{'simhash alone':34} {alone * 1e3:9.3f}")
    print(f"{'simhash + sketch, two calls':34} {both * 1e3:9.3f}   (+{(both / alone - 1) * 100:.0f}%)")
    print(f"{'simhash_and_minhash (one NFC)':34} {shared * 1e3:9.3f}   (+{(shared / alone - 1) * 100:.0f}%)")
    print(f"\ngoal: native <= 0.150 ms: {'met' if native <= 0.15e-3 else 'NOT met'}")
    for peer, goal in (("rensa RMinHash, str.split", 3), ("datasketch MinHash, str.split", 15)):
        if peer in rows:
            ratio = rows[peer] / native
            print(
                f"goal: >= {goal}x {peer.split(',')[0]} (cheapest shingling): {ratio:.1f}x, "
                f"{'met' if ratio >= goal else 'NOT met'}"
            )


if __name__ == "__main__":
    main()
