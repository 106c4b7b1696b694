"""minhash-doc/1: committed vectors, native == pure Python, estimation accuracy on real text, codecs.

Regenerate the committed vectors (only when the scheme's version changes) with
``python tests/test_minhash.py --write-vectors``: they come from the pure-Python reference.
"""

from __future__ import annotations

import base64
import copy
import functools
import gzip
import json
import math
import pickle
import random
import re
import subprocess
import sys
from pathlib import Path

import lxml.html
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import fingerprint as fp
from scrapy_simhash.decision import Rule
from scrapy_simhash.fingerprint import _minhash_purepy as ref
from scrapy_simhash.fingerprint import minhash as mh
from scrapy_simhash.fingerprint.bbit import ValueBits
from scrapy_simhash.fingerprint.tokenizer import shingles, tokens
from scrapy_simhash.index.lsh.lsh_bands import DEFAULT_WEIGHTS, BandHasher, optimal_params

VECTORS = Path(__file__).parent / "data" / "minhash-doc-1-vectors.json"
IMPLEMENTATIONS = ["native", "python"] if mh._native is not None else ["python"]

LONG_TEXT = (Path(__file__).parent / "data" / "minhash-doc-1-long-text.txt").read_text(encoding="utf-8")
"""A 1,000-token article (written for these vectors): 990 distinct shingles, every bin filled at k = 128."""
LONG_EDITED = (
    LONG_TEXT.replace(
        "The bakery sells its last loaves at half price.", "The bakery closes early on Sundays in winter."
    )
    + "\nComments (2): Lovely piece. We took the ferry last summer and cannot wait to go back.\n"
)

DOCUMENTS = {
    "english": "The quick brown fox jumps over the lazy dog. The dog sleeps!",
    "german-casefold": "Straße und STRASSE: Größe, Übermut — daß Maß hält.",
    "repeats": "buffalo buffalo buffalo buffalo buffalo buffalo buffalo buffalo",
    "chinese": "中华人民共和国成立于1949年。北京是首都。",
    "japanese-mixed": "東京タワーは2023年もきれいでした。Tokyo tower 東京",
    "thai": "ภาษาไทยเป็นภาษาที่ไม่เว้นวรรค",
    "hindi": "नमस्ते दुनिया, यह एक परीक्षण वाक्य है। हिन्दी भाषा",
    "arabic": "مرحبا بالعالم هذا نص تجريبي باللغة العربية",
    "empty": "",
    "no-tokens": "  123 456 -- !!! 7.5% ",
    "one-token": "hello",
    "two-tokens": "Hello, world",
    "three-tokens": "one two three",
    "digits-inside": "route66 a1b2 2024abc 99",
    "script-not-script-extensions": "コーヒーを飲む",  # U+30FC is Script=Common: it ends the stretch
    "mixed-script-stretch": "ab中文ภาษา",  # Han and Thai in one stretch: one bigram spans both
    "letterless-pieces": "abc๑๒ def ๑๒ ที่ 中_文",  # Thai digits, marks and '_' inside runs
    "casefold-not-renormalized": "ǰ İstanbul ﬁne ΐ",  # casefold output is not NFC'd again
    "long": LONG_TEXT,
    "long-edited": LONG_EDITED,
}

SPARSE = {
    # Far more bins than shingles: most bins are densified, many by the cyclic fallback.
    "k4096-two-shingles": ("alpha beta gamma delta", 4096),
    "k4096-three-shingles": ("one two three four five", 4096),
    "k1024-two-shingles": ("north east south west", 1024),
}

VALUE_BITS_PAIRS = [("long", "long-edited"), ("long", "hindi"), ("english", "german-casefold")]
BAND_LAYOUTS = [  # (document, bands, rows, value_bits): the verified rule's and MinHashIndex's defaults
    ("long", 32, 4, 8),
    ("long", 16, 8, 32),
    ("long-edited", 32, 4, 8),
]
SMALL_BAND_SKETCH = [1, 2, 3, 4, 5]


def densification_trace(hashes: list[int], k: int) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
    """docs/minhash-doc-1.md §4 spelled out once more: the filled bins ``{bin: value}`` and, for each
    empty bin, ``(bin, t, source bin)`` where t is the probe that hit (0: the cyclic fallback)."""
    filled: dict[int, int] = {}
    for h in hashes:
        i, c = ((h >> 32) * k) >> 32, h & 0xFFFFFFFF
        filled[i] = min(c, filled.get(i, c))
    trace = []
    is_filled = np.zeros(k, dtype=bool)
    is_filled[list(filled)] = True
    tries = np.arange(1, 1025, dtype=np.uint64)
    for i in range(k):
        if i in filled or not filled:
            continue
        # the probes t = 1 .. 1024 of bin i at once (splitmix64's output function in wrapping uint64
        # arithmetic, as ref.mix64 computes it one t at a time)
        bins = _mix64_array(np.uint64(ref.SEED ^ (i << 32)) ^ tries) % np.uint64(k)
        hits = np.flatnonzero(is_filled[bins])
        trace.append(
            (i, int(hits[0]) + 1, int(bins[hits[0]]))
            if hits.size
            else (i, 0, next((i + s) % k for s in range(1, k) if (i + s) % k in filled))
        )
    return filled, trace


