"""One page's bytes to its fingerprint: extraction, tokens, simhash (and a MinHash sketch when asked).

The single function both the Scrapy middleware (in worker processes) and the
WARC reprocessing tools call, so that a live crawl and a reprocessed archive
produce the same fingerprint for the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from .defaults import MIN_TOKENS
from .extract import DEFAULT_EXTRACTOR, Extractor
from .fingerprint import simhash_with_count
from .fingerprint.minhash import MinHash, simhash_and_minhash


@dataclass(frozen=True)
class PageFingerprint:
    """The fingerprint of a page, or the reason it has none.

    ``reason`` is None when ``simhash`` is set; otherwise one of the
    extractor's reasons (``empty``, ``binary``, ``too_large``, ``no_text``,
    ``boilerplate``, ``extractor_error``) or ``too_few_tokens``. ``minhash`` is the page's
    minhash-doc/1 sketch (set whenever the page has a simhash, unless ``minhash=False``
    was asked for): the verified decision rule (:mod:`scrapy_simhash.decision`) needs it.
    ``canonical`` is the URL the page declares canonical, absolute (:mod:`scrapy_simhash.canonical`),
    set by the crawl's workers when it prefers canonical copies (``SIMHASH_KEEP``); None otherwise.
    ``text_digest`` (:func:`text_digest`) identifies the extracted main text itself: two captures with
    equal digests have the same main text, whatever their markup, ads or timestamps.
    """

    simhash: int | None
    tokens: int
    reason: str | None = None
    minhash: MinHash | None = None
    canonical: str | None = None
    text_digest: str | None = None


def text_digest(text: str) -> str:
    """``sha1:<base32>`` of the main text with its whitespace runs made single spaces: a re-indented
    or re-wrapped page keeps its digest, any change of a word changes it."""
    normalised = " ".join(text.split()).encode("utf-8", "surrogatepass")
    return "sha1:" + base64.b32encode(hashlib.sha1(normalised).digest()).decode("ascii")


def fingerprint_page(
    body: bytes | str,
    url: str | None = None,
    encoding: str | None = None,
    *,
    extractor: Extractor = DEFAULT_EXTRACTOR,
    min_tokens: int = MIN_TOKENS,
    minhash: bool = True,
) -> PageFingerprint:
    """Extract the main text of ``body`` and fingerprint it; never raises on bad input.

    The sketch comes from the same normalisation and tokens as the simhash
    (:func:`~scrapy_simhash.fingerprint.minhash.simhash_and_minhash`); ``minhash=False`` leaves
    it out (simhash-only mode, which pays nothing for it).
    """
    extraction = extractor(body, url, encoding)
    if extraction.text is None:
        return PageFingerprint(None, 0, extraction.reason)
    sketch: MinHash | None = None
    if minhash:
        value, sketch, count = simhash_and_minhash(extraction.text)
    else:
        value, count = simhash_with_count(extraction.text)
    if count == 0 or count < min_tokens:
        return PageFingerprint(None, count, "too_few_tokens")
    return PageFingerprint(value, count, minhash=sketch, text_digest=text_digest(extraction.text))
