"""``resiliparse+trafilatura``: Resiliparse's text, trafilatura's only where Resiliparse's is short.

The contract every extractor keeps (reasons, encodings, determinism, fuzzing) is in
``test_extractor_contract.py``, which runs this one too; these are the cascade's own rules.
"""

from __future__ import annotations

import pytest

from scrapy_simhash.extract import Extractor, extractor_for, extractor_names, get_extractor
from scrapy_simhash.extract.cascade import MIN_WORDS, ResiliparseTrafilaturaExtractor, has_words
from scrapy_simhash.extract.identity import parse_description

pytest.importorskip("resiliparse")

SENTENCES = " ".join(
    f"The harbour board met on Tuesday to discuss plan number {n} for the old quay and its cranes."
    for n in range(12)
)
ARTICLE = f"<html><body><article><h1>Quay plans</h1><p>{SENTENCES}</p></article></body></html>".encode()
HIDDEN = f'<html><body><div class="modal"><p>{SENTENCES}</p></div></body></html>'.encode()
"""An article in an element Resiliparse's main-content rules drop (``modal``) and trafilatura keeps."""


class _Counting:
    """Counts the calls of one extractor method, still calling it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, cls: type[Extractor], method: str) -> None:
        self.calls = 0
        original = getattr(cls, method)

        def counted(extractor: Extractor, *args: object) -> object:
            self.calls += 1
            return original(extractor, *args)

        monkeypatch.setattr(cls, method, counted)


def test_it_is_registered_and_named_by_its_description() -> None:
    assert "resiliparse+trafilatura" in extractor_names()
    cascade = get_extractor("resiliparse+trafilatura")
    assert isinstance(cascade, ResiliparseTrafilaturaExtractor)
    assert isinstance(extractor_for(cascade.description), ResiliparseTrafilaturaExtractor)


def test_the_description_names_both_libraries_and_the_threshold() -> None:
    from importlib.metadata import version

    identity = parse_description(get_extractor("resiliparse+trafilatura").description)
    assert identity.name == "resiliparse+trafilatura"
    assert identity.version == f"{version('resiliparse')}+{version('trafilatura')}"
    options = dict(identity.options)
    assert options["min_words"] == str(MIN_WORDS)
    assert options["fast.main"] == "1" and options["slow.fast"] == "1" and options["boilerplate"] == "2"
    other = parse_description(get_extractor("resiliparse+trafilatura", min_words=MIN_WORDS + 1).description)
    assert not identity.same_extractor(other)


def test_a_page_resiliparse_reads_never_reaches_trafilatura(monkeypatch: pytest.MonkeyPatch) -> None:
    from scrapy_simhash.extract import TrafilaturaExtractor

    slow = _Counting(monkeypatch, TrafilaturaExtractor, "main_text_and_tree")
    result = get_extractor("resiliparse+trafilatura")(ARTICLE)
    assert slow.calls == 0
    assert result == get_extractor("resiliparse")(ARTICLE)
    assert "plan number 11" in result.text


def test_a_page_resiliparse_cannot_read_gets_trafilaturas_text(monkeypatch: pytest.MonkeyPatch) -> None:
    from scrapy_simhash.extract import TrafilaturaExtractor

    assert get_extractor("resiliparse")(HIDDEN).reason == "no_text"
    slow = _Counting(monkeypatch, TrafilaturaExtractor, "main_text_and_tree")
    result = get_extractor("resiliparse+trafilatura")(HIDDEN)
    assert slow.calls == 1
    assert result == get_extractor("trafilatura")(HIDDEN)
    assert "plan number 11" in result.text


def test_a_short_text_goes_to_trafilatura_and_a_long_one_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    from scrapy_simhash.extract import TrafilaturaExtractor

    slow = _Counting(monkeypatch, TrafilaturaExtractor, "main_text_and_tree")
    words = len(SENTENCES.split())  # the headline (h1) is not main text
    get_extractor("resiliparse+trafilatura", min_words=words)(ARTICLE)
    assert slow.calls == 0
    get_extractor("resiliparse+trafilatura", min_words=words + 1)(ARTICLE)
    assert slow.calls == 1


@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [
        ("", 1, False),
        ("", 0, True),
        ("one two, three", 3, True),
        ("one two, three", 4, False),
        ("a-b c", 3, True),
    ],
)
def test_words_are_runs_of_letters_and_digits(text: str, count: int, expected: bool) -> None:
    assert has_words(text, count) is expected
