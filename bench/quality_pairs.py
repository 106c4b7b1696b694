"""Labelled page pairs for the detection-quality harness (``bench/quality.py``) and its guard test.

The corpus (``../shared/corpus/pages``) holds real pages, each a different article. Positives are
made by changing a real page the way the web changes pages, at the HTML level so that the text
extractor has to cope with the change exactly as it would in a crawl:

``template``   the article moved into another site's page (its navigation, sidebars, footer), in
               place of that page's own article (a host whose article the ground truth confirms)
``ad``         an advertisement block injected between two paragraphs of the article
``timestamp``  dates and times changed, the byline replaced, an "Updated ..." line added
``comments``   reader comments appended below the article
``print``      a printer-friendly view: the article alone, with a print header and footer
``edit``       one sentence of the article replaced, deleted or inserted

Negatives are pairs of different real articles: from the same site and template (readability's
``nytimes-*``, ``wapo-*``, ``yahoo-*``, ``medium-*``, ``wikipedia*``, the hosts that appear twice in
the other sources) and random pairs; and pairs of short briefs in one real site's page
(:data:`BRIEF_KINDS`): the page's article replaced by a headline, a dateline and two sentences, with a
cookie banner added, so that most of the page's text is its template.

Everything is seeded: a transform depends only on ``(seed, page id, kind)``.
"""

from __future__ import annotations

import copy
import gzip
import itertools
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

import lxml.html
from lxml import etree

from scrapy_simhash.extract import decode_html
from scrapy_simhash.fingerprint import tokens

TRANSFORMS_VERSION = 3
"""Bump when a transform changes: cached extractions of changed pages are keyed by it."""

KINDS = ("template", "ad", "timestamp", "comments", "print", "edit")
"""The kinds of change a positive pair is made with."""

BRIEF_KINDS = ("brief-a", "brief-b")
"""Two different short briefs in the same page's template: a negative pair."""

# readability test pages that come from one site and share its template.
_READABILITY_SITES = re.compile(r"^(nytimes|wapo|yahoo|medium|wikipedia|webmd|ehow|lifehacker)(-\d+)?$")
_WAYBACK = re.compile(r"^https?://web\.archive\.org/web/[^/]+/(.+)$")


def site_of_url(url: str | None) -> str | None:
    """Host without ``www.``; Wayback URLs give the archived page's host."""
    if not url:
        return None
    match = _WAYBACK.match(url)
    if match:
        inner = match.group(1)
        url = inner if "://" in inner else "http://" + inner
    host = urlsplit(url).hostname
    return host.removeprefix("www.") if host else None


@dataclass(frozen=True)
class Truth:
    """What the corpus says the main text of a page is: its full text, or snippets in and out of it."""

    text: str | None = None  # the whole article text (scrapinghub-aeb, readability, newspaper4k)
    prefix: str | None = None  # the start of the article (goose3's, often truncated)
    with_: tuple[str, ...] = ()  # snippets that must be in the main text (trafilatura)
    without: tuple[str, ...] = ()  # snippets that must not be


@dataclass(frozen=True)
class Page:
    """One real page of the corpus: where it is and which site (template) it belongs to."""

    id: str
    path: Path
    site: str
    url: str | None = field(default=None, compare=False)
    truth: Truth | None = field(default=None, compare=False, repr=False)

    def html(self) -> str:
        return decode_html(gzip.decompress(self.path.read_bytes()))


def _trafilatura_truth(truth: Path) -> dict[str, tuple[str, Truth]]:
    data = json.loads((truth / "trafilatura" / "evaldata.json").read_text(encoding="utf-8"))
    out = {}
    for url, entry in data.items():
        snippets = Truth(with_=tuple(entry.get("with", ())), without=tuple(entry.get("without", ())))
        out[entry["file"]] = (url, snippets)
    return out


def _html_text(html: str) -> str:
    return " ".join(lxml.html.fragment_fromstring(html, create_parent="div").text_content().split())