def _mix64_array(z: np.ndarray) -> np.ndarray:
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _sparse_vector(name: str, text: str, k: int) -> dict:
    sh = shingles(tokens(text), ref.SHINGLE)
    hashes = [ref.jenkins64(s.encode("utf-8")) for s in sh]
    filled, trace = densification_trace(hashes, k)
    fallback = [(i, j) for i, t, j in trace if t == 0]
    wrapped = [(i, j) for i, j in fallback if j < i]
    return {
        "name": name,
        "text": text,
        "num_values": k,
        "shingles": sh,
        "shingle_hashes": [f"{h:016x}" for h in hashes],
        "filled": [{"bin": i, "value": filled[i]} for i in sorted(filled)],
        "probed_bins": len(trace) - len(fallback),
        "fallback_bins": len(fallback),
        "fallback_examples": [{"bin": i, "from": j} for i, j in fallback[:3] + wrapped[-3:]],
        "text_form": mh.minhash(text, k, implementation="python").to_text(),
    }


def _value_bits_vectors() -> list[dict]:
    out = []
    for a, b in VALUE_BITS_PAIRS:
        va, vb = (mh.minhash(DOCUMENTS[name], implementation="python").values for name in (a, b))
        for bits in (8, 16, 32):
            value_bits = ValueBits(bits)
            equal = int(np.count_nonzero(value_bits.reduce(va) == value_bits.reduce(vb)))
            out.append(
                {"a": a, "b": b, "bits": bits, "equal": equal, "estimate": value_bits.similarity(equal, 128)}
            )
    return out


def _band_vectors() -> list[dict]:
    small = BandHasher(2, 2)
    out = [
        {
            "sketch": SMALL_BAND_SKETCH,
            "bands": 2,
            "rows": 2,
            "value_bits": 32,
            "multipliers": [f"{m:016x}" for m in small.multipliers.tolist()],
            "offsets": [f"{o:016x}" for o in small.offsets.tolist()],
            "keys": [f"{k:016x}" for k in small.keys(np.array(SMALL_BAND_SKETCH, dtype=np.uint32)).tolist()],
        }
    ]
    for name, bands, rows, bits in BAND_LAYOUTS:
        values = ValueBits(bits).reduce(mh.minhash(DOCUMENTS[name], implementation="python").values)
        keys = BandHasher(bands, rows).keys(np.ascontiguousarray(values))
        out.append(
            {
                "document": name,
                "bands": bands,
                "rows": rows,
                "value_bits": bits,
                "keys": [f"{k:016x}" for k in keys.tolist()],
            }
        )
    return out


def build_vectors() -> dict:
    """The committed vectors, from the pure-Python reference."""
    docs = []
    for name, text in DOCUMENTS.items():
        toks = tokens(text)
        sh = shingles(toks, ref.SHINGLE)
        sketch = mh.minhash(text, implementation="python")
        entry = {"name": name, "text": text, "token_count": len(toks), "distinct_shingles": len(set(sh))}
        if len(toks) <= 40:
            entry["tokens"] = toks
            entry["shingles"] = sh
            entry["shingle_hashes"] = [f"{ref.jenkins64(s.encode('utf-8')):016x}" for s in sh]
        entry["values"] = [int(v) for v in sketch.values]
        entry["text_form"] = sketch.to_text()
        docs.append(entry)
    return {
        "scheme": mh.SCHEME,
        "shingle": ref.SHINGLE,
        "num_values": mh.DEFAULT_NUM_VALUES,
        "seed": f"{ref.SEED:016x}",
        "max_probes": ref.MAX_PROBES,
        "probes": [
            {
                "i": i,
                "t": t,
                "mix64": f"{ref.mix64(ref.SEED ^ (i << 32) ^ t):016x}",
                "bin": ref.probe(i, t, 128),
            }
            for i in (0, 1, 127)
            for t in (1, 2, 3)
        ],
        "documents": docs,
        "sparse": [_sparse_vector(name, text, k) for name, (text, k) in SPARSE.items()],
        "value_bits": _value_bits_vectors(),
        "min_equal": [
            {"bits": bits, "num_values": 128, "threshold": t, "min_equal": ValueBits(bits).min_equal(t, 128)}
            for bits in (8, 16, 32)
            for t in (0.5, 0.8, 0.9)
        ],
        "band_params": [
            {"threshold": t, "num_values": 128, "weights": list(DEFAULT_WEIGHTS), "bands": b, "rows": r}
            for t in (0.5, 0.8, 0.9)
            for b, r in [optimal_params(t, 128, DEFAULT_WEIGHTS)]
        ],
        "bands": _band_vectors(),
    }


@pytest.fixture(scope="module")
def vectors() -> dict:
    return json.loads(VECTORS.read_text(encoding="utf-8"))


def test_native_extension_is_built():
    assert "native" in IMPLEMENTATIONS, "the _minhash C extension did not build or import"


def test_committed_vectors_are_what_the_reference_computes(vectors):
    assert vectors == build_vectors()


def test_vectors_header(vectors):
    assert vectors["scheme"] == mh.SCHEME == "minhash-doc/1"
    assert vectors["shingle"] == mh.SHINGLE == 3
    assert int(vectors["seed"], 16) == ref.SEED
    assert vectors["max_probes"] == ref.MAX_PROBES
    for p in vectors["probes"]:
        z = ref.mix64(ref.SEED ^ (p["i"] << 32) ^ p["t"])
        assert f"{z:016x}" == p["mix64"]
        assert z % 128 == p["bin"] == ref.probe(p["i"], p["t"], 128)


