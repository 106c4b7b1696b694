"""The demo site: articles plus the near-duplicates crawlers meet in the wild.

Generated from a seed (no network, no data files) and served on 127.0.0.1.
For each article there is an original on the news site and, depending on the
article, some of:

- the same URL with tracking parameters (``?utm_source=...``): same page;
- a printer-friendly view (``/print/...``): other template, no navigation;
- a syndicated copy on a partner site (``/partner/...``): another site's template;
- an "updated" copy that differs only in its timestamp and ad block;
- a "corrected" copy (``-corrected``): one sentence of the text rewritten. Its
  simhash is usually more than 3 bits away, so only the verified rule (the
  default, ``SIMHASH_MODE = "verified"``) catches it;
- a copy with readers' comments appended to the text (``-comments``): caught
  by the verified rule, not by simhash alone.

Different articles share one template, so the template alone must not make
pages look alike. ``expected_clusters()`` says which URLs belong together.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

WORDS = (
    "harbour river council market winter station garden bridge village forest engine library museum "
    "festival island coast mountain valley school hospital farmer teacher doctor sailor pilot painter "
    "baker miner weaver builder student captain mayor judge driver nurse writer singer dancer worker "
    "storm rain snow wind sunlight shadow evening morning summer autumn spring season century decade "
    "railway canal tunnel highway airport factory mill quarry vineyard orchard meadow lake glacier "
    "budget report survey record archive letter treaty charter census ledger map compass lantern "
    "bicycle tram ferry wagon barge tractor crane furnace kiln loom anvil chisel hammer saw ladder "
    "copper iron silver timber granite marble clay wool cotton linen salt pepper barley wheat oats "
    "apple pear plum cherry walnut honey cheese bread soup tea coffee cider olive lemon ginger "
    "announced reported repaired opened closed rebuilt painted measured counted collected delivered "
    "restored carried planted harvested designed printed visited crossed guarded explored recorded "
    "quietly slowly early late suddenly finally nearly rarely often briefly gently firmly widely "
    "northern southern eastern western ancient modern narrow broad heavy bright silent crowded "
    "remote local regional national rural urban coastal seasonal wooden stone brick glass steel "
    "committee volunteers engineers residents visitors officials historians farmers fishermen "
    "merchants travellers inspectors surveyors architects musicians children families neighbours "
    "proposal decision agreement dispute election ceremony exhibition auction lecture concert "
    "flood drought harvest shortage repair expansion closure opening celebration anniversary "
    "lighthouse observatory greenhouse warehouse courthouse schoolhouse boathouse farmhouse "
    "telescope microscope barometer thermometer almanac manuscript photograph painting sculpture"
).split()

NEWS_NAV = ["Home", "World", "Business", "Science", "Culture", "Sport", "Opinion", "Weather"]
PARTNER_NAV = ["Front page", "Regional", "Economy", "Lifestyle", "Travel", "Contact us"]


@dataclass
class Article:
    slug: str
    title: str
    paragraphs: list[str]
    variants: list[str] = field(default_factory=list)
    edit: tuple[int, int, str] = (0, 0, "")
    """The corrected copy's edit: paragraph, sentence, and the sentence that replaces it."""
    comments: list[tuple[str, str]] = field(default_factory=list)
    """The comments copy's comments: (name, text)."""

    def corrected_paragraphs(self) -> list[str]:
        paragraph, sentence, text = self.edit
        paragraphs = list(self.paragraphs)
        sentences = paragraphs[paragraph].split(". ")
        sentences[sentence] = text.rstrip(".")
        paragraphs[paragraph] = ". ".join(sentences)
        if not paragraphs[paragraph].endswith("."):
            paragraphs[paragraph] += "."
        return paragraphs


