"""The site's template is not main text: short briefs in one template are not near-duplicates."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from boilerplate_site import BRIEFS, brief_page, build_site

from scrapy_simhash.decision import compare
from scrapy_simhash.extract import Extractor, extractor_names, get_extractor
from scrapy_simhash.extract.boilerplate import parse_page, split_template
from scrapy_simhash.page import fingerprint_page


def _extractors(**options) -> list[Extractor]:
    return [get_extractor(name, **options) for name in extractor_names()]


EXTRACTORS = _extractors()
IDS = [type(e).__name__ for e in EXTRACTORS]
SITE = build_site()
BRIEF_PAGES = {path: body for path, body in SITE.items() if path in BRIEFS}


def _near_duplicates(extractor: Extractor) -> list[tuple[str, str, float | None]]:
    prints = {path: fingerprint_page(body, extractor=extractor) for path, body in BRIEF_PAGES.items()}
    return [
        (a, b, verdict.similarity)
        for (a, pa), (b, pb) in itertools.combinations(prints.items(), 2)
        if pa.simhash is not None and pb.simhash is not None and (verdict := compare(pa, pb)).near_duplicate
    ]


@pytest.mark.parametrize("extractor", _extractors(drop_boilerplate=False), ids=IDS)
def test_the_extractors_alone_make_the_briefs_near_duplicates(extractor):
    """The site reproduces the problem: without the template step, the briefs' texts are mostly the
    site's footer, and every pair of briefs is judged a near-duplicate."""
    assert len(_near_duplicates(extractor)) == len(BRIEFS) * (len(BRIEFS) - 1) // 2
    assert "Riverside Media Group" in (extractor(BRIEF_PAGES["/news/weather.html"]).text or "")


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=IDS)
def test_short_briefs_in_one_template_are_not_near_duplicates(extractor):
    """Each brief either fingerprints its own text or is skipped as ``boilerplate``."""
    assert _near_duplicates(extractor) == []
    for body in BRIEF_PAGES.values():
        result = extractor(body)
        assert result.reason in (None, "boilerplate")
        assert "Riverside Media Group" not in (result.text or "") and "Advertise" not in (result.text or "")
    assert fingerprint_page(BRIEF_PAGES["/news/weather.html"], extractor=extractor).reason == "boilerplate"


_UNNAMED_CHROME = """<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><div id="wrap"><div class="stage"><div class="vp"><div class="vp-box">
<p>Battle of the riverside robot baristas</p><p>Autoplay: ON Autoplay: OFF</p>
<table><tr><td>player version</td><td>1.7.2</td></tr><tr><td>playback state</td><td>1</td></tr>
<tr><td>duration</td><td>15</td></tr><tr><td>current time</td><td>7.00</td></tr></table>
<p>0:07 / 0:15 captions fullscreen</p></div></div></div>
<article class="brief"><h1>{title}</h1><p class="dateline">{date}, by the newsdesk</p><p>{text}</p></article>
<div class="more">{teasers}</div>
<div class="fly"><p>Share your ideas with the community, receive exclusive offers and get the latest
news, reviews and guides from Riverside Daily in your inbox every morning.</p>
<p>No, thanks.</p></div>
</div></body></html>"""
_TEASERS = (
    (
        "Special feature",
        "How the old mill became the town's busiest market hall",
        "Twenty years after the last flour left the building, traders and visitors have made it the heart of "
        "the riverside.",
    ),
    (
        "Exclusive interview",
        "The ferry captain who has crossed the estuary forty thousand times",
        "After four decades at the wheel she talks about storms, tides and the passengers she will never "
        "forget.",
    ),
    (
        "Long read",
        "Inside the council's plan to rebuild the harbour wall before the winter storms",
        "Engineers, fishermen and residents explain what the new wall will change along the seafront.",
    ),
)