def test_mix64_is_splitmix64_output():
    # First output of splitmix64 seeded with 0 (Vigna's reference splitmix64.c): mix64(0 + golden gamma).
    assert ref.mix64(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_document_vectors(vectors, implementation):
    for doc in vectors["documents"]:
        text = doc["text"]
        sketch, count = mh.minhash_with_count(text, implementation=implementation)
        assert count == doc["token_count"], doc["name"]
        assert sketch.values.tolist() == doc["values"], doc["name"]
        assert sketch.to_text() == doc["text_form"]
        assert mh.MinHash.from_text(doc["text_form"]) == sketch
        if "tokens" in doc:
            assert tokens(text) == doc["tokens"]
            assert shingles(doc["tokens"], 3) == doc["shingles"]
            hashes = mh.shingle_hashes(text, implementation=implementation)
            assert [f"{h:016x}" for h in hashes] == doc["shingle_hashes"], doc["name"]
            assert mh.minhash_of_hashes(hashes) == sketch


def test_spec_pseudocode_reproduces_the_vectors(vectors):
    # The Python block of docs/minhash-doc-1.md §4, run as written, with only mix64, SEED and
    # lookup3 from outside: the spec alone gives the bits.
    doc = (Path(__file__).parent.parent / "docs" / "minhash-doc-1.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(def sketch\(hashes, k\):.*?)```", doc, re.S).group(1)
    namespace = {"mix64": ref.mix64, "SEED": 0x6D696E6861736831}
    exec(block, namespace)
    for d in vectors["documents"]:
        hashes = [fp.jenkins64(s.encode("utf-8")) for s in shingles(tokens(d["text"]), 3)]
        assert namespace["sketch"](hashes, 128) == d["values"], d["name"]
    for d in vectors["sparse"]:
        hashes = [int(h, 16) for h in d["shingle_hashes"]]
        expected = mh.MinHash.from_text(d["text_form"]).values.tolist()
        assert namespace["sketch"](hashes, d["num_values"]) == expected, d["name"]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_sparse_vectors(vectors, implementation):
    for d in vectors["sparse"]:
        text, k = d["text"], d["num_values"]
        assert shingles(tokens(text), 3) == d["shingles"]
        hashes = mh.shingle_hashes(text, implementation=implementation)
        assert [f"{h:016x}" for h in hashes] == d["shingle_hashes"], d["name"]
        sketch = mh.minhash(text, k, implementation=implementation)
        assert sketch.to_text() == d["text_form"] and mh.MinHash.from_text(d["text_form"]) == sketch
        for entry in d["filled"]:
            assert sketch.values[entry["bin"]] == entry["value"]
        for entry in d["fallback_examples"]:
            assert sketch.values[entry["bin"]] == sketch.values[entry["from"]]


def test_value_bits_vectors(vectors):
    docs = {d["name"]: np.array(d["values"], dtype=np.uint32) for d in vectors["documents"]}
    for v in vectors["value_bits"]:
        bits, a, b = v["bits"], docs[v["a"]], docs[v["b"]]
        low = (1 << bits) - 1
        assert int(np.count_nonzero((a & low) == (b & low))) == v["equal"]
        # §5: P = equal / k, C = 2**-bits (0 at 32 bits), estimate max(0, (P - C) / (1 - C)) in doubles
        share, chance = v["equal"] / 128, (0.0 if bits == 32 else 2.0**-bits)
        assert max(0.0, (share - chance) / (1.0 - chance)) == v["estimate"]
        assert ValueBits(bits).similarity(v["equal"], 128) == v["estimate"]
        verdict = Rule(value_bits=bits).compare_values(0, 0, a, b)  # what every index applies
        assert verdict.similarity == v["estimate"]
    for v in vectors["min_equal"]:
        assert ValueBits(v["bits"]).min_equal(v["threshold"], v["num_values"]) == v["min_equal"]


def test_band_param_vectors(vectors):
    for v in vectors["band_params"]:
        got = optimal_params(v["threshold"], v["num_values"], tuple(v["weights"]))
        assert got == (v["bands"], v["rows"])


def _vector_band_sketch(vector: dict, docs: dict[str, list[int]]) -> np.ndarray:
    values = np.array(vector["sketch"] if "sketch" in vector else docs[vector["document"]], dtype=np.uint32)
    return ValueBits(vector["value_bits"]).reduce(values)


@pytest.mark.parametrize("native", [True, False], ids=["native", "numpy"])
def test_band_key_vectors(vectors, native, monkeypatch):
    from scrapy_simhash.index.lsh import lsh_bands

    if native and lsh_bands._native_keys is None:
        pytest.skip("the _probe extension is not built")
    if not native:
        monkeypatch.setattr(lsh_bands, "_native_keys", None)
    docs = {d["name"]: d["values"] for d in vectors["documents"]}
    for v in vectors["bands"]:
        hasher = BandHasher(v["bands"], v["rows"])
        if "multipliers" in v:
            assert [f"{m:016x}" for m in hasher.multipliers.tolist()] == v["multipliers"]
            assert [f"{o:016x}" for o in hasher.offsets.tolist()] == v["offsets"]
        sketch = _vector_band_sketch(v, docs)
        assert [f"{k:016x}" for k in hasher.keys(sketch).tolist()] == v["keys"]
        assert [f"{k:016x}" for k in hasher.keys_many(np.stack([sketch, sketch]))[1].tolist()] == v["keys"]


def test_spec_band_keys_reproduce_the_vectors(vectors):
    # The band-key block of docs/minhash-doc-1.md, run as written: the spec alone gives the keys.
    doc = (Path(__file__).parent.parent / "docs" / "minhash-doc-1.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(M64 = .*?)```", doc, re.S).group(1)
    namespace: dict = {}
    exec(block, namespace)
    docs = {d["name"]: d["values"] for d in vectors["documents"]}
    for v in vectors["bands"]:
        values = [int(x) for x in _vector_band_sketch(v, docs)]
        keys = namespace["band_keys"](values, v["bands"], v["rows"])
        assert [f"{k:016x}" for k in keys] == v["keys"]


def test_vector_edge_cases_are_defined(vectors):
    docs = {d["name"]: d for d in vectors["documents"]}
    assert docs["empty"]["values"] == [0xFFFFFFFF] * 128
    assert docs["no-tokens"]["values"] == [0xFFFFFFFF] * 128
    assert docs["one-token"]["shingles"] == ["hello"]
    assert docs["two-tokens"]["shingles"] == ["hello world"]
    assert docs["three-tokens"]["shingles"] == ["one two three"]
    assert docs["chinese"]["tokens"][:3] == ["中华", "华人", "人民"]
    assert mh.minhash("").is_empty and not mh.minhash("hello").is_empty


def test_vectors_pin_each_tokenization_rule(vectors):
    # Written out by hand from docs/minhash-doc-1.md §1, not from the code.
    docs = {d["name"]: d for d in vectors["documents"]}
    # Script, not Script_Extensions: U+30FC (Script=Common) ends a stretch and is a token of its own.
    assert docs["script-not-script-extensions"]["tokens"] == ["コ", "ー", "ヒ", "ー", "を飲", "飲む"]
    # A stretch mixes the seven scripts freely.
    assert docs["mixed-script-stretch"]["tokens"] == ["ab", "中文", "文ภ", "ภา", "าษ", "ษา"]
    # Every bigram or single character of a stretch is a token, letter or not; the pieces around a
    # stretch need a letter; a run without a letter is dropped before any of this.
    assert docs["letterless-pieces"]["tokens"] == ["abc", "๑๒", "def", "ที", "ี่", "中", "文"]
    # NFC first, then casefold, and the casefolded text is not normalised again.
    assert docs["casefold-not-renormalized"]["tokens"] == [
        "j\u030c",
        "i\u0307stanbul",
        "fine",
        "\u03b9\u0308\u0301",
    ]


def test_long_vectors_are_real_text(vectors):
    docs = {d["name"]: d for d in vectors["documents"]}
    for name in ("long", "long-edited"):
        assert docs[name]["token_count"] >= 1000
        assert len(set(shingles(tokens(docs[name]["text"]), 3))) >= 900
        assert len(set(docs[name]["values"])) >= 120  # every bin filled by a shingle of its own
    equal = np.count_nonzero(np.array(docs["long"]["values"]) == np.array(docs["long-edited"]["values"]))
    assert 0.85 < equal / 128 < 1  # one sentence changed, comments appended


def test_sparse_vectors_cover_4096_values_and_the_fallback(vectors):
    sparse = vectors["sparse"]
    assert {(v["num_values"], len(v["shingles"])) for v in sparse} >= {(4096, 2), (4096, 3)}
    for vector in sparse:
        assert vector["probed_bins"] + vector["fallback_bins"] + len(vector["filled"]) == vector["num_values"]
        assert vector["fallback_bins"] > 0 and vector["probed_bins"] > 0
        assert any(e["from"] < e["bin"] for e in vector["fallback_examples"])  # wrapped around to the start


# --------------------------------------------------------------------------------------------------
# native == pure Python

_SCRIPTS = st.sampled_from(
    [
        "abcdefghij",
        "ÄÖÜßẞáéíóúñçİıǅ",
        "中文字符测试北京东京",
        "ひらがなカタカナ",
        "ภาษาไทย",
        "ພາສາລາວ",
        "नमस्तेदुनियाक्षि",
        "مرحبابالعالم",
        "0123456789٠١٢",
        "_-.,!? \t\n\u00a0\u200b\u0301\u0308",
    ]
)
_WORDY = st.lists(
    _SCRIPTS.flatmap(lambda chars: st.text(alphabet=chars, min_size=1, max_size=8)), max_size=40
).map(" ".join)


@pytest.mark.skipif("native" not in IMPLEMENTATIONS, reason="native extension not built")
@settings(max_examples=300, deadline=None)
@given(text=st.one_of(st.text(max_size=200), _WORDY), num_values=st.sampled_from([1, 5, 64, 128]))
def test_native_equals_python(text, num_values):
    native = mh.minhash(text, num_values, implementation="native")
    python = mh.minhash(text, num_values, implementation="python")
    assert native == python
    assert mh.shingle_hashes(text, implementation="native") == mh.shingle_hashes(
        text, implementation="python"
    )


def test_without_the_extension_the_pure_python_path_is_used():
    # A machine where _minhash did not build (but the simhash extension did): minhash() still
    # works, with the same values, and only an explicit implementation="native" is an error.
    code = (
        "import sys; sys.modules['scrapy_simhash.fingerprint._minhash'] = None\n"
        "from scrapy_simhash.fingerprint import backend, minhash as mh\n"
        "assert mh._native is None and backend.current().name == 'native'\n"
        "print(mh.minhash('one two three four').to_text())\n"
        "try:\n    mh.minhash('x', implementation='native')\n"
        "except RuntimeError as exc:\n    print('RuntimeError', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    text, error = out.stdout.splitlines()
    assert text == mh.minhash("one two three four", implementation="python").to_text()
    assert error.startswith("RuntimeError the native minhash extension is not available")


@pytest.mark.skipif("native" not in IMPLEMENTATIONS, reason="native extension not built")
@pytest.mark.parametrize(
    "text",
    [
        "ab\ud800cd ef gh",  # a lone surrogate separates tokens
        "\udfff",
        "x" * 20000,  # one long token
        "中" * 5000,  # one long bigram stretch: twice the characters in tokens
        "a " * 20000,  # many repeats of one shingle
        "ǅ\u0301\u0308 ﬁ ß İ" * 50,  # casefolding and NFC change the length
    ],
)
def test_native_equals_python_edge_texts(text):
    native = mh.minhash_with_count(text, 256, implementation="native")
    assert native == mh.minhash_with_count(text, 256, implementation="python")


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_simhash_and_minhash_is_both(implementation):
    for text in DOCUMENTS.values():
        value, sketch, count = mh.simhash_and_minhash(text, 64, implementation=implementation)
        assert value == fp.simhash(text) and count == len(tokens(text))
        assert sketch == mh.minhash(text, 64, implementation=implementation)


@settings(max_examples=100, deadline=None)
@given(
    hashes=st.lists(st.integers(0, 2**64 - 1), max_size=300),
    num_values=st.integers(1, 200),
    seed=st.integers(),
)
def test_sketch_ignores_order_and_repeats(hashes, num_values, seed):
    shuffled = hashes * 2
    random.Random(seed).shuffle(shuffled)
    assert mh.minhash_of_hashes(shuffled, num_values) == mh.minhash_of_hashes(hashes, num_values)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_minhash_many_rows_are_single_sketches(implementation):
    texts = list(DOCUMENTS.values())
    many = mh.minhash_many(texts, 64, implementation=implementation)
    assert many.dtype == np.uint32 and many.shape == (len(texts), 64)
    for row, text in zip(many, texts, strict=True):
        assert mh.MinHash(row) == mh.minhash(text, 64, implementation=implementation)
    assert mh.minhash_many([], implementation=implementation).shape == (0, mh.DEFAULT_NUM_VALUES)


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_densification_fills_every_bin_from_the_filled_ones(implementation):
    # One shingle, 4096 bins: one bin is filled and most empty bins exhaust their 1024 random
    # probes, so the cyclic fallback decides them; every bin ends with the one value.
    one = mh.minhash("hello", 4096, implementation=implementation)
    [h] = mh.shingle_hashes("hello")
    assert set(one.values.tolist()) == {h & 0xFFFFFFFF}
    # Two shingles in 1024 bins: every value is one of the two, both appear.
    two = mh.minhash("alpha beta gamma delta", 1024, implementation=implementation)
    assert set(two.values.tolist()) == {h & 0xFFFFFFFF for h in mh.shingle_hashes("alpha beta gamma delta")}


def test_pure_python_densification_takes_each_try_for_every_waiting_bin_at_once(monkeypatch):
    # One shingle in 4096 bins: about three million probes. The reference (the fallback where the C
    # extension is not built) made one Python call each, seconds a sketch; it now takes try t of every
    # bin still waiting in one array step. The bins it lands on are probe()'s: the committed sparse
    # vectors (probed and fallback bins) pin them.
    calls = 0
    one_at_a_time = ref.mix64

    def counted(z: int) -> int:
        nonlocal calls
        calls += 1
        return one_at_a_time(z)

    monkeypatch.setattr(ref, "mix64", counted)
    mh.minhash("hello", 4096, implementation="python")
    assert calls == 0


@pytest.mark.skipif("native" not in IMPLEMENTATIONS, reason="native extension not built")
@settings(max_examples=40, deadline=None)
@given(text=_WORDY, num_values=st.sampled_from([2, 300, 2048, 4096]))
def test_native_equals_python_on_sparse_sketches(text, num_values):
    # Many more bins than shingles: densification (probes and fallback) does most of the work.
    assert mh.minhash(text, num_values, implementation="native") == mh.minhash(
        text, num_values, implementation="python"
    )


# --------------------------------------------------------------------------------------------------
# The MinHash object and its forms


def test_values_are_read_only_uint32():
    sketch = mh.minhash(DOCUMENTS["english"])
    assert sketch.values.dtype == np.uint32 and sketch.values.shape == (128,)
    assert sketch.num_values == 128 and sketch.scheme == "minhash-doc/1"
    assert not sketch.values.flags.writeable
    with pytest.raises(ValueError):
        sketch.values[0] = 1
    with pytest.raises(AttributeError):
        sketch._values = np.zeros(128, np.uint32)
    source = np.arange(8, dtype=np.uint32)
    copy = mh.MinHash(source)
    source[0] = 99
    assert copy.values[0] == 0


def test_pickle_and_copy_keep_the_sketch_immutable():
    # Batch work sends sketches to other processes: the copy must be as read-only as the original.
    sketch = mh.minhash(DOCUMENTS["english"])
    for clone in (pickle.loads(pickle.dumps(sketch)), copy.deepcopy(sketch), copy.copy(sketch)):
        assert clone == sketch and hash(clone) == hash(sketch)
        assert not clone.values.flags.writeable


def test_jaccard_rules():
    a, b = mh.minhash(DOCUMENTS["english"]), mh.minhash(DOCUMENTS["german-casefold"])
    assert a.jaccard(a) == 1.0
    assert a.jaccard(b) == b.jaccard(a) < 0.2
    assert mh.minhash("").jaccard(mh.minhash("   ")) == 1.0  # two empty sketches: all positions equal
    assert mh.minhash("").jaccard(a) == 0.0
    with pytest.raises(ValueError, match="sizes differ"):
        a.jaccard(mh.minhash(DOCUMENTS["english"], 64))
    with pytest.raises(TypeError):
        a.jaccard(a.values)


def test_equality_and_hash():
    a, b = mh.minhash("some words here"), mh.minhash("Some words, here!")
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != mh.minhash("some words there")
    assert a != mh.minhash("some words here", 64)


@settings(max_examples=100, deadline=None)
@given(text=_WORDY, num_values=st.integers(1, 300))
def test_bytes_and_text_round_trip(text, num_values):
    sketch = mh.minhash(text, num_values)
    data = sketch.to_bytes()
    assert len(data) == 4 + 4 * num_values and data[:4] == b"mh\x01\x00"
    assert mh.MinHash.from_bytes(data) == sketch
    assert mh.MinHash.from_text(sketch.to_text()) == sketch
    assert set(sketch.to_text()) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def test_byte_layout_is_little_endian():
    sketch = mh.MinHash([1, 0x01020304])
    assert sketch.to_bytes() == b"mh\x01\x00" + b"\x01\x00\x00\x00" + b"\x04\x03\x02\x01"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "do not start"),
        (b"xx\x01\x00\x00\x00\x00\x00", "do not start"),
        (b"mh\x02\x00\x00\x00\x00\x00", "version 2"),
        (b"mh\x01\x00", "bad sketch length"),
        (b"mh\x01\x00\x00\x00\x00", "bad sketch length"),
    ],
)
def test_bad_bytes(data, message):
    with pytest.raises(ValueError, match=message):
        mh.MinHash.from_bytes(data)


