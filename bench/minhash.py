"""Text -> minhash-doc/1 sketch speed: native and pure-Python paths beside rensa and datasketch in one run.

Texts are real article bodies from the corpus ground truth: the 20 scrapinghub-aeb articles closest to
1,000 words (times are per text, averaged over the 20).  Every implementation makes 128 values (or
--num-values) from word 3-shingles:
- scrapy-simhash: ``minhash(text)``, tokens, shingles and hashing inside (native C, or pure Python);
- rensa ``RMinHash.update(shingles)``, shingles built in Python as its users do, two ways: with
  scrapy-simhash's own tokens (the same features) and with ``text.lower().split()`` (the cheapest);
- datasketch ``MinHash.update_batch`` of the UTF-8 shingles (same two ways).
Then what the crawl pays per page: simhash alone against simhash + sketch.

Run: python bench/minhash.py [--repeat N] [--num-values K]     (peers: pip install -e ".[bench]")
Goal: native <= 0.15 ms per 1,000-word text, >= 3x rensa, >= 15x datasketch.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from _corpus import corpus

from scrapy_simhash.fingerprint import shingles, simhash, tokens
from scrapy_simhash.fingerprint.minhash import minhash


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


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--num-values", type=int, default=128)
    args = parser.parse_args()
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
    print(f"\n{'what the crawl pays per page':34} {'ms/text':>9}")
    print(f"{'simhash alone':34} {alone * 1e3:9.3f}")
    print(f"{'simhash + sketch':34} {both * 1e3:9.3f}   (+{(both / alone - 1) * 100:.0f}%)")
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
