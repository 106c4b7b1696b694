"""simhash-doc/1: spec vectors, both implementations, codecs and invariants."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import fingerprint as fp
from scrapy_simhash.fingerprint import _purepy, backend, tokenizer

IMPLEMENTATIONS = backend.available()


@pytest.fixture(scope="module")
def vectors(spec):
    return json.loads((spec / "vectors.json").read_text(encoding="utf-8"))


def test_native_extension_is_built():
    # The package build compiles the extension; on this project's CI a missing
    # extension is a packaging bug, not an acceptable fallback.
    assert "native" in IMPLEMENTATIONS, "the C extension did not build or import"


def test_c_extensions_list_the_headers_they_include():
    """A header edit must rebuild every extension that includes it (pyproject's ``depends``)."""
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parent.parent
    extensions = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "ext-modules"
    ]
    for extension in extensions:
        for source in extension["sources"]:
            folder = Path(source).parent
            included = re.findall(r'^#include "([^"]+)"', (root / source).read_text(), flags=re.MULTILINE)
            assert {str(folder / name) for name in included} <= set(extension.get("depends", [])), source


def test_the_c_tokeniser_is_written_once():
    """_native.c and _minhash.c share _tokenize.h rather than each keeping a copy."""
    folder = Path(fp.__file__).parent
    for source in ("_native.c", "_minhash.c"):
        text = (folder / source).read_text()
        assert '#include "_tokenize.h"' in text
        assert "tokenize_run(" not in text and "utf8_put(" not in text, source


def test_vectors_scheme(vectors):
    assert vectors["scheme"] == fp.SCHEME


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_token_hash_vectors(vectors, implementation):
    for vector in vectors["token_hashes"]:
        data = bytes.fromhex(vector["utf8_hex"])
        assert data == vector["token"].encode("utf-8")
        h = fp.jenkins64(data, implementation=implementation)
        assert f"{h:016x}" == vector["jenkins64"], vector["token"]
        assert f"{h & 0xFFFFFFFF:08x}" == vector["lookup3_c"]
        assert f"{h >> 32:08x}" == vector["lookup3_b"]


def test_document_tokens(vectors):
    for vector in vectors["documents"]:
        assert fp.tokens(vector["text"]) == vector["tokens"], vector["text"]
        assert sorted(set(fp.tokens(vector["text"]))) == sorted(vector["features"])


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_document_simhash_vectors(vectors, implementation):
    for vector in vectors["documents"]:
        h = fp.simhash(vector["text"], implementation=implementation)
        assert fp.to_hex(h) == vector["simhash_hex"], vector["text"]
        assert fp.to_base32(h) == vector["simhash_base32"], vector["text"]
        assert fp.from_base32(vector["simhash_base32"]) == h
        assert fp.from_hex(vector["simhash_hex"]) == h


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("हिन्दी", ["हिन्दी"]),  # Mc inside a word keeps it whole
        ("r2d2 __init__ 2024", ["r2d2", "__init__"]),  # numbers alone are not tokens
        ("iPhone手机 2024年", ["iphone", "手机", "年"]),
        ("a手b", ["a", "手", "b"]),
        ("ＡＢＣ", ["ａｂｃ"]),  # fullwidth Latin is not an unspaced script
        ("Straße", ["strasse"]),
        ("e\u0301t\u00e9", ["été"]),  # NFC before casefold
    ],
)
def test_tokenizer_rules(text, expected):
    assert fp.tokens(text) == expected


def test_empty_text_has_zero_fingerprint():
    assert fp.simhash("") == 0
    assert fp.simhash("1234 -- !!!") == 0
    assert fp.simhash_with_count("42 42") == (0, 0)


def test_repeated_tokens_count_once():
    assert fp.simhash("cat cat cat sat") == fp.simhash("cat sat")
    assert fp.simhash("cat sat") != fp.simhash("cat sat mat")


def test_weighted_unit_weights_match_features():
    features = ["alpha", "beta", "gamma", "delta"]
    assert fp.simhash_weighted({f: 1 for f in features}) == fp.simhash_features(features)


def test_weighted_heavy_feature_dominates():
    heavy = fp.simhash_weighted({"alpha": 100, "beta": 1, "gamma": 1})
    assert heavy == fp.jenkins64(b"alpha")


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_bad_feature_types_raise(implementation):
    with pytest.raises(TypeError):
        backend.get(implementation).simhash_features([b"bytes"])
    with pytest.raises(TypeError):
        backend.get(implementation).simhash_weighted([("a", 1, 2)])
    with pytest.raises(UnicodeEncodeError):
        backend.get(implementation).simhash_features(["\ud800"])


def test_shingles():
    toks = ["a", "b", "c", "d"]
    assert fp.shingles(toks, 2) == ["a b", "b c", "c d"]
    assert fp.shingles(toks, 5) == ["a b c d"]
    assert fp.shingles([], 3) == []
    with pytest.raises(ValueError):
        fp.shingles(toks, 0)
    assert fp.shingle_scheme(1) == fp.SCHEME
    assert fp.shingle_scheme(3) != fp.SCHEME
    text = "one two three four five six"
    assert fp.simhash(text, shingle=3) == fp.simhash_features(
        ["one two three", "two three four", "three four five", "four five six"]
    )