@pytest.mark.parametrize("text", ["", "   ", "not base64!", "bWgBAA", "bWgBAAEAAA==", "bWgBAAEAA+/", "é"])
def test_bad_text(text):
    with pytest.raises(ValueError):
        mh.MinHash.from_text(text)


_BASE64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TEXT_FORM_SPACE = " \t\r\n"
"""The only characters from_text ignores, and only around the form (docs/minhash-doc-1.md §6)."""
_JUNK = [*"*.~ \t\n=+/", "\u00a0", "\u3000", "\u2028", "\x0b", "\x0c", "\x1c", "é", "Ａ"]


def _decodes_canonically(body: str) -> bool:
    """The text form's rule, written independently of from_text: base64url characters only, no
    padding, a length base64 allows (not 1 mod 4), and zero bits where the last character has
    bits to spare (re-encoding gives the same text)."""
    if not body or len(body) % 4 == 1 or any(c not in _BASE64URL for c in body):
        return False
    data = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    return base64.urlsafe_b64encode(data).decode().rstrip("=") == body


@pytest.mark.parametrize(
    "text",
    [
        "bWgB*AAU.AAAA~",  # base64's lenient decoder drops the stray characters and reads 0x00000005
        "bWgBAAcAAAB",  # the one-value sketch bWgBAAcAAAA with a set unused bit
        "bWgBAAcAAAAB",  # 12 characters hold 9 bytes: not 4 + 4k
        "bWgBAAcAAAAAB",  # a length of 1 mod 4 is never base64
        "bWgB AAcAAAA",
        "\u00a0bWgBAAcAAAA",
        "bWgBAAcAAAA\u3000",
        "bWgBAAcAAAA\x0b",
        "bWgBAAcAAAA\x1c",
        "bWgBAAcAAAA=",
        "ｂWgBAAcAAAA",
    ],
)
def test_text_form_refuses_junk_the_base64_decoder_would_take(text):
    with pytest.raises(ValueError):
        mh.MinHash.from_text(text)


