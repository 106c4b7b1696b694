"""Which of two near-duplicate copies a person would keep as the original, in a crawl (``SIMHASH_KEEP``).

A crawl meets copies in the order the scheduler fetches them, and tracking-parameter variants and print
views are often linked before the page they copy. With ``SIMHASH_KEEP = "preferred"`` a copy that arrives
later becomes the cluster's original when it is *more preferred* than the stored original it matched:

1. a URL declared canonical: the page's own ``<link rel="canonical">`` names it, or the stored copy's
   canonical link does (:mod:`.canonical`);
2. else a URL without tracking parameters (:data:`DEFAULT_TRACKING_PARAMS`, extended by
   ``SIMHASH_TRACKING_PARAMS``);
3. else, for two addresses of one path (same host and path, other query strings), the shorter URL.

Only a strictly better copy replaces the original: on a tie the first copy stays. Length alone decides only
within one path: a shorter URL elsewhere (a partner's copy, another section) is not by itself the copy a
person would keep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit, urlunsplit

KEEP_MODES = ("preferred", "first")
DEFAULT_KEEP_MODE = "preferred"

DEFAULT_TRACKING_PARAMS = (
    "utm_*",
    "fbclid",
    "gclid",
    "gclsrc",
    "dclid",
    "gbraid",
    "wbraid",
    "msclkid",
    "yclid",
    "twclid",
    "ttclid",
    "li_fat_id",
    "igshid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "_hsenc",
    "_hsmi",
    "mkt_tok",
    "ref",
    "ref_src",
    "ref_url",
)
"""Query parameters that only say how a visitor arrived (case-insensitive; ``name*`` is a prefix)."""


def same_url(a: str | None, b: str | None) -> bool:
    """Whether two absolute URLs name one page: scheme and host compared without case, an empty path as
    ``/``, fragments ignored."""
    if not a or not b:
        return False
    return _normal(a) == _normal(b)


def _normal(url: str) -> str:
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", parts.query, ""))


@dataclass(frozen=True)
class Preference:
    """The preference order of copies; ``tracking``: the parameter names (``name*``: a prefix)."""

    tracking: tuple[str, ...] = DEFAULT_TRACKING_PARAMS

    @classmethod
    def with_extra(cls, extra: Iterable[str]) -> Preference:
        """The default tracking parameters plus ``extra`` (``SIMHASH_TRACKING_PARAMS``)."""
        names = list(DEFAULT_TRACKING_PARAMS)
        names += [
            name.strip().lower() for name in extra if name.strip() and name.strip().lower() not in names
        ]
        return cls(tuple(names))

    def is_tracking(self, name: str) -> bool:
        name = name.lower()
        return any(name.startswith(p[:-1]) if p.endswith("*") else name == p for p in self.tracking)

    def has_tracking(self, url: str) -> bool:
        """Whether ``url``'s query has a tracking parameter."""
        query = urlsplit(url).query
        return any(self.is_tracking(name) for name, _ in parse_qsl(query, keep_blank_values=True))

    def prefers(
        self, new_url: str, new_canonical: str | None, old_url: str, old_canonical: str | None
    ) -> bool:
        """Whether the copy at ``new_url`` should replace the stored original at ``old_url``; each with
        the canonical URL its page declares (None: none)."""
        if same_url(new_url, old_url):
            return False
        new_is = same_url(new_canonical, new_url) or same_url(old_canonical, new_url)
        old_is = same_url(old_canonical, old_url) or same_url(new_canonical, old_url)
        if new_is != old_is:
            return new_is
        new_tracked, old_tracked = self.has_tracking(new_url), self.has_tracking(old_url)
        if new_tracked != old_tracked:
            return old_tracked
        return _same_path(new_url, old_url) and len(new_url) < len(old_url)


def _same_path(a: str, b: str) -> bool:
    """Whether two URLs address one path of one host (their query strings aside)."""
    first, second = urlsplit(a), urlsplit(b)
    return first.netloc.lower() == second.netloc.lower() and (first.path or "/") == (second.path or "/")
