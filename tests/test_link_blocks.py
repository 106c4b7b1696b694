"""What follows the article and points to other pages is not the page's text (extract/link_blocks.py)."""

from __future__ import annotations

import pytest

from scrapy_simhash.extract import boilerplate, get_extractor, link_blocks
from scrapy_simhash.extract.boilerplate import split_template

STORY = (
    "The river authority opened the new flood gates on Monday after four years of work, and the first barges "
    "passed through them before noon while a crowd watched from the old quay."
)
BODY = "".join(f"<p>{STORY} Part {n}.</p>" for n in range(8))


def _page(inside: str = "", after: str = "", before: str = "") -> str:
    """A full story in an ``article`` (headline, then a body of eight long paragraphs), with ``inside`` at
    the end of the article, ``after`` following it and ``before`` preceding it, in a wrapper no name marks."""
    return (
        "<html><head><title>Flood gates</title></head><body><div class='wrap'>"
        f"{before}<article class='story'><h1>Flood gates open</h1><div class='body'>{BODY}</div>{inside}"
        f"</article>{after}</div></body></html>"
    )


def _clean(html: str, *lines: str) -> str:
    """The template step on an extraction that kept the story and ``lines`` (as Resiliparse does)."""
    text = "\n".join([*(f"{STORY} Part {n}." for n in range(8)), *lines])
    cleaned = split_template(html, text).text
    assert cleaned is not None
    for n in range(8):  # the article is never dropped
        assert f"{STORY} Part {n}." in cleaned
    return cleaned


def test_blocks_after_the_article_are_dropped():
    """Widgets, a gallery's captions and pagination after the story: no name marks them, no link list
    holds them, and the corpus's ground truths end at the article."""
    after = (
        "<div class='box'><h4>Polls</h4><p>Loading poll results for this week</p></div>"
        "<div class='pics'><div class='item'><img src='a.jpg'>"
        "<span>The quay at dawn, seen from the bridge</span></div>"
        "<div class='item'><img src='b.jpg'><span>Barges waiting at the lock gates</span></div></div>"
        "<div class='pages'><a href='?p=1'>1</a> <a href='?p=2'>2</a> <a href='?p=3'>3</a> Next</div>"
    )
    lines = ("Polls", "Loading poll results for this week", "The quay at dawn, seen from the bridge")
    cleaned = _clean(_page(after=after), *lines, "Barges waiting at the lock gates", "1 2 3 Next")
    for line in (*lines, "Barges waiting", "Next"):
        assert line not in cleaned


def test_what_precedes_the_article_stays():
    """A standfirst before the article's body is often the article's own first lines: only what follows
    is dropped."""
    before = "<p class='intro'>Four years of work on the river end this week</p>"
    cleaned = _clean(_page(before=before), "Four years of work on the river end this week")
    assert "Four years of work on the river end this week" in cleaned


def test_an_articles_later_sections_stay():
    """Inside the ``article``, a section after the body that holds a long paragraph is the article's."""
    later = f"<h2>What comes next</h2><div><p>{STORY} The next stage starts in spring.</p></div>"
    cleaned = _clean(_page(inside=later), "What comes next", f"{STORY} The next stage starts in spring.")
    assert "What comes next" in cleaned and "The next stage starts in spring." in cleaned


def test_a_run_of_link_paragraphs_and_its_heading_are_dropped():
    """A heading ("Read more:"), then paragraphs that are a link each: the run goes, its heading with it."""
    inside = (
        "<h3>Read more:</h3><p><a href='/a'>Barge traffic doubles on the upper river</a></p>"
        "<p><a href='/b'>Mayor promises a second lock by 2030</a></p>"
    )
    page = f"<html><body><div class='body'>{BODY}{inside}</div></body></html>"  # no article: no after-rule
    lines = ("Read more:", "Barge traffic doubles on the upper river", "Mayor promises a second lock by 2030")
    cleaned = _clean(page, *lines)
    for line in lines:
        assert line not in cleaned


def test_a_single_linked_paragraph_stays():
    page = (
        f"<html><body><div>{BODY}<p><a href='/report'>The authority's full report</a></p></div></body></html>"
    )
    assert "The authority's full report" in _clean(page, "The authority's full report")


def test_other_posts_cards_are_dropped_and_the_article_beside_them_kept():
    """Three ``article`` cards side by side, outside the article that holds the ``h1``: other posts."""
    cards = "".join(
        f"<article class='post'><p>Summary of another post number {n}, a few words about it.</p></article>"
        for n in range(3)
    )
    page = _page(before=f"<section class='also'>{cards}</section>")  # before: the after-rule is not at work
    cleaned = _clean(page, *(f"Summary of another post number {n}, a few words about it." for n in range(3)))
    assert "Summary of another post" not in cleaned


def test_articles_inside_the_headed_article_stay():
    """A list article whose items are ``article`` elements inside the one holding the ``h1``: its text."""
    items = "".join(
        f"<article><h2>Place {n}</h2><p>Why place {n} is worth a trip.</p></article>" for n in range(4)
    )
    page = f"<html><body><article><h1>Four trips</h1>{items}</article></body></html>"
    lines = [line for n in range(4) for line in (f"Place {n}", f"Why place {n} is worth a trip.")]
    cleaned = split_template(page, "\n".join(lines)).text
    assert cleaned == "\n".join(lines)


def test_the_heading_of_a_dropped_link_list_goes_with_it():
    """The step drops the list of related links; their heading, alone, would stay as a line of the text."""
    related = "".join(f"<li><a href='/r{n}'>Related story number {n}</a></li>" for n in range(3))
    page = f"<html><body><div>{BODY}<h2>You may also like</h2><ul>{related}</ul></div></body></html>"
    cleaned = _clean(page, "You may also like", *(f"Related story number {n}" for n in range(3)))
    assert "You may also like" not in cleaned and "Related story" not in cleaned


def test_a_heading_before_article_text_stays():
    page = f"<html><body><div class='body'><h2>The opening</h2>{BODY}</div></body></html>"
    assert "The opening" in _clean(page, "The opening")


@pytest.mark.parametrize("name", ["resiliparse+trafilatura", "resiliparse", "trafilatura"])
def test_extractors_as_users_run_them(name):
    """Bytes in, as a crawl does: a poll widget after the story is kept by Resiliparse alone, and by no
    extractor once the template step runs; the story stays whole."""
    after = "<div class='box'><h4>Polls</h4><p>Loading poll results for this week</p></div>"
    body = _page(after=after).encode()
    if name.startswith("resiliparse"):
        assert "Loading poll results" in (get_extractor(name, drop_boilerplate=False)(body).text or "")
    text = get_extractor(name)(body).text or ""
    assert "Loading poll results" not in text and "Polls" not in text
    assert all(f"{STORY} Part {n}." in text for n in range(8))


def test_the_threshold_is_the_template_steps():
    assert link_blocks.LONG_PARAGRAPH == boilerplate.LONG_PARAGRAPH
