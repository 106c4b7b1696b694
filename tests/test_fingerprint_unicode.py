"""The tokenizer's one Unicode version (15.0): the same tokens on every Python and `regex` release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import fingerprint as fp
from scrapy_simhash.fingerprint import _minhash_purepy, backend, pinned_unicode, tokenizer
from scrapy_simhash.fingerprint import minhash as mh

ROOT = Path(__file__).resolve().parent.parent
VECTORS = json.loads((ROOT / "tests/data/unicode-15-vectors.json").read_text(encoding="utf-8"))
IMPLEMENTATIONS = backend.available()
MINHASH_IMPLEMENTATIONS = ["native", "python"] if mh._native is not None else ["python"]
DOCUMENTS = VECTORS["documents"]


def test_vectors_name_the_pinned_version() -> None:
    assert VECTORS["unicode_version"] == tokenizer.UNICODE_VERSION == "15.0.0"


@pytest.mark.parametrize("doc", DOCUMENTS, ids=[d["name"] for d in DOCUMENTS])
def test_tokens_of_recent_code_points(doc: dict) -> None:
    assert fp.tokens(doc["text"]) == doc["tokens"], doc["why"]


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("doc", DOCUMENTS, ids=[d["name"] for d in DOCUMENTS])
def test_simhash_of_recent_code_points(doc: dict, implementation: str) -> None:
    assert fp.to_hex(fp.simhash(doc["text"], implementation=implementation)) == doc["simhash_hex"]
    assert fp.simhash_with_count(doc["text"], implementation=implementation)[1] == len(doc["tokens"])


@pytest.mark.parametrize("implementation", MINHASH_IMPLEMENTATIONS)
@pytest.mark.parametrize("doc", DOCUMENTS, ids=[d["name"] for d in DOCUMENTS])
def test_minhash_of_recent_code_points(doc: dict, implementation: str) -> None:
    hashes = mh.shingle_hashes(doc["text"], implementation=implementation)
    assert [f"{h:016x}" for h in hashes] == doc["minhash_shingle_hashes"]
    sketch = mh.minhash(doc["text"], 16, implementation=implementation)
    assert sketch.values.tolist() == doc["minhash_values_k16"]


def test_tokens_do_not_use_the_regex_module() -> None:
    """With `regex` unimportable, the tokenizer still gives the vectors' tokens (in a fresh interpreter)."""
    program = (
        "import json, sys\n"
        "sys.modules['regex'] = None\n"
        "from scrapy_simhash import fingerprint as fp\n"
        "docs = json.load(open(sys.argv[1], encoding='utf-8'))['documents']\n"
        "print(json.dumps([fp.tokens(d['text']) for d in docs]))\n"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    done = subprocess.run(
        [sys.executable, "-c", program, str(ROOT / "tests/data/unicode-15-vectors.json")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [doc["tokens"] for doc in DOCUMENTS]


_UNASSIGNED = pinned_unicode._pairs(pinned_unicode._unicode_data.UNASSIGNED)
_UNASSIGNED_MASK = bytearray(0x110000)
for _first, _last in _UNASSIGNED:
    _UNASSIGNED_MASK[_first : _last + 1] = b"\x01" * (_last - _first + 1)


def _assigned_in_both(cp: int) -> bool:
    """Assigned in this Python's Unicode version and in 15.0."""
    return not _UNASSIGNED_MASK[cp] and unicodedata.category(chr(cp)) != "Cn"


def test_class_table_agrees_with_this_pythons_categories() -> None:
    """Where this Python and Unicode 15.0 both assign a code point, run and letter follow its category."""
    table = tokenizer.class_table()
    unassigned = _UNASSIGNED_MASK
    wrong = []
    for cp in range(0x110000):
        flags = table[cp]
        if unassigned[cp]:
            if flags:
                wrong.append(cp)
            continue
        category = unicodedata.category(chr(cp))
        if category == "Cn":
            continue  # assigned after this Python's Unicode version
        run = category[0] in "LM" or category in ("Nd", "Pc")
        if bool(flags & tokenizer.CLASS_RUN) != run or bool(flags & tokenizer.CLASS_LETTER) != (
            category[0] == "L"
        ):
            wrong.append(cp)
    assert wrong == []


def test_pinned_casefold_and_nfc_agree_with_this_python_on_shared_code_points() -> None:
    normalizer = pinned_unicode.pinned_normalizer()
    wrong = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF or not _assigned_in_both(cp):
            continue
        ch = chr(cp)
        if normalizer.casefold(ch) != ch.casefold() or normalizer.nfc(ch) != unicodedata.normalize("NFC", ch):
            wrong.append(cp)
    assert wrong == []


# Code points of every kind the normalization cares about: composing Latin and marks of
# several classes, Hangul jamo and syllables, singletons and exclusions, Greek with tonos,
# Unicode 14.0 and 15.0 letters and marks, code points unassigned in 15.0, surrogates.
_ALPHABET = st.sampled_from(
    [
        *"aAeEoOsSßİıΣσςΐᾼ",
        *"\u0300\u0301\u0308\u0323\u0327\u0345\u05b0\u0f71\u0f72\u0f80\u093c\u094d\u0e38\u302a\u3099",
        *"\u1100\u1161\u11a8\uac00\uac01\u212b\u2126\u0958\u0344\u1e0a\u1e9e\ufb01",
        *"日本語漢字のテキストภาษา",
        "\U00010570",
        "\U00010597",
        "\U00011f04",
        "\U00011f42",
        "\U0001e08f",
        "\U00031350",
        "\U0002ebf0",
        "\U00010d50",
        "\ua7cb",
        "\U0003d000",
        "\U0001fae9",
        "\U0001f600",
        "\U0001d400",
        "\ud800",
        " ",
        "-",
        "_",
        "7",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=40))
def test_normalize_is_the_pinned_normalization(text: str) -> None:
    """On any text, this Python's fast path or the tables give what the Unicode 15.0 tables give."""
    normalizer = pinned_unicode.pinned_normalizer()
    assert fp.normalize(text) == normalizer.casefold(normalizer.nfc(text))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=40))
def test_pinned_nfc_agrees_with_unicodedata_on_shared_code_points(text: str) -> None:
    text = "".join(ch for ch in text if "\ud800" <= ch <= "\udfff" or _assigned_in_both(ord(ch)))
    assert pinned_unicode.pinned_normalizer().nfc(text) == unicodedata.normalize("NFC", text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=60))