def load_pages(corpus: Path) -> list[Page]:
    """Every page of ``corpus/pages`` with its site key, sorted by id (a stable order for seeding)."""
    pages_dir, truth = corpus / "pages", corpus / "truth"
    if not pages_dir.is_dir():
        raise FileNotFoundError(f"corpus pages not found at {pages_dir} (is ../shared/corpus there?)")
    pages: list[Page] = []

    traf = _trafilatura_truth(truth)
    for path in sorted((pages_dir / "trafilatura").glob("*/*.html.gz")):
        name = path.name.removesuffix(".gz")
        url, traf_truth = traf.get(name, (None, None))
        site = site_of_url(url) if url and "://" in url else None
        pages.append(Page(f"trafilatura/{name}", path, site or f"trafilatura:{name}", url, traf_truth))

    aeb = json.loads((truth / "scrapinghub-aeb" / "ground-truth.json").read_text(encoding="utf-8"))
    for path in sorted((pages_dir / "scrapinghub-aeb").glob("*.html.gz")):
        key = path.name.removesuffix(".html.gz")
        entry = aeb.get(key, {})
        url, body = entry.get("url"), entry.get("articleBody")
        truth_ = Truth(text=body) if body else None
        pages.append(Page(f"scrapinghub-aeb/{key}", path, site_of_url(url) or f"aeb:{key}", url, truth_))

    for path in sorted((pages_dir / "mozilla-readability").glob("*/source.html.gz")):
        name = path.parent.name
        match = _READABILITY_SITES.match(name)
        site = f"readability:{match.group(1)}" if match else f"readability:{name}"
        expected = truth / "mozilla-readability" / name / "expected.html"
        truth_ = Truth(text=_html_text(expected.read_text(encoding="utf-8"))) if expected.exists() else None
        pages.append(Page(f"mozilla-readability/{name}", path, site, None, truth_))

    for path in sorted((pages_dir / "goose3").glob("*.html.gz")):
        name = path.name.removesuffix(".html.gz")
        meta = truth / "goose3" / f"{name}.json"
        data = json.loads(meta.read_text(encoding="utf-8")) if meta.exists() else {}
        url, cleaned = data.get("url"), (data.get("expected") or {}).get("cleaned_text")
        truth_ = Truth(prefix=cleaned) if cleaned else None
        pages.append(Page(f"goose3/{name}", path, site_of_url(url) or f"goose3:{name}", url, truth_))

    for path in sorted((pages_dir / "newspaper4k").glob("*.html.gz")):
        name = path.name.removesuffix(".html.gz")
        meta = truth / "newspaper4k" / "metadata" / f"{name}.json"
        url = json.loads(meta.read_text(encoding="utf-8")).get("url") if meta.exists() else None
        txt = truth / "newspaper4k" / "txt" / f"{name}.txt"
        truth_ = Truth(text=txt.read_text(encoding="utf-8")) if txt.exists() else None
        site = site_of_url(url) or f"newspaper4k:{name}"
        pages.append(Page(f"newspaper4k/{name}", path, site, url, truth_))
    return pages


def same_site_pairs(pages: list[Page]) -> list[tuple[Page, Page]]:
    """Every pair of different pages that share a site key."""
    by_site: dict[str, list[Page]] = defaultdict(list)
    for page in pages:
        by_site[page.site].append(page)
    return [pair for group in by_site.values() for pair in itertools.combinations(group, 2)]