def test_text_form_ignores_only_ascii_space_around_it():
    sketch = mh.MinHash([7])
    assert sketch.to_text() == "bWgBAAcAAAA"
    for around in _TEXT_FORM_SPACE:
        assert mh.MinHash.from_text(f"{around}bWgBAAcAAAA{around}") == sketch


def test_text_form_of_more_than_4096_values_is_refused():
    too_many = base64.urlsafe_b64encode(mh.MAGIC + bytes(4 * 4097)).decode().rstrip("=")
    with pytest.raises(ValueError, match="between 1 and 4096"):
        mh.MinHash.from_text(too_many)
    most = mh.MinHash(np.arange(4096, dtype=np.uint32))
    assert mh.MinHash.from_text(most.to_text()) == most


_SKETCHES = st.integers(1, 70).flatmap(
    lambda k: st.lists(st.integers(0, 2**32 - 1), min_size=k, max_size=k).map(mh.MinHash)
)


@settings(max_examples=200, deadline=None)
@given(sketch=_SKETCHES, before=st.sampled_from(["", *_TEXT_FORM_SPACE]), after=st.text(_TEXT_FORM_SPACE))
def test_every_sketch_round_trips_through_its_text_form(sketch, before, after):
    text = sketch.to_text()
    assert _decodes_canonically(text)
    assert mh.MinHash.from_text(before + text + after) == sketch


