"""The opt-in long-lines scheme (simhash-doc/1+lines<N>): what it drops, what it keeps."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash import fingerprint as fp
from scrapy_simhash.fingerprint.lines import (
    DEFAULT_MIN_LINE_TOKENS,
    lines_scheme,
    long_line_tokens,
    simhash_lines,
)

ARTICLE = (
    "Updated March 3, 2019 14:05\n"
    "By Jane Miller\n"
    "The city council voted on Tuesday to extend the night bus service to the northern suburbs.\n"
    "Advertisement\n"
    "Residents had asked for the change for years, saying the last bus left too early for shift workers.\n"
)
LONG = [line for line in ARTICLE.splitlines() if len(fp.tokens(line)) >= DEFAULT_MIN_LINE_TOKENS]

words = st.text(alphabet="abcdefghij", min_size=1, max_size=6)


def test_scheme_label_names_the_threshold_and_shingles() -> None:
    assert lines_scheme() == f"{fp.SCHEME}+lines{DEFAULT_MIN_LINE_TOKENS}"
    assert lines_scheme(12) == "simhash-doc/1+lines12"
    assert lines_scheme(12, 2) == "simhash-doc/1+lines12+shingles2"
    assert lines_scheme() != fp.SCHEME


def test_shingled_variant_hashes_shingles_of_the_kept_tokens() -> None:
    kept = long_line_tokens(ARTICLE)
    value, count = simhash_lines(ARTICLE, shingle=2)
    assert value == fp.simhash_features(fp.shingles(kept, 2))
    assert count == len(kept)
    assert value != simhash_lines(ARTICLE)[0]
    with pytest.raises(ValueError, match="shingle"):
        lines_scheme(12, 0)


@pytest.mark.parametrize("bad", [0, -3])
def test_threshold_below_one_is_refused(bad: int) -> None:
    with pytest.raises(ValueError, match="min_line_tokens"):
        lines_scheme(bad)
    with pytest.raises(ValueError, match="min_line_tokens"):
        long_line_tokens("some text", bad)


def test_short_lines_are_dropped_and_paragraphs_kept() -> None:
    assert len(LONG) == 2
    assert long_line_tokens(ARTICLE) == fp.tokens("\n".join(LONG))
    assert "advertisement" not in long_line_tokens(ARTICLE)
    assert "miller" not in long_line_tokens(ARTICLE)


def test_fingerprint_is_simhash_doc1_of_the_long_lines() -> None:
    value, count = simhash_lines(ARTICLE)
    assert value == fp.simhash("\n".join(LONG))
    assert count == len(fp.tokens("\n".join(LONG)))


def test_a_changed_dateline_leaves_the_fingerprint_alone() -> None:
    changed = ARTICLE.replace("Updated March 3, 2019 14:05", "Updated March 4, 2019 09:12 by Sam Okafor")
    assert simhash_lines(changed) == simhash_lines(ARTICLE)
    assert fp.simhash(changed) != fp.simhash(ARTICLE)


def test_text_without_a_long_line_has_no_fingerprint() -> None:
    assert simhash_lines("Home\nNews\nContact us\n") == (0, 0)
    assert simhash_lines("") == (0, 0)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(words, min_size=1, max_size=20), min_size=1, max_size=8),
    st.lists(words, min_size=1, max_size=DEFAULT_MIN_LINE_TOKENS - 1),
    st.integers(min_value=0, max_value=8),
)
def test_inserting_a_short_line_never_changes_the_fingerprint(lines, short, where) -> None:
    text = "\n".join(" ".join(line) for line in lines)
    with_short = [" ".join(line) for line in lines]
    with_short.insert(min(where, len(with_short)), " ".join(short))
    assert simhash_lines("\n".join(with_short)) == simhash_lines(text)