def test_native_and_python_paths_agree_on_recent_code_points(text: str) -> None:
    simhashes = {backend.get(name).simhash_text(text) for name in IMPLEMENTATIONS}
    assert simhashes == {(fp.simhash_features(fp.tokens(text)), len(fp.tokens(text)))}
    sketches = {
        tuple(mh.minhash(text, 32, implementation=name).values.tolist()) for name in MINHASH_IMPLEMENTATIONS
    }
    assert sketches == {tuple(_minhash_purepy.sketch(text, 32)[0].tolist())}


@pytest.mark.parametrize(
    ("python_version", "needs_tables", "fast"),
    [
        ("13.0.0", "\U00010570", "a\U0003d000"),  # Vithkuqi is 14.0: unknown to that Python
        ("14.0.0", "\U0001e08f", "\U00010570\U0003d000"),
        ("15.0.0", None, "\U0001e08f\U0003d000"),
        ("16.0.0", "\U00010d50", "\U0001e08f"),  # unassigned in 15.0, but that Python knows it
        ("13.0.0", "\u2c2f", "\u2c2e"),  # the same in the Basic Multilingual Plane
        ("14.0.0", "\u0ece", "\u0e81"),
        ("16.0.0", "\ua7cb", "\ua7ca"),
        ("12.1.0", "\u00e9", "abc"),  # older than the tables reach: every text but ASCII from the tables
    ],
)
def test_which_texts_are_normalized_from_the_tables(
    monkeypatch: pytest.MonkeyPatch, python_version: str, needs_tables: str | None, fast: str | None
) -> None:
    monkeypatch.setattr(pinned_unicode.unicodedata, "unidata_version", python_version)
    if python_version == "16.0.0":  # that Python's unicodedata assigns U+A7CB
        category = unicodedata.category
        monkeypatch.setattr(
            pinned_unicode.unicodedata, "category", lambda ch: "Lu" if ch == "\ua7cb" else category(ch)
        )
    pinned_unicode._disagreeing.cache_clear()
    try:
        if needs_tables is not None:
            assert pinned_unicode.needs_tables(needs_tables)
            assert pinned_unicode.needs_tables("abc " + needs_tables + " def")
        else:
            assert pinned_unicode._disagreeing() is None
        if fast is not None:
            assert not pinned_unicode.needs_tables(fast)
            assert not pinned_unicode.needs_tables("abc " + fast + " def")
    finally:
        monkeypatch.undo()
        pinned_unicode._disagreeing.cache_clear()


def test_committed_tables_are_what_the_generator_writes() -> None:
    ucd = Path("/usr/share/unicode")
    age = ucd / "DerivedAge.txt"
    if not age.exists() or "15.0.0" not in age.open(encoding="utf-8").readline():
        pytest.skip(
            "the Unicode 15.0.0 UCD is not in /usr/share/unicode (Debian 12: apt-get install unicode-data)"
        )
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts/generate_unicode_data.py"), "--check", "--ucd", str(ucd)],
        capture_output=True,
        text=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


_FEW = ([(0x0ECE, 0x0ECE), (0x0CF3, 0x0CF3)], [(0x1E08F, 0x1E08F), (0x10570, 0x105BC)])
_MANY = ([(0x0300, 0x036F), (0x2C2F, 0x2C2F), (0xA7CB, 0xA7CB)], [(0x10D50, 0x10D65), (0x3D000, 0x3FFFF)])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=40), st.sampled_from([_FEW, _MANY]))
def test_c_and_python_find_the_same_code_points(text: str, ranges: tuple) -> None:
    """The check for code points this Python could normalize differently: C, Python and brute force agree."""
    bmp, astral = ranges
    finder = pinned_unicode._Finder.of(bmp, astral)
    expected = any(first <= ord(ch) <= last for ch in text for first, last in [*bmp, *astral])
    assert finder.found_in_python(text) == expected
    assert finder.found_in(text) == expected
    if "native" in IMPLEMENTATIONS:
        assert pinned_unicode._any_flagged is not None