@settings(max_examples=300, deadline=None)
@given(
    sketch=_SKETCHES,
    where=st.integers(0, 100),
    extra=st.sampled_from(_JUNK) | st.sampled_from(list(_BASE64URL)),
    last=st.sampled_from(list(_BASE64URL)),
)
def test_a_changed_text_form_is_refused_or_canonical(sketch, where, extra, last):
    text = sketch.to_text()
    where = min(where, len(text))
    for changed in (text[:where] + extra + text[where:], text[:-1] + last):
        try:
            parsed = mh.MinHash.from_text(changed)
        except ValueError:
            continue
        assert parsed.to_text() == changed.strip(_TEXT_FORM_SPACE)


@settings(max_examples=300, deadline=None)
@given(
    head=st.sampled_from(["", "bWgBA"]),  # the text form of every sketch starts bWgBA
    tail=st.text(alphabet=st.sampled_from(list(_BASE64URL) + _JUNK), max_size=40),
)
def test_random_text_is_refused_or_canonical(head, tail):
    text = head + tail
    body = text.strip(_TEXT_FORM_SPACE)
    try:
        parsed = mh.MinHash.from_text(text)
    except ValueError:
        return
    assert _decodes_canonically(body) and parsed.to_text() == body


@pytest.mark.parametrize(
    "values", [[], [-1, 2], [2**32], np.zeros((2, 2), np.uint32), [1.5, 2.5], list(range(4097))]
)
def test_bad_values(values):
    with pytest.raises((ValueError, TypeError)):
        mh.MinHash(values)


