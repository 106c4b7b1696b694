"""Planted pages for the verified rule's WARC and Spark tests: a one-sentence edit that k = 3 misses.

Built from a real corpus page (scrapinghub-aeb, the first from the 7th file on that fits): the original's
main text rebuilt as plain HTML, and the same text with the first sentence of one paragraph rewritten.
Their simhashes differ by more than 3 bits (the page is chosen for it by :func:`planted_edit`), so only the
verified rule pairs them.
"""

from __future__ import annotations

import gzip
import html
import re
from pathlib import Path

from scrapy_simhash.decision import DEFAULT_RULE, compare
from scrapy_simhash.extract import DEFAULT_EXTRACTOR
from scrapy_simhash.page import fingerprint_page
from scrapy_simhash.warc.records import http_head, response_record
from scrapy_simhash.warc.write.writer import gzip_member

HEAD = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html; charset=utf-8")])
EARLY, LATE = "2024-01-01T00:00:00Z", "2024-06-01T00:00:00Z"
NEW_SENTENCE = "This sentence was rewritten entirely by an editor for the planted test case."


def as_html(text: str) -> bytes:
    paragraphs = [p for p in text.split("\n") if p.strip()]
    body = "".join(f"<p>{html.escape(p)}</p>" for p in paragraphs)
    return f"<html><head><title>page</title></head><body><article>{body}</article></body></html>".encode()


def one_sentence_edit(text: str) -> str:
    """``text`` with the first sentence of its first paragraph of two or more sentences rewritten."""
    paragraphs = text.split("\n")
    for i, paragraph in enumerate(paragraphs):
        sentences = re.split(r"(?<=[.!?]) ", paragraph)
        if len(sentences) >= 2 and len(sentences[0].split()) > 8:
            sentences[0] = NEW_SENTENCE
            return "\n".join([*paragraphs[:i], " ".join(sentences), *paragraphs[i + 1 :]])
    raise ValueError("no paragraph of two sentences to edit")


def corpus_pages(corpus: Path, count: int = 8) -> list[bytes]:
    files = sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[:count]
    return [gzip.decompress(f.read_bytes()) for f in files]


def planted_edit(corpus: Path) -> tuple[bytes, bytes]:
    """(original, one-sentence edit) as HTML, from the first scrapinghub-aeb page from the 7th on whose edit
    only the verified rule pairs (simhash at k = 3 misses it); the pair is checked to be what the tests need.

    Which page that is depends on the extracted text (the 7th until the template step dropped its teaser
    list, ``;boilerplate=2``; the text got shorter and k = 3 caught its edit)."""
    for page in corpus_pages(corpus, 16)[6:]:
        text = DEFAULT_EXTRACTOR(page, None, None).text
        if text is None:
            continue
        try:
            original, edited = as_html(text), as_html(one_sentence_edit(text))
        except ValueError:  # no paragraph of two sentences
            continue
        verdict = compare(fingerprint_page(original), fingerprint_page(edited))
        only_verified = verdict.method == "verified" and verdict.distance > DEFAULT_RULE.distance
        if verdict.near_duplicate and only_verified:  # simhash at k = 3 misses it
            return original, edited
    raise AssertionError("no corpus page gives a one-sentence edit that only the verified rule pairs")


def write_warc(path: Path, records: list[tuple[str, str, bytes]]) -> Path:
    """A per-record-gzip WARC of responses (uri, WARC-Date, HTML body)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as out:
        for uri, date, body in records:
            out.write(gzip_member(response_record(uri, date, HEAD, body).to_bytes()))
    return path


def edit_inputs(corpus: Path, base: Path) -> list[Path]:
    """a.warc.gz: the original and two unrelated pages; b.warc.gz: the one-sentence edit and an exact copy
    of an unrelated page (a pair both rules find)."""
    original, edited = planted_edit(corpus)
    pages = corpus_pages(corpus, 4)
    first = [
        ("http://a/orig", EARLY, original),
        ("http://a/u1", EARLY, pages[1]),
        ("http://a/u2", EARLY, pages[2]),
    ]
    second = [("http://b/edit", LATE, edited), ("http://b/u1-copy", LATE, pages[1])]
    return [write_warc(base / "a.warc.gz", first), write_warc(base / "b.warc.gz", second)]