def _sentence(rng: random.Random, vocabulary: list[str]) -> str:
    words = [rng.choice(vocabulary) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


EDITS = ("corrected", "comments")
"""Variants that only the verified rule catches (see the module docstring)."""


def make_articles(count: int = 8, seed: int = 2026) -> list[Article]:
    """``count`` articles; the variants rotate so that every kind appears."""
    rng = random.Random(seed)
    extra = random.Random(seed + 1)  # its own generator: the articles stay as they were before the edits
    kinds = ["tracking", "print", "partner", "updated"]
    articles = []
    for i in range(count):
        # Each article has its own topic words, as real articles do; a shared
        # vocabulary would make every generated article look alike.
        vocabulary = rng.sample(WORDS, 60)
        title = " ".join(rng.choice(vocabulary) for _ in range(5)).title()
        paragraphs = [
            " ".join(_sentence(rng, vocabulary) for _ in range(rng.randint(3, 6)))
            for _ in range(rng.randint(6, 10))
        ]
        # article 0 has every variant, later ones one or two, the last ones none
        variants = kinds if i == 0 else [kinds[i % 4]] + ([kinds[(i + 1) % 4]] if i % 3 == 0 else [])
        variants = list(variants)
        if i == 0:
            variants += EDITS
        elif i % 3:
            variants.append(EDITS[i % 3 - 1])
        if i >= count - 2:
            variants = []
        paragraph = len(paragraphs) // 2
        # a correction brings words the article did not use (with its own words, the simhash hardly moves)
        fresh = [word for word in WORDS if word not in vocabulary]
        edit = (paragraph, paragraphs[paragraph].count(". ") // 2, _sentence(extra, fresh))
        names = extra.sample(["Ann", "Bob", "Carla", "Dev", "Emil", "Fatima", "Goran", "Hana"], 5)
        comments = [(name, _sentence(extra, WORDS) + " " + _sentence(extra, WORDS)) for name in names]
        articles.append(Article(f"story-{i + 1:03d}", title, paragraphs, variants, edit, comments))
    return articles


def _news_page(
    article: Article,
    others: list[Article],
    stamp: str,
    ad: str,
    paragraphs: list[str] | None = None,
    comments: list[tuple[str, str]] = (),  # type: ignore[assignment]
) -> str:
    nav = "".join(f'<li><a href="/section/{n.lower()}.html">{n}</a></li>' for n in NEWS_NAV)
    most_read = "".join(f'<li><a href="/news/{o.slug}.html">{o.title}</a></li>' for o in others[:4])
    body = "".join(f"<p>{p}</p>" for p in (article.paragraphs if paragraphs is None else paragraphs))
    if comments:
        body += '<div class="responses"><h3>Readers respond</h3>'
        body += "".join(f"<p><b>{name}</b> wrote: {text}</p>" for name, text in comments) + "</div>"
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{article.title} | The Daily Lantern</title></head>
<body><header><div class="logo">The Daily Lantern</div><nav><ul>{nav}</ul></nav></header>
<main><article><h1>{article.title}</h1><p class="byline">By the newsroom · <time>{stamp}</time></p>
{body}<aside class="ad">{ad}</aside></article>
<aside class="sidebar"><h2>Most read</h2><ul>{most_read}</ul></aside></main>
<footer><p>© The Daily Lantern. All rights reserved.</p><a href="/about.html">About</a></footer></body></html>"""


def _print_page(article: Article) -> str:
    body = "".join(f"<p>{p}</p>" for p in article.paragraphs)
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{article.title} (print)</title></head>
<body class="print"><article><h1>{article.title}</h1>{body}</article>
<p class="source">Printed from The Daily Lantern</p></body></html>"""


def _partner_page(article: Article) -> str:
    nav = " | ".join(f'<a href="/partner/section/{i}">{n}</a>' for i, n in enumerate(PARTNER_NAV))
    body = "".join(f"<p>{p}</p>" for p in article.paragraphs)
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{article.title} - Valley Courier</title>
</head><body><div id="top"><span>Valley Courier</span><div class="menu">{nav}</div></div>
<div id="content"><div class="story"><h2 class="headline">{article.title}</h2>
<div class="meta">Syndicated from The Daily Lantern</div><div class="story-body">{body}</div></div>
<div class="related"><h3>Related</h3><a href="/partner/section/2">Economy news</a></div></div>
<div id="bottom">Valley Courier Media Group · Terms · Privacy</div></body></html>"""


def build_site(count: int = 8, seed: int = 2026) -> dict[str, bytes]:
    """Map of path (with query, if any) to HTML bytes."""
    articles = make_articles(count, seed)
    pages: dict[str, bytes] = {}
    links: list[str] = []
    for i, article in enumerate(articles):
        others = articles[i + 1 :] + articles[:i]
        path = f"/news/{article.slug}.html"
        pages[path] = _news_page(article, others, "2026-11-20 08:00", "Advertisement: winter tyres").encode()
        links.append(path)
        if "tracking" in article.variants:
            links.append(path + "?utm_source=newsletter&utm_medium=email")
        if "print" in article.variants:
            pages[f"/print/{article.slug}.html"] = _print_page(article).encode()
            links.append(f"/print/{article.slug}.html")
        if "partner" in article.variants:
            pages[f"/partner/{article.slug}/"] = _partner_page(article).encode()
            links.append(f"/partner/{article.slug}/")
        if "updated" in article.variants:
            updated = _news_page(article, others, "2026-11-20 17:45", "Advertisement: garden furniture sale")
            pages[f"/news/{article.slug}-updated.html"] = updated.encode()
            links.append(f"/news/{article.slug}-updated.html")
        if "corrected" in article.variants:
            corrected = _news_page(
                article,
                others,
                "2026-11-20 08:00",
                "Advertisement: winter tyres",
                article.corrected_paragraphs(),
            )
            pages[f"/news/{article.slug}-corrected.html"] = corrected.encode()
            links.append(f"/news/{article.slug}-corrected.html")
        if "comments" in article.variants:
            commented = _news_page(
                article, others, "2026-11-20 08:00", "Advertisement: winter tyres", None, article.comments
            )
            pages[f"/news/{article.slug}-comments.html"] = commented.encode()
            links.append(f"/news/{article.slug}-comments.html")
    for name in NEWS_NAV:  # section fronts: a few headlines, too little text to fingerprint
        headlines = "".join(f'<li><a href="/news/{a.slug}.html">{a.title}</a></li>' for a in articles[:3])
        pages[f"/section/{name.lower()}.html"] = (
            f"<html><body><h1>{name}</h1><ul>{headlines}</ul></body></html>".encode()
        )
    for i, name in enumerate(PARTNER_NAV):
        pages[f"/partner/section/{i}"] = (
            f"<html><body><h1>{name}</h1><p>Valley Courier</p></body></html>".encode()
        )
    pages["/about.html"] = (
        b"<html><body><h1>About</h1><p>The Daily Lantern is a demo newspaper.</p></body></html>"
    )
    index = "".join(f'<li><a href="{link}">{link}</a></li>' for link in links)
    pages["/"] = (
        f"<!DOCTYPE html><html><head><title>Demo site</title></head><body><ul>{index}</ul></body></html>".encode()
    )
    return pages


def expected_clusters(count: int = 8, seed: int = 2026, mode: str = "verified") -> list[list[str]]:
    """Paths that are near-duplicates of each other (one list per article, its variants included).

    ``mode="simhash"``: the corrected and comments copies are clusters of their own (simhash
    alone does not catch them; tests check their distances are above 3 bits), and so are the partner
    site's copies: the default extractor keeps the partner's name, headline (an ``h2``) and credit line
    around the short story, 9-10 bits from the original (the verified rule catches them).
    """
    clusters = []
    for article in make_articles(count, seed):
        path = f"/news/{article.slug}.html"
        members = [path]
        members += (
            [path + "?utm_source=newsletter&utm_medium=email"] if "tracking" in article.variants else []
        )
        members += [f"/print/{article.slug}.html"] if "print" in article.variants else []
        members += [f"/news/{article.slug}-updated.html"] if "updated" in article.variants else []
        partner = [f"/partner/{article.slug}/"] if "partner" in article.variants else []
        edited = [f"/news/{article.slug}-{kind}.html" for kind in EDITS if kind in article.variants]
        if mode == "simhash":
            clusters.extend([path] for path in partner + edited)
        else:
            members += partner + edited
        clusters.append(members)
    return clusters


@dataclass
class Page:
    """A response to serve: status, headers and raw body bytes."""

    body: bytes
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


def _handler(pages: dict[str, Page | bytes]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the http.server API
            page = pages.get(self.path) or pages.get(urlsplit(self.path).path)
            if page is None:
                page = Page(b"<html><body><h1>Not found</h1></body></html>", status=404)
            elif isinstance(page, bytes):
                page = Page(page)
            self.send_response(page.status)
            self.send_header("Content-Type", page.content_type)
            self.send_header("Content-Length", str(len(page.body)))
            for name, value in page.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(page.body)

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

    return Handler


@contextmanager
def serve(pages: dict[str, Page | bytes], port: int = 0) -> Iterator[str]:
    """Serve ``pages`` on 127.0.0.1 in a background thread; yields the base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", port), _handler(pages))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="demo-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