def test_bad_arguments():
    with pytest.raises(ValueError, match="between 1 and"):
        mh.minhash("text", 0)
    with pytest.raises(TypeError):
        mh.minhash("text", 2.5)
    with pytest.raises(TypeError):
        mh.minhash(b"bytes")
    with pytest.raises(ValueError, match="unknown implementation"):
        mh.minhash("text", implementation="fortran")


# --------------------------------------------------------------------------------------------------
# Exports and the fingerprint CLI

ENTRY = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"


def fingerprint_cli(*args: str, stdin: bytes) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY, "fingerprint", *args], input=stdin, capture_output=True, timeout=120
    )
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode())


def test_exports():
    import scrapy_simhash
    from scrapy_simhash import fingerprint

    assert scrapy_simhash.minhash is mh.minhash
    assert scrapy_simhash.MinHash is fingerprint.MinHash is mh.MinHash
    assert scrapy_simhash.minhash_many is fingerprint.minhash_many is mh.minhash_many
    assert {"MinHash", "minhash", "minhash_many"} <= set(scrapy_simhash.__all__)
    from scrapy_simhash.index.embedded import minhash_store

    assert scrapy_simhash.MinHashIndex is minhash_store.MinHashIndex  # the persistent sketch index, too
    assert {"MinHashIndex", "MinHashLSH", "minhash_pairs"} <= set(scrapy_simhash.__all__)


def test_import_of_the_package_does_not_import_numpy():
    code = "import sys, scrapy_simhash, scrapy_simhash.fingerprint; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cli_scheme_minhash():
    text = DOCUMENTS["english"]
    expected = mh.minhash(text)
    out = fingerprint_cli("--scheme", "minhash", stdin=text.encode())
    assert out.returncode == 0, out.stderr
    assert mh.MinHash.from_text(out.stdout.strip()) == expected
    out = fingerprint_cli("--scheme", "minhash", "--format", "hex", stdin=text.encode())
    assert bytes.fromhex(out.stdout.strip()) == expected.to_bytes()
    out = fingerprint_cli("--scheme", "minhash", "--format", "json", stdin=text.encode())
    record = json.loads(out.stdout)
    assert record["scheme"] == "minhash-doc/1" and record["num_values"] == 128 and record["tokens"] == 12
    assert mh.MinHash.from_text(record["minhash"]) == expected
    # the simhash default is unchanged
    assert fingerprint_cli(stdin=text.encode()).stdout.strip() == fp.to_base32(fp.simhash(text))


def test_cli_scheme_minhash_of_an_html_page(corpus):
    from scrapy_simhash.extract import DEFAULT_EXTRACTOR

    page = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[0]
    out = fingerprint_cli("--scheme", "minhash", "--html", "--format", "json", str(page), stdin=b"")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    text = DEFAULT_EXTRACTOR(gzip.decompress(page.read_bytes())).text
    assert record["extractor"] == DEFAULT_EXTRACTOR.description and record["tokens"] == len(tokens(text))
    assert mh.MinHash.from_text(record["minhash"]) == mh.minhash(text)


def test_cli_minhash_bad_uses():
    out = fingerprint_cli("--scheme", "minhash", "--format", "base32", stdin=b"some text here")
    assert out.returncode == 2 and "does not apply" in out.stderr
    out = fingerprint_cli("--format", "text", stdin=b"some text here")
    assert out.returncode == 2 and "does not apply" in out.stderr
    out = fingerprint_cli("--scheme", "minhash", stdin=b" 123 -- ")
    assert out.returncode == 1 and "no tokens" in out.stderr


