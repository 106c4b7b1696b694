"""Text -> simhash speed: native and pure-Python paths beside the `simhash` package (1e0ng) in one run.

Texts are real article bodies from the corpus ground truth:
- ~1,000 words: the scrapinghub-aeb article closest to 1,000 words;
- ~5,000 words: the longest newspaper4k article, cut at 5,000 words;
- ~50,000 words: scrapinghub-aeb articles concatenated (distinct articles) up to 50,000 words.

Run: python bench/fingerprint.py [--repeat N]     (peer: pip install -e ".[bench]")
Goal: native <= 0.6 ms per 1,000-word text and >= 15x faster than `simhash.Simhash(text)`.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from _corpus import corpus

from scrapy_simhash.fingerprint import backend, simhash


def texts() -> dict[str, str]:
    root = corpus() / "truth"
    aeb = json.loads((root / "scrapinghub-aeb/ground-truth.json").read_text(encoding="utf-8"))
    bodies = [entry["articleBody"] for _, entry in sorted(aeb.items())]
    one_k = min(bodies, key=lambda b: abs(len(b.split()) - 1000))
    longest = max((root / "newspaper4k/txt").glob("*.txt"), key=lambda p: len(p.read_text().split()))
    five_k = " ".join(longest.read_text(encoding="utf-8").split()[:5000])
    words: list[str] = []
    for body in bodies:
        words.extend(body.split())
        if len(words) >= 50000:
            break
    return {"1k": one_k, "5k": five_k, "50k": " ".join(words[:50000])}


def per_call(fn: Callable[[], object], repeat: int, budget: float = 2.0) -> float:
    """Median seconds per call over `repeat` rounds, each round sized to ~budget/repeat seconds."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    number = max(1, int(budget / repeat / once))
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - start) / number)
    return statistics.median(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    try:
        from simhash import Simhash  # the peer, from the [bench] extra
    except ImportError:
        Simhash = None
        print("peer `simhash` not installed (pip install -e '.[bench]'): peer column skipped")

    print(f"backends: {backend.available()}")
    columns = ("text", "words", "native ms", "python ms", "simhash ms", "peer/native")
    print("{:>5} {:>6} {:>10} {:>10} {:>11} {:>12}".format(*columns))
    for name, text in texts().items():
        row = {}
        for impl in backend.available():
            row[impl] = per_call(lambda t=text, i=impl: simhash(t, implementation=i), args.repeat)
        peer = None
        if Simhash is not None:
            try:
                peer = per_call(lambda t=text: Simhash(t).value, args.repeat)
            except OverflowError as exc:  # 1e0ng/simhash#74 under numpy 2
                print(f"peer failed on {name}: OverflowError: {exc}")
        native = row.get("native")
        print(
            f"{name:>5} {len(text.split()):>6} "
            f"{native * 1e3 if native else float('nan'):>10.3f} {row['python'] * 1e3:>10.3f} "
            f"{peer * 1e3 if peer else float('nan'):>11.3f} "
            f"{(peer / native) if (peer and native) else float('nan'):>11.1f}x"
        )
    per_1k = None
    for name, text in texts().items():
        if name == "1k" and "native" in backend.available():
            per_1k = per_call(lambda t=text: simhash(t), args.repeat) * 1000 / len(text.split())
    if per_1k is not None:
        print(f"native per 1,000 words: {per_1k * 1e3:.3f} ms (goal <= 0.6 ms)")


if __name__ == "__main__":
    main()
