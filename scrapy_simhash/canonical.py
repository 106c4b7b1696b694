"""The URL a page declares canonical (``<link rel="canonical" href="...">``), read cheaply from its bytes.

A crawl prefers the copy a page names canonical as a cluster's original (:mod:`.preferred`). The link
sits in the ``<head>``, so only the bytes before ``</head>`` (at most :data:`HEAD_BYTES`) are scanned with
a regular expression: no second parse of the page. The ``href`` is resolved against the page's URL;
fragments are dropped, and only ``http``/``https`` results count.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urljoin, urlsplit, urlunsplit

HEAD_BYTES = 256 * 1024
"""How far into a page the ``<link>`` is looked for (a head longer than this is not searched further)."""

_HEAD_END = re.compile(rb"</head\s*>|<body[\s>]", re.IGNORECASE)
_LINK = re.compile(rb"<link\b([^>]*)>", re.IGNORECASE)
_ATTRIBUTE = re.compile(rb"""([a-zA-Z_:][-a-zA-Z0-9_:.]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))""")


def canonical_url(body: bytes, url: str | None, encoding: str | None = None) -> str | None:
    """The canonical URL ``body`` declares, absolute; None when it declares none (or only an unusable one).

    The first ``<link>`` whose ``rel`` includes ``canonical`` counts. ``encoding`` decodes the ``href``
    (UTF-8 when not given; undecodable bytes are replaced).
    """
    head = body[:HEAD_BYTES]
    end = _HEAD_END.search(head)
    if end is not None:
        head = head[: end.start()]
    for link in _LINK.finditer(head):
        attributes: dict[bytes, bytes] = {}
        for match in _ATTRIBUTE.finditer(link.group(1)):
            value = match.group(2) if match.group(2) is not None else match.group(3) or match.group(4) or b""
            attributes.setdefault(match.group(1).lower(), value)
        rel = attributes.get(b"rel", b"").lower().split()
        if b"canonical" not in rel or b"href" not in attributes:
            continue
        return _absolute(_decode(attributes[b"href"], encoding), url)
    return None


def _decode(raw: bytes, encoding: str | None) -> str:
    try:
        text = raw.decode(encoding or "utf-8", errors="replace")
    except LookupError:  # an encoding Python does not know
        text = raw.decode("utf-8", errors="replace")
    return html.unescape(text).strip()


def _absolute(href: str, base: str | None) -> str | None:
    if not href:
        return None
    absolute = urljoin(base or "", href)
    parts = urlsplit(absolute)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        return None
    return urlunsplit(parts._replace(fragment=""))
