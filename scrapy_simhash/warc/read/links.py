"""The headers that tie a WARC record to another one: what resolves a ``revisit`` to its original."""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RecordLinks:
    """``WARC-Payload-Digest``, ``WARC-Profile`` and the ``WARC-Refers-To*`` headers of a record: what
    resolves a ``revisit`` record to the record whose payload it repeats (:mod:`..revisits`)."""

    payload_digest: str | None = None
    profile: str | None = None
    refers_to: str | None = None
    refers_to_uri: str | None = None
    refers_to_date: str | None = None


LINK_HEADERS = (
    "WARC-Payload-Digest",
    "WARC-Profile",
    "WARC-Refers-To",
    "WARC-Refers-To-Target-URI",
    "WARC-Refers-To-Date",
)


def record_links(
    get: Callable[[str], str | None], clean_uri: Callable[[str | None], str | None]
) -> RecordLinks | None:
    """The link headers read with ``get`` (a header lookup of either backend), the URI cleaned as the
    reader cleans target URIs; None when none is set."""
    values = [(get(name) or "").strip() or None for name in LINK_HEADERS]
    if not any(values):
        return None
    digest, profile, refers_to, refers_uri, refers_date = values
    return RecordLinks(digest, profile, refers_to, clean_uri(refers_uri), refers_date)


def normalise_digest(value: str | None) -> str | None:
    """``sha1:BASE32`` for SHA-1 digests written in base32 or hex (writers differ), else the value with
    its algorithm lower-cased; None for an empty value."""
    if not value:
        return None
    algorithm, sep, digest = value.strip().partition(":")
    if not sep:
        return value.strip()
    algorithm = algorithm.strip().lower()
    digest = digest.strip()
    if algorithm == "sha1" and re.fullmatch(r"[0-9a-fA-F]{40}", digest):
        digest = base64.b32encode(binascii.unhexlify(digest)).decode("ascii")
    elif algorithm == "sha1":
        digest = digest.upper()
    return f"{algorithm}:{digest}"