def random_pairs(pages: list[Page], count: int, seed: int) -> list[tuple[Page, Page]]:
    """``count`` distinct pairs of pages from different sites, drawn with ``seed``; all of them when the
    pages have fewer such pairs (a small corpus), never waiting for pairs that do not exist."""
    rng = random.Random(f"random-pairs:{seed}")
    seen: set[tuple[str, str]] = set()
    out: list[tuple[Page, Page]] = []
    per_site = Counter(page.site for page in pages)
    same_site = sum(n * (n - 1) // 2 for n in per_site.values())
    limit = len(pages) * (len(pages) - 1) // 2 - same_site
    while len(out) < min(count, limit):
        a, b = rng.sample(pages, 2)
        key = (min(a.id, b.id), max(a.id, b.id))
        if a.site == b.site or key in seen:
            continue
        seen.add(key)
        out.append((a, b))
    return out


# --------------------------------------------------------------------------------------------------
# HTML handling


def parse(html: str) -> lxml.html.HtmlElement:
    """A full document tree, tolerant of XML prologs and fragments."""
    if html.lstrip().startswith("<?xml"):
        html = html.split("?>", 1)[-1]
    return lxml.html.document_fromstring(html)


def serialize(doc: lxml.html.HtmlElement) -> str:
    return "<!DOCTYPE html>\n" + lxml.html.tostring(doc, encoding="unicode")


def _text_len(element: lxml.html.HtmlElement) -> int:
    return len(" ".join(element.text_content().split()))


def find_article(doc: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """The element that holds most of the paragraph text (readability's scoring, much simplified).

    Deliberately independent of every extractor measured, so the transforms favour none of them.
    """
    scores: dict[lxml.html.HtmlElement, float] = defaultdict(float)
    for para in doc.iter("p", "pre", "blockquote"):
        length = _text_len(para)
        if length < 25:
            continue
        parent = para.getparent()
        if parent is None:
            continue
        scores[parent] += length
        grand = parent.getparent()
        if grand is not None:
            scores[grand] += length / 2
    body = doc.find("body")
    if not scores:
        return body if body is not None else doc
    best = max(scores, key=lambda element: scores[element])
    # An article split over sibling containers (lead, body, a second column of text): climb while an
    # ancestor holds clearly more paragraph text, so that a print view or another template gets the
    # whole article and not one part of it.
    chosen, chosen_text = best, _paragraph_text(best)
    for ancestor in best.iterancestors():
        if ancestor.tag in ("body", "html"):
            break
        text = _paragraph_text(ancestor)
        if text >= 1.25 * chosen_text:
            chosen, chosen_text = ancestor, text
    return chosen


def _words(text: str) -> set[str]:
    return set(tokens(text))


def article_matches_truth(page: Page, doc: lxml.html.HtmlElement | None = None) -> bool:
    """Whether :func:`find_article` finds the article the corpus's ground truth describes.

    Print views and template swaps carry the element :func:`find_article` returns; a page where it
    misses part of the article (or takes in much more) would make an unrealistic positive, so only
    pages that pass this check, independent of every extractor measured, are used as positives.
    """
    truth = page.truth
    if truth is None:
        return False
    try:
        doc = parse(page.html()) if doc is None else doc
    except (ValueError, etree.ParserError):  # an empty or unparsable page has no article to confirm
        return False
    node_text = " ".join(find_article(doc).text_content().split())
    if truth.with_ or truth.without:
        if not truth.with_:
            return False
        flat = node_text.casefold()
        found = sum(" ".join(snippet.split()).casefold() in flat for snippet in truth.with_)
        leaked = sum(" ".join(snippet.split()).casefold() in flat for snippet in truth.without)
        return found == len(truth.with_) and leaked == 0
    node = _words(node_text)
    expected = _words(truth.text or truth.prefix or "")
    if len(expected) < 10:
        return False
    recall = len(expected & node) / len(expected)
    if truth.text is None:  # a prefix only: the whole of it must be there
        return recall >= 0.9
    return recall >= 0.9 and len(node) <= 1.5 * len(expected)


def _paragraph_text(element: lxml.html.HtmlElement) -> int:
    return sum(n for para in element.iter("p", "pre", "blockquote") if (n := _text_len(para)) >= 25)


def _headline(doc: lxml.html.HtmlElement) -> str:
    for tag in ("h1", "title"):
        for element in doc.iter(tag):
            text = " ".join(element.text_content().split())
            if text:
                return text
    return ""


def _paragraphs(article: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    return [p for p in article.iter("p") if _text_len(p) >= 25] or [article]


def _fragment(html: str) -> lxml.html.HtmlElement:
    return lxml.html.fragment_fromstring(html)


_SENTENCE_SPLIT = re.compile(r"(?<=[.!?。！？])\s+")


def sentences_of(doc: lxml.html.HtmlElement) -> list[str]:
    """Sentences of a page's paragraphs: material for comments and edits taken from another page."""
    out: list[str] = []
    for para in _paragraphs(find_article(doc)):
        text = " ".join(para.text_content().split())
        out.extend(s for s in _SENTENCE_SPLIT.split(text) if len(s.split()) >= 5 or len(s) >= 30)
    return out


# --------------------------------------------------------------------------------------------------
# Transforms: HTML of a real page -> HTML of the same article changed as the web changes it


_ADS = (
    "Sponsored: Save up to 50% on car insurance today. Compare quotes from top providers in minutes.",
    "Advertisement. The one kitchen gadget everyone is talking about this year. Shop now and get free "
    "shipping.",
    "Anzeige: Jetzt bis zu 40 Prozent sparen beim Strom. Tarife vergleichen und sofort wechseln.",
    "Sponsored content: These 10 travel destinations will take your breath away. See the list.",
    "Publicidad. Descubre las mejores ofertas de la temporada con envío gratis en todos los pedidos.",
    "Advertisement. Doctors stunned by this simple trick for better sleep. Learn more about it.",
    "Publicité : Découvrez notre nouvelle offre mobile, 100 Go pour seulement 9,99 euros par mois.",
    "Sponsored: Refinance your mortgage at historic low rates. Check your eligibility in 2 minutes.",
)
_NAMES = (
    "Jane Miller",
    "Thomas Becker",
    "María López",
    "Sam Okafor",
    "Claire Dubois",
    "Anna Kowalska",
    "Kenji Sato",
    "Peter Lang",
    "Olivia Brown",
    "Luca Rossi",
)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_TIME = re.compile(r"\b([01]?\d|2[0-3]):([0-5]\d)\b")
_DATE_NUMERIC = re.compile(r"\b(\d{1,2})([./-])(\d{1,2})\2((?:19|20)\d{2})\b")
_DATE_ISO = re.compile(r"\b((?:19|20)\d{2})-(\d{2})-(\d{2})\b")
_DATE_WORDS = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+(\d{1,2})\b")
_BYLINE_HINT = re.compile(r"author|byline|by-line|writer|contributor", re.I)


def _date_line(rng: random.Random) -> str:
    return (
        f"Updated {_MONTHS[rng.randrange(12)]} {rng.randint(1, 28)}, {rng.randint(2015, 2024)}, "
        f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
    )


def _shift_dates(text: str, rng: random.Random) -> str:
    text = _TIME.sub(lambda m: f"{(int(m[1]) + rng.randint(1, 9)) % 24:02d}:{rng.randint(0, 59):02d}", text)
    text = _DATE_NUMERIC.sub(lambda m: f"{rng.randint(1, 28)}{m[2]}{m[3]}{m[2]}{m[4]}", text)
    text = _DATE_ISO.sub(lambda m: f"{m[1]}-{m[2]}-{rng.randint(1, 28):02d}", text)
    return _DATE_WORDS.sub(lambda m: f"{m[1]} {rng.randint(1, 28)}", text)


def _is_in(element: lxml.html.HtmlElement, ancestor: lxml.html.HtmlElement) -> bool:
    return any(a is ancestor for a in element.iterancestors()) or element is ancestor


def transform_timestamp(doc: lxml.html.HtmlElement, rng: random.Random) -> None:
    """New dates and times around the article, another byline, an "Updated" line on top."""
    article = find_article(doc)
    article_paras = {id(p) for p in article.iter("p")}
    for element in doc.iter():
        if not isinstance(element.tag, str) or element.tag in ("script", "style"):
            continue
        # Dates inside the article's own paragraphs are content, not page furniture.
        inside = id(element) in article_paras or any(id(a) in article_paras for a in element.iterancestors())
        if element.tag == "time" or not inside:
            if element.text:
                element.text = _shift_dates(element.text, rng)
            if element.tail and not inside:
                element.tail = _shift_dates(element.tail, rng)
    for element in list(doc.iter()):
        if not isinstance(element.tag, str) or element.tag in ("body", "html", "article", "main"):
            continue
        hint = " ".join(element.get(a, "") for a in ("class", "id", "rel", "itemprop"))
        if _BYLINE_HINT.search(hint) and _text_len(element) < 80 and not _is_in(article, element):
            for child in list(element):
                element.remove(child)
            element.text = f"By {rng.choice(_NAMES)}"
    if rng.random() < 0.5:
        line = _fragment(f'<p class="updated"><time>{_date_line(rng)}</time></p>')
    else:
        line = _fragment(f"<p><em>{_date_line(rng)} by {rng.choice(_NAMES)}</em></p>")
    article.insert(0, line)


def transform_ad(doc: lxml.html.HtmlElement, rng: random.Random) -> None:
    """An ad block between two paragraphs of the article."""
    paras = _paragraphs(find_article(doc))
    anchor = paras[rng.randrange(len(paras))]
    text = rng.choice(_ADS)
    style = rng.randrange(3)
    if style == 0:  # a labelled ad unit, the kind extractors are trained to drop
        markup = (
            f'<div class="ad-container" id="ad-slot-{rng.randint(1, 9)}" data-ad-unit="inline">'
            f'<span class="ad-label">Advertisement</span><p>{text}</p>'
            '<a href="https://ads.example.com/click" rel="sponsored">Learn more</a>'
            '<iframe src="https://ads.example.com/frame"></iframe></div>'
        )
    elif style == 1:  # a native promo box with neutral class names
        markup = (
            f'<div class="mid-article-box"><p>{text}</p><a href="https://shop.example.com/">Shop</a></div>'
        )
    else:  # a promo paragraph set right in the article text
        markup = f"<p><em>{text}</em></p>"
    ad = _fragment(markup)
    if anchor.getparent() is None:
        anchor.append(ad)
    else:
        anchor.addnext(ad)


def transform_comments(doc: lxml.html.HtmlElement, rng: random.Random, other: lxml.html.HtmlElement) -> None:
    """3 to 8 reader comments (sentences of another page) below the article, WordPress-style."""
    article = find_article(doc)
    material = sentences_of(other) or ["Great article, thanks for sharing this with us."]
    items = []
    for number in range(rng.randint(3, 8)):
        start = rng.randrange(len(material))
        text = " ".join(material[start : start + rng.randint(1, 3)])
        items.append(
            f'<li class="comment" id="comment-{1000 + number}"><article class="comment-body">'
            f'<footer class="comment-meta"><b class="fn">{rng.choice(_NAMES)}</b> '
            f"<time>{_date_line(rng)}</time></footer>"
            f'<div class="comment-content"><p>{_escape(text)}</p></div>'
            '<a class="comment-reply-link" href="#respond">Reply</a></article></li>'
        )
    section = _fragment(
        f'<section id="comments" class="comments-area"><h3 class="comments-title">{len(items)} Comments'
        f'</h3><ol class="comment-list">{"".join(items)}</ol></section>'
    )
    if article.getparent() is None or article.tag == "body":
        article.append(section)
    else:
        article.addnext(section)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def transform_print(doc: lxml.html.HtmlElement, url: str | None) -> lxml.html.HtmlElement:
    """The printer-friendly view: the article alone, a print header and a source footer."""
    article = copy.deepcopy(find_article(doc))
    article.tail = None
    headline = _escape(_headline(doc))
    host = site_of_url(url) or "example.org"
    printed = parse(
        f'<html><head><meta charset="utf-8"><title>{headline} | Print</title>'
        '<meta name="robots" content="noindex"></head><body class="print-view">'
        f'<div class="print-header">{_escape(host)} <a href="javascript:window.print()">Print this page</a>'
        f'</div><h1>{headline}</h1><div class="print-body"></div>'
        f'<div class="print-footer">Source: {_escape(url or "https://" + host + "/")}</div></body></html>'
    )
    printed.find_class("print-body")[0].append(article)
    return printed


def transform_template(doc: lxml.html.HtmlElement, template: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """The article inside another site's page, in place of that page's own article."""
    article = copy.deepcopy(find_article(doc))
    headline = _headline(doc)
    slot = find_article(template)
    article.tail = slot.tail
    if slot.tag in ("body", "html") or slot.getparent() is None:
        slot.append(article)
    else:
        slot.getparent().replace(slot, article)
    if headline:
        heading = _fragment(f"<h1>{_escape(headline)}</h1>")
        article.insert(0, heading)
        title = template.find(".//title")
        if title is not None:
            title.text = headline
    return template


def transform_edit(doc: lxml.html.HtmlElement, rng: random.Random, other: lxml.html.HtmlElement) -> None:
    """One sentence of one paragraph replaced by another page's sentence, deleted, or one inserted."""
    article = find_article(doc)
    slots = []  # (element, attribute) of text nodes inside the article's paragraphs
    for para in _paragraphs(article):
        for element in para.iter():
            if isinstance(element.tag, str) and element.text and len(element.text.split()) >= 5:
                slots.append((element, "text"))
            if element is not para and element.tail and len(element.tail.split()) >= 5:
                slots.append((element, "tail"))
    material = sentences_of(other) or ["This sentence was added in a later revision of the article."]
    new_sentence = rng.choice(material)
    if not slots:
        article.append(_fragment(f"<p>{_escape(new_sentence)}</p>"))
        return
    element, attribute = slots[rng.randrange(len(slots))]
    parts = _SENTENCE_SPLIT.split(getattr(element, attribute))
    index = rng.randrange(len(parts))
    action = rng.choice(("replace", "replace", "delete", "insert")) if len(parts) > 1 else "replace"
    if action == "replace":
        parts[index] = new_sentence
    elif action == "delete":
        del parts[index]
    else:
        parts.insert(index, new_sentence)
    setattr(element, attribute, " ".join(parts))


_COOKIE_BANNERS = (
    '<div role="dialog" aria-label="cookieconsent" class="cc-window cc-banner cc-type-opt-in cc-bottom">'
    '<span class="cc-message">We use cookies to give you the best experience on our website, to analyse '
    "traffic and to personalise advertising. By continuing to browse you agree to our use of cookies. "
    '<a class="cc-link" href="/privacy">Learn more</a></span><div class="cc-compliance">'
    '<a class="cc-btn cc-deny">Decline</a><a class="cc-btn cc-allow">Allow cookies</a></div></div>',
    '<div id="onetrust-consent-sdk"><div id="onetrust-banner-sdk" class="otFlat" role="region" '
    'aria-label="Cookie banner"><div id="onetrust-policy-text">Wir und unsere Partner verwenden Cookies und '
    "ähnliche Technologien, um Ihnen ein optimales Nutzungserlebnis zu bieten, Inhalte zu personalisieren "
    "und "
    'Zugriffe zu analysieren.</div><button id="onetrust-accept-btn-handler">Alle akzeptieren</button>'
    '<button id="onetrust-pc-btn-handler">Einstellungen</button></div></div>',
    '<div class="cookie-notice-container"><p>This site uses cookies. Some of them are essential, others help '
    "us improve your experience and show you relevant offers. Read our cookie policy to find out more.</p>"
    '<p><a href="/cookie-policy">Cookie policy</a> <a href="#" class="accept">OK</a></p></div>',
)


def transform_brief(doc: lxml.html.HtmlElement, rng: random.Random, other: lxml.html.HtmlElement) -> None:
    """The page's article replaced by a short brief (headline, dateline, two sentences of another page)
    and a cookie banner put on top: a page whose text is mostly its site's template."""
    material = sentences_of(other) or ["The council confirmed the change in a short statement on Monday."]
    start = rng.randrange(len(material))
    text = " ".join(material[start : start + 2])
    headline = " ".join(material[rng.randrange(len(material))].split()[:6]).rstrip(".,;:")
    brief = _fragment(
        f'<article class="brief"><h1>{_escape(headline)}</h1><p class="dateline">{_date_line(rng)}</p>'
        f"<p>{_escape(text)}</p></article>"
    )
    slot = find_article(doc)
    if slot.tag in ("body", "html") or slot.getparent() is None:
        for child in list(slot):
            slot.remove(child)
        slot.text = None
        slot.append(brief)
    else:
        brief.tail = slot.tail
        slot.getparent().replace(slot, brief)
    body = doc.find("body")
    if body is not None:
        body.insert(0, _fragment(rng.choice(_COOKIE_BANNERS)))


def _other_page(pages: list[Page], page: Page, rng: random.Random) -> Page:
    while True:
        other = pages[rng.randrange(len(pages))]
        if other.site != page.site:
            return other


_HOSTS: dict[str, bool] = {}
_HOST_DRAWS = 1000


def can_host(page: Page) -> bool:
    """Whether ``page`` can take another site's article in place of its own (``template``).

    The article must replace the page's own: :func:`find_article` must find that article (the ground
    truth confirms it, :func:`article_matches_truth`) in an element smaller than the whole body. Else the
    moved article lands in a comment list, a cookie overlay or at the end of the body, beside the host's
    own article, and an extractor that keeps the host's article is right: no realistic copy."""
    known = _HOSTS.get(page.id)
    if known is None:
        try:
            doc = parse(page.html())
        except (ValueError, etree.ParserError):
            known = False
        else:
            known = article_matches_truth(page, doc) and find_article(doc).tag not in ("body", "html")
        _HOSTS[page.id] = known
    return known


def _host_page(pages: list[Page], page: Page, rng: random.Random) -> Page:
    """A page of another site that :func:`can_host` ``page``'s article, drawn with ``rng``."""
    for _ in range(_HOST_DRAWS):
        other = _other_page(pages, page, rng)
        if can_host(other):
            return other
    raise ValueError(f"no page of another site can host {page.id} ({_HOST_DRAWS} drawn)")


def transform(page: Page, kind: str, pages: list[Page], seed: int) -> str:
    """HTML of ``page`` changed by ``kind``; the same (seed, page, kind) always gives the same HTML."""
    rng = random.Random(f"{seed}:{page.id}:{kind}")
    doc = parse(page.html())
    if kind == "template":
        template = parse(_host_page(pages, page, rng).html())
        doc = transform_template(doc, template)
    elif kind == "ad":
        transform_ad(doc, rng)
    elif kind == "timestamp":
        transform_timestamp(doc, rng)
    elif kind == "comments":
        transform_comments(doc, rng, parse(_other_page(pages, page, rng).html()))
    elif kind == "print":
        doc = transform_print(doc, page.url)
    elif kind == "edit":
        transform_edit(doc, rng, parse(_other_page(pages, page, rng).html()))
    elif kind in BRIEF_KINDS:
        transform_brief(doc, rng, parse(_other_page(pages, page, rng).html()))
    else:
        raise ValueError(f"unknown kind of change {kind!r}; choose from {', '.join(KINDS)}")
    return serialize(doc)


@dataclass(frozen=True)
class Variant:
    """A page as the harness feeds it to an extractor: the original or one of its changed copies."""

    page: Page
    kind: str | None  # None: the original page
    seed: int = 0
    pages: tuple[Page, ...] = field(default=(), compare=False, repr=False)

    @property
    def key(self) -> str:
        return self.page.id if self.kind is None else f"{self.page.id}#{self.kind}@{self.seed}"

    @cached_property
    def html(self) -> str:
        if self.kind is None:
            return self.page.html()
        return transform(self.page, self.kind, list(self.pages), self.seed)


def brief_templates(pages: list[Page], count: int, seed: int) -> list[Page]:
    """``count`` pages drawn with ``seed`` (one a site) whose template carries the brief pairs.

    Give it pages whose article element the ground truth confirms (:func:`article_matches_truth`): on
    other pages the brief may replace only part of the article, and two briefs that keep the rest of
    one article are near-duplicates indeed."""
    by_site = {page.site: page for page in pages}
    candidates = sorted(by_site.values(), key=lambda p: p.id)
    chosen = random.Random(f"briefs:{seed}").sample(candidates, min(count, len(candidates)))
    return sorted(chosen, key=lambda p: p.id)


def positive_variants(pages: list[Page], base: list[Page], seed: int) -> Iterator[Variant]:
    """Every kind of change applied to every page of ``base``."""
    frozen = tuple(pages)
    for page in base:
        for kind in KINDS:
            yield Variant(page, kind, seed, frozen)


def _cli_check() -> None:  # pragma: no cover - a quick look at the transforms by hand
    import sys

    corpus = Path(sys.argv[1])
    pages = load_pages(corpus)
    page = next(p for p in pages if p.id == sys.argv[2])
    print(transform(page, sys.argv[3], pages, int(sys.argv[4]) if len(sys.argv) > 4 else 0))


if __name__ == "__main__":  # pragma: no cover
    _cli_check()