def _unnamed_chrome_page(title: str, text: str, date: str) -> bytes:
    """A brief in a template whose video player, teasers and newsletter prompt carry no name, role or
    tag that says they are template: only the page's ``article`` element tells its own text apart."""
    teasers = "".join(
        f'<div class="tile"><span class="kicker">{kicker}</span><h3><a href="/f/{n}">{headline}</a></h3>'
        f"<p>{summary}</p></div>"
        for n, (kicker, headline, summary) in enumerate(_TEASERS)
    )
    return _UNNAMED_CHROME.format(title=title, text=text, date=date, teasers=teasers).encode()


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=IDS)
def test_briefs_in_a_template_without_named_chrome_are_not_near_duplicates(extractor):
    """The extractors keep a video player's controls, teasers and a newsletter prompt around a short
    article; outside the page's short ``article`` element, those lines are template."""
    pages = [
        _unnamed_chrome_page(title, text, f"{day} March 2026")
        for day, (title, text) in enumerate(list(BRIEFS.values())[:4], 2)
    ]
    prints = [fingerprint_page(body, extractor=extractor) for body in pages]
    matched = [
        (a, b)
        for (a, pa), (b, pb) in itertools.combinations(enumerate(prints), 2)
        if pa.simhash is not None and pb.simhash is not None and compare(pa, pb).near_duplicate
    ]
    assert matched == []
    for body in pages:
        result = extractor(body)
        assert result.reason in (None, "boilerplate")
        assert "player version" not in (result.text or "") and "No, thanks" not in (result.text or "")


def test_lines_outside_a_short_article_are_template():
    html = (
        "<html><body><div><p>Autoplay: ON</p><p>Special feature</p></div>"
        "<article><h1>Weather</h1><p>Cloudy with showers later. Highs of nine.</p></article></body></html>"
    )
    text = "Autoplay: ON\nWeather\nCloudy with showers later. Highs of nine.\nSpecial feature"
    cleaned = split_template(html, text)
    assert cleaned.text == "Weather\nCloudy with showers later. Highs of nine."
    assert cleaned.template_chars == len("Autoplay:ONSpecialfeature")


def test_a_brief_keeps_the_items_of_its_numbered_lists():
    """Resiliparse numbers the items of an ordered list (``1. ...``): the number is not page text, the
    item is the article's."""
    html = (
        "<html><body><div><p>Autoplay: ON</p></div><article><h1>Agenda</h1><ol><li>Welcome and coffee</li>"
        "<li>Two lightning talks of ten minutes each</li><li>Discussion of the next meeting</li></ol>"
        "</article></body></html>"
    )
    items = (
        "1. Welcome and coffee\n2. Two lightning talks of ten minutes each\n3. Discussion of the next meeting"
    )
    assert split_template(html, f"Autoplay: ON\nAgenda\n{items}").text == f"Agenda\n{items}"


def test_a_long_article_or_no_marked_one_keeps_the_lines_outside():
    """Only a short marked article decides: a long one (its headline outside it), several ``article``
    elements none of which holds the ``h1``, or none at all leave the extraction as it is."""
    body = "".join(
        f"<p>{'The harbour board met again on Tuesday to discuss the cranes. ' * 3}{n}</p>" for n in range(8)
    )
    lines = "\n".join(
        f"{'The harbour board met again on Tuesday to discuss the cranes. ' * 3}{n}" for n in range(8)
    )
    pages = [
        f"<html><body><h1>Harbour cranes</h1><article>{body}</article></body></html>",
        f"<html><body><h1>Harbour cranes</h1><article>{body[:300]}</article><article>Other</article>"
        f"<div>{body}</div></body></html>",
        f"<html><body><h1>Harbour cranes</h1><div>{body}</div></body></html>",
    ]
    for html in pages:
        assert split_template(html, f"Harbour cranes\n{lines}").text == f"Harbour cranes\n{lines}", html


