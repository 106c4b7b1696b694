"""A local news site of short briefs in one template: cookie banner, header and menu, footer.

Each brief is two sentences of its own; the template around it has far more text. Main-text extractors
return part of the template with such a short article, so before the template was recognised the briefs
came out as near-duplicates of each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from html import escape

from crawl_support import demo_site

BRIEFS = {
    "/news/weather.html": ("Weather", "Cloudy with showers later. Highs of nine."),
    "/news/ring-road.html": ("Ring road", "Lane closed on the ring road until Friday due to gas works."),
    "/news/library.html": ("Library hours", "The central library opens an hour earlier from Monday."),
    "/news/market.html": ("Farmers market", "The farmers market moves to the town square this weekend."),
    "/news/ferry.html": ("Ferry", "Morning ferries to the island are cancelled because of strong winds."),
    "/news/pool.html": ("Swimming pool", "The east side pool reopens on Saturday after repairs to its roof."),
}

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} | Riverside Daily</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="/static/site.css">
</head>
<body class="page-brief">
<div role="dialog" aria-live="polite" aria-label="cookieconsent"
     class="cc-window cc-banner cc-type-opt-in cc-theme-block cc-bottom">
 <span id="cookieconsent:desc" class="cc-message">We use cookies and similar technologies to give you the best
 experience on our website, to analyse our traffic and to show you personalised advertising. By clicking
 "Accept all" you consent to the storing of cookies on your device. You can change your choice at any time
 in the privacy settings at the bottom of every page. <a class="cc-link" href="/privacy">Learn more</a></span>
 <div class="cc-compliance">
  <a class="cc-btn cc-deny">Decline</a><a class="cc-btn cc-allow">Accept all</a>
 </div>
</div>
<div class="top-bar">
 <a href="/" class="logo">Riverside Daily</a>
 <ul class="main-menu">
  <li><a href="/news/">News</a></li><li><a href="/sport/">Sport</a></li>
  <li><a href="/weather/">Weather</a></li>
  <li><a href="/traffic/">Traffic and travel</a></li><li><a href="/business/">Business</a></li>
  <li><a href="/culture/">Culture</a></li><li><a href="/opinion/">Opinion</a></li>
  <li><a href="/contact/">Contact us</a></li>
 </ul>
</div>
<nav class="crumbs" aria-label="You are here"><a href="/">Home</a> › <a href="/news/">News</a></nav>
<article class="brief">
 <h2>{title}</h2>
 <p class="dateline">{date}, by the newsdesk</p>
 <p>{text}</p>
</article>
<div id="colophon" class="site-info">
 <p>Riverside Daily is published by Riverside Media Group Ltd, 4 Mill Lane, Riverside. Registered in England
 and Wales. All rights reserved; no part of this website may be reproduced without our permission.</p>
 <p><a href="/about/">About us</a> | <a href="/terms/">Terms of use</a> | <a href="/privacy/">Privacy</a> |
 <a href="/cookies/">Cookie settings</a> | <a href="/advertise/">Advertise with us</a></p>
</div>
</body>
</html>
"""


def brief_page(title: str, text: str, date: str = "3 March 2026") -> str:
    """One brief in the site's template."""
    return _PAGE.format(title=escape(title), text=escape(text), date=date)


def build_site() -> dict[str, bytes]:
    """The front page (links to every brief) and the briefs, by path."""
    links = "".join(f'<li><a href="{path}">{escape(title)}</a></li>' for path, (title, _) in BRIEFS.items())
    front = f"<html><head><title>Riverside Daily</title></head><body><ul>{links}</ul></body></html>"
    pages = {"/": front.encode()}
    for day, (path, (title, text)) in enumerate(BRIEFS.items(), 2):
        pages[path] = brief_page(title, text, f"{day} March 2026").encode()
    return pages


@contextmanager
def serve_site() -> Iterator[str]:
    """Serve :func:`build_site` on 127.0.0.1; yields the base URL."""
    with demo_site.serve(build_site()) as base:
        yield base