def test_hamming_and_similarity():
    assert fp.hamming(0, 0) == 0
    assert fp.hamming(0, (1 << 64) - 1) == 64
    assert fp.hamming(0b1011, 0b0001) == 2
    assert fp.similarity(5, 5) == 1.0
    assert fp.similarity(0, 0b111) == pytest.approx(1 - 3 / 64)


@pytest.mark.parametrize(
    "bad",
    ["4l24lemdc4rh", "4l24lemdc4rhmm", "4l24lemdc4rh1", "4l24lemdc4rh!", "4l24lemdc4rhn", ""],
)
def test_base32_rejects(bad):
    with pytest.raises(ValueError):
        fp.from_base32(bad)


def test_base32_accepts_case_and_padding():
    assert fp.to_base32(0xE2F5C59183172276) == "4l24lemdc4rhm"
    assert fp.from_base32("4L24LEMDC4RHM") == 0xE2F5C59183172276
    assert fp.from_base32("4l24lemdc4rhm===") == 0xE2F5C59183172276
    assert fp.parse("e2f5c59183172276") == fp.parse("4l24lemdc4rhm")


def test_hex_rejects():
    for bad in ["e2f5c5918317227", "e2f5c59183172276a", "g2f5c59183172276"]:
        with pytest.raises(ValueError):
            fp.from_hex(bad)
    with pytest.raises(ValueError):
        fp.to_hex(1 << 64)
    with pytest.raises(ValueError):
        fp.to_base32(-1)


def test_set_backend_round_trip():
    previous = fp.set_backend("python")
    try:
        assert backend.current().name == "python"
    finally:
        fp.set_backend(previous.name)
    with pytest.raises(ValueError):
        fp.set_backend("fortran")


@given(st.integers(min_value=0, max_value=(1 << 64) - 1))
def test_codecs_round_trip(h):
    assert fp.from_base32(fp.to_base32(h)) == h
    assert fp.from_hex(fp.to_hex(h)) == h
    assert len(fp.to_base32(h)) == 13


@settings(max_examples=300)
@given(st.binary(max_size=80))
def test_jenkins64_native_matches_python(data):
    for implementation in IMPLEMENTATIONS:
        assert fp.jenkins64(data, implementation=implementation) == _purepy.jenkins64(data)


@settings(max_examples=200)
@given(st.text(max_size=400))
def test_simhash_native_matches_python(text):
    values = {fp.simhash(text, implementation=i) for i in IMPLEMENTATIONS}
    assert len(values) == 1


@settings(max_examples=100)
@given(st.dictionaries(st.text(min_size=1, max_size=12), st.integers(-5, 20), max_size=30))
def test_weighted_native_matches_python(weights):
    values = {fp.simhash_weighted(weights, implementation=i) for i in IMPLEMENTATIONS}
    assert len(values) == 1


@given(st.text(max_size=300))
def test_tokens_are_normalized_and_lettered(text):
    table = tokenizer.class_table()  # Unicode 15.0's classes, whatever this Python's unicodedata says
    for token in fp.tokens(text):
        assert token
        assert any(table[ord(ch)] & tokenizer.CLASS_LETTER for ch in token)
        assert all(table[ord(ch)] & tokenizer.CLASS_RUN for ch in token)


@given(st.text(max_size=200), st.text(max_size=200))
def test_hamming_is_a_metric(a, b):
    ha, hb = fp.simhash(a), fp.simhash(b)
    assert fp.hamming(ha, hb) == fp.hamming(hb, ha)
    assert (fp.hamming(ha, hb) == 0) == (ha == hb)
    assert 0 <= fp.hamming(ha, hb) <= 64


# Characters that exercise every tokeniser rule: Latin, digits, connectors, combining
# and spacing marks, Devanagari, Han/Kana/Thai (bigrams), Han-script Nl (a separator),
# lone surrogates, and separators.
_TRICKY = st.sampled_from(
    [*"aZß_9 ,.-\u0301\u093f\u0939\u0928\u094d", *"日本語のテキストー々〇ภาษาไทย๑២ကៀ", "\ud800", "\u3000"]
)


@settings(max_examples=400)
@given(st.text(alphabet=_TRICKY, max_size=60))
def test_native_tokeniser_matches_python_on_tricky_text(text):
    results = {backend.get(i).simhash_text(text) for i in IMPLEMENTATIONS}
    assert len(results) == 1
    assert results.pop()[1] == len(fp.tokens(text))


def test_native_dedup_is_exact_under_many_tokens():
    text = " ".join(f"w{i}x" for i in range(5000)) + " w1x" * 100
    results = {backend.get(i).simhash_text(text) for i in IMPLEMENTATIONS}
    assert results == {(fp.simhash_features({f"w{i}x" for i in range(5000)}), 5100)}