@pytest.mark.parametrize("extractor", EXTRACTORS, ids=IDS)
def test_a_longer_story_in_the_template_keeps_its_own_text(extractor):
    story = " ".join(
        f"Councillors met on day {n} to discuss the new bridge over the river and its cost to the town."
        for n in range(8)
    )
    result = extractor(brief_page("Bridge", story))
    assert result.reason is None
    assert "Councillors met on day 7" in result.text
    assert "Riverside Media Group" not in result.text and "Advertise" not in result.text


@pytest.mark.parametrize("name", extractor_names())
def test_the_description_says_the_template_step(name):
    """Fingerprints with and without the step are not comparable: the description tells them apart."""
    on, off = get_extractor(name), get_extractor(name, drop_boilerplate=False)
    assert on.description.endswith(";boilerplate=2")
    assert off.description == on.description.removesuffix(";boilerplate=2")


def test_a_headline_that_is_also_a_menu_entry_stays():
    html = (
        "<html><body><nav><a href='/weather'>Weather</a> <a href='/sport'>Sport</a></nav>"
        "<article><p>Weather</p><p>Cloudy with showers later.</p></article></body></html>"
    )
    assert split_template(html, "Weather\nSport\nCloudy with showers later.").text == (
        "Weather\nCloudy with showers later."
    )


def test_an_element_that_holds_the_article_is_never_template():
    paragraphs = "".join(
        f"<p>{'A sentence of the article that runs on for a while. ' * 3}{n}</p>" for n in range(4)
    )
    text = "\n".join(f"{'A sentence of the article that runs on for a while. ' * 3}{n}" for n in range(4))
    pages = [
        f"<html><body><form id='aspnetForm'><h1>Title</h1>{paragraphs}</form></body></html>",  # one big form
        # loose class names
        f"<html><body><div class='article-body no-share'>{paragraphs}</div></body></html>",
        f"<html><body><div class='related-wrapper'><article>{paragraphs}</article></div></body></html>",
    ]
    for html in pages:
        assert split_template(html, text).text == text, html


def test_link_lists_are_template_and_a_page_of_them_is_boilerplate():
    links = "".join(f"<li><a href='/{n}'>Section number {n}</a></li>" for n in range(30))
    html = f"<html><body><ul>{links}</ul><p>Short own text.</p></body></html>"
    text = "\n".join(f"Section number {n}" for n in range(30)) + "\nShort own text."
    cleaned = split_template(html, text)
    assert cleaned.text is None and cleaned.template_chars > cleaned.own_chars


def test_the_same_bytes_give_the_same_text_in_any_order_and_process():
    extractor = EXTRACTORS[0]
    pages = [
        *BRIEF_PAGES.values(),
        brief_page("Bridge", "Councillors met to discuss the new bridge. " * 10).encode(),
    ]
    forward = [extractor(body) for body in pages]
    backward = [extractor(body) for body in reversed(pages)][::-1]
    assert forward == backward
    script = (
        "import json, sys\n"
        "from scrapy_simhash.extract import DEFAULT_EXTRACTOR as e\n"
        "pages = [p.encode('latin-1') for p in json.load(sys.stdin)]\n"
        "print(json.dumps([[r.text, r.reason] for r in map(e, pages)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=json.dumps([p.decode("latin-1") for p in pages]),
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout) == [[r.text, r.reason] for r in forward]


def test_a_page_with_a_lone_surrogate_is_parsed_whole() -> None:
    # The step parses UTF-8 bytes; a str it cannot encode is parsed with U+FFFD in place of the
    # surrogate, not cut short at it (lxml stops reading a str at one).
    doc = parse_page("<html><body><p>caf\udce9 on the river</p><p>the words after it</p></body></html>")
    assert doc is not None
    text = "".join(doc.itertext())
    assert "caf\ufffd on the river" in text and "the words after it" in text


def test_a_declared_charset_does_not_decode_the_page_again() -> None:
    # The page reaches the step decoded; its <meta> charset must not make the parser read it as Latin-1.
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>Ça coûte à Zürich</p></body></html>'
    doc = parse_page(page)
    assert doc is not None
    assert "Ça coûte à Zürich" in "".join(doc.itertext())