# --------------------------------------------------------------------------------------------------
# Estimation accuracy on real text pairs

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def corpus_texts(corpus: Path) -> list[str]:
    """Distinct real article texts (the corpus's ground-truth bodies) of at least 100 tokens."""
    truth = corpus / "truth"
    found = []
    aeb = json.loads((truth / "scrapinghub-aeb" / "ground-truth.json").read_text(encoding="utf-8"))
    found += [aeb[key]["articleBody"] for key in sorted(aeb) if aeb[key].get("articleBody")]
    found += [p.read_text(encoding="utf-8") for p in sorted((truth / "newspaper4k" / "txt").glob("*.txt"))]
    for path in sorted((truth / "mozilla-readability").glob("*/expected.html")):
        root = lxml.html.fragment_fromstring(path.read_text(encoding="utf-8"), create_parent="div")
        found.append(" ".join(root.text_content().split()))
    seen, out = set(), []
    for text in found:
        key = tuple(tokens(text))
        if len(key) >= 100 and key not in seen:
            seen.add(key)
            out.append(text)
    return out


def variant(text: str, other: str, rng: random.Random) -> str:
    """A deterministic edit of ``text``: truncated, cut, merged with ``other`` or words replaced."""
    words, extra = text.split(), other.split()
    kind = rng.choice(["truncate", "cut", "merge", "replace", "sentences"])
    if kind == "truncate":
        return " ".join(words[: max(1, int(len(words) * rng.uniform(0.25, 1.0)))])
    if kind == "cut":
        size = int(len(words) * rng.uniform(0.0, 0.6))
        start = rng.randrange(len(words) - size + 1)
        return " ".join(words[:start] + words[start + size :])
    if kind == "merge":
        return " ".join(words + extra[: int(len(words) * rng.uniform(0.05, 1.5))])
    if kind == "replace":
        rate = rng.uniform(0.0, 0.12)
        return " ".join(rng.choice(extra) if rng.random() < rate else w for w in words)
    sentences = _SENTENCE_END.split(text)
    keep = rng.uniform(0.3, 1.0)
    return " ".join(s for s in sentences if rng.random() < keep) or sentences[0]


def shingle_set(text: str) -> set[int]:
    """The text's distinct shingles, as their 64-bit hashes: the set the sketch samples. The pairs are
    those the shingle strings give; hashing them on the native path cut the fixture's time 2.5x."""
    return set(mh.shingle_hashes(text))


def exact_jaccard(sa: set[int], sb: set[int]) -> float:
    """The Jaccard similarity of two texts' shingle sets (:func:`shingle_set`)."""
    return len(sa & sb) / len(sa | sb)


@functools.cache  # the truths are rounded to 3 decimals: a few hundred distinct values among thousands
def binomial_mae(j: float, k: int) -> float:
    """E|X/k - j| for X ~ Binomial(k, j): the MAE of an ideal k-value MinHash at Jaccard j."""
    return sum(math.comb(k, x) * j**x * (1 - j) ** (k - x) * abs(x / k - j) for x in range(k + 1))


@pytest.fixture(scope="module")
def real_pairs(corpus) -> list[tuple[str, str, float]]:
    texts = corpus_texts(corpus)
    pairs = []
    for i, text in enumerate(texts):
        rng = random.Random(f"minhash-pairs:{i}")
        original = shingle_set(text)  # once per text, not once per each of its 24 edits
        for _ in range(24):
            edited = variant(text, texts[(i + 1 + rng.randrange(len(texts) - 1)) % len(texts)], rng)
            j = exact_jaccard(original, shingle_set(edited))
            if 0.2 <= j <= 1.0:
                pairs.append((text, edited, j))
    return pairs


@pytest.mark.parametrize("k", [64, mh.DEFAULT_NUM_VALUES])
def test_estimation_error_on_real_pairs(real_pairs, k):
    assert len(real_pairs) >= 5000
    truth = np.array([j for _, _, j in real_pairs])
    assert truth.min() < 0.3 and (truth >= 0.9).mean() > 0.1  # the pairs span the range
    left = mh.minhash_many([a for a, _, _ in real_pairs], k)
    right = mh.minhash_many([b for _, b, _ in real_pairs], k)
    estimate = (left == right).mean(axis=1)
    errors = estimate - truth
    mae = float(np.abs(errors).mean())
    # k independent permutations err by Binomial(k, J)/k - J; one-permutation hashing with optimal
    # densification samples the bins without replacement and errs no more (Shrivastava 2017), so
    # the binomial MAE is the bound, widened by the standard error of a mean of n |errors| (each
    # of variance at most J(1-J)/k).
    expected = float(np.mean([binomial_mae(j, k) for j in np.round(truth, 3)]))
    spread = math.sqrt(float(np.mean(truth * (1 - truth) / k)) / len(truth))
    bias = float(errors.mean())
    by_band = {
        f"{lo:.1f}-{lo + 0.2:.1f}": float(np.abs(errors[(truth >= lo) & (truth < lo + 0.2 + 1e-9)]).mean())
        for lo in (0.2, 0.4, 0.6, 0.8)
    }
    print(
        f"\nminhash-doc/1 k={k}: {len(truth)} real pairs, MAE {mae:.4f} "
        f"(ideal {expected:.4f} ± {spread:.4f}), bias {bias:+.4f}, MAE by exact Jaccard {by_band}"
    )
    assert mae <= expected + 5 * spread
    assert abs(bias) <= 5 * spread


if __name__ == "__main__" and sys.argv[1:] == ["--write-vectors"]:
    VECTORS.write_text(json.dumps(build_vectors(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {VECTORS}")
