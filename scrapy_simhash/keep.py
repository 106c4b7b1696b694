"""Which record of a near-duplicate cluster is its original: the ``dedupe --keep`` policies.

A cluster is a set of records; the policy orders them and the first is the original. The order is
total and depends on the records alone (capture date, URL, file name, offset, main-text length), never
on the order they were read in, so that ``dedupe`` with any number of workers, with an index and
``spark dedupe`` name the same original.

- ``earliest`` (the default): the earliest capture (``WARC-Date``).
- ``latest``: the latest capture.
- ``longest``: the most main-text tokens (the fullest copy: not a teaser or a truncated print view).
- ``shortest-url``: the shortest URL (a canonical address rather than one with tracking parameters).

Ties, under every policy, are broken by the earlier capture, then the URL, the file name and the
offset (compared as strings and numbers); records without a valid date come after dated ones.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

KEEP_POLICIES = ("earliest", "latest", "longest", "shortest-url")
DEFAULT_KEEP = "earliest"

_W3C = re.compile(
    r"(\d{4})(?:-(\d{2})(?:-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|[+-]\d{2}:?\d{2}))?)?)?"
)
_ARC = re.compile(r"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})")


def capture_instant(date: str | None) -> tuple[int, int] | None:
    """A capture date (W3C-DTF as WARC writes it, or an ARC's 14 digits) as (UTC seconds since the epoch,
    nanoseconds), comparable whatever the precision and offset it was written with; None when invalid."""
    if not date:
        return None
    text = date.strip()
    try:
        arc = _ARC.fullmatch(text)
        if arc is not None:
            y, mo, d, h, mi, sec = (int(part) for part in arc.groups())
            moment = datetime(y, mo, d, h, mi, sec, tzinfo=timezone.utc)
            return int(moment.timestamp()), 0
        match = _W3C.fullmatch(text)
        if match is None:
            return None
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        moment = datetime(
            int(year),
            int(month or 1),
            int(day or 1),
            int(hour or 0),
            int(minute or 0),
            min(int(second or 0), 59),  # a leap second counts as the second before it
            tzinfo=timezone.utc,
        )
    except ValueError:
        return None
    seconds = int(moment.timestamp())
    if zone and zone != "Z":
        sign = -1 if zone[0] == "+" else 1
        digits = zone[1:].replace(":", "")
        seconds += sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    nanos = int((fraction or "0")[:9].ljust(9, "0"))
    return seconds, nanos


def check_policy(policy: str) -> str:
    """``policy`` if it is one of :data:`KEEP_POLICIES`; ValueError naming them otherwise."""
    if policy not in KEEP_POLICIES:
        raise ValueError(f"unknown keep policy {policy!r}; choose one of {', '.join(KEEP_POLICIES)}")
    return policy


def keep_order(
    policy: str,
    *,
    date: str | None,
    uri: str | None,
    file: str | None,
    offset: int | None,
    tokens: int | None,
) -> tuple[Any, ...]:
    """The sort key of a record under ``policy``: the smallest key is the cluster's original."""
    instant = capture_instant(date)
    earliest = (0, *instant) if instant is not None else (1, 0, 0)
    tie = (earliest, uri or "", file or "", -1 if offset is None else int(offset))
    if policy == "earliest":
        return tie
    if policy == "latest":
        latest = (0, -instant[0], -instant[1]) if instant is not None else (1, 0, 0)
        return (latest, *tie)
    if policy == "longest":
        return (-(tokens or 0), *tie)
    if policy == "shortest-url":
        return (uri is None, len(uri or ""), *tie)
    raise ValueError(check_policy(policy))


def meta_order(policy: str, meta: dict[str, Any]) -> tuple[Any, ...]:
    """:func:`keep_order` of a record described as an index stores it (``url``, ``date``, ``file``,
    ``offset``, ``tokens``; a page stored without a token count counts as 0 tokens)."""
    return keep_order(
        policy,
        date=meta.get("date"),
        uri=meta.get("url"),
        file=meta.get("file"),
        offset=meta.get("offset"),
        tokens=meta.get("tokens"),
    )
