"""Locations as shown to a person: a password in an index URI is never printed.

A Redis URI carries its password (``redis://:secret@host:6379/0``, or ``?password=secret``), and
messages, logs, ``index info`` and reports name the index they are about. Every place that shows a
location to a person passes it through :func:`shown_location`, which keeps everything a reader needs
to tell one index from another (scheme, user, host, port, database, prefix) and masks the password.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

MASK = "***"
"""What a password is shown as."""
_SECRET_OPTIONS = frozenset({"password", "pass", "passwd", "secret", "token"})


def shown_location(location: str | os.PathLike[str]) -> str:
    """``location`` with its password masked: ``redis://:***@127.0.0.1:6379/0`` (a user is kept).

    Paths and URIs without a password come back unchanged."""
    text = os.fspath(location)
    if "://" not in text:
        return text
    try:
        parts = urlsplit(text)
        password = parts.password
    except ValueError:  # an unparseable URI (a bad port, say): hide anything between :// and @
        scheme, _, rest = text.partition("://")
        userinfo, at, host = rest.rpartition("@")
        if not at:
            return text
        return f"{scheme}://{userinfo.partition(':')[0]}:{MASK}@{host}"
    netloc = parts.netloc
    if password is not None:
        user, _, host = netloc.rpartition("@")
        netloc = f"{user.partition(':')[0]}:{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(name.lower() in _SECRET_OPTIONS for name, _ in pairs):
            query = "&".join(
                f"{quote(name, safe='')}={MASK if name.lower() in _SECRET_OPTIONS else quote(value, safe='')}"
                for name, value in pairs
            )
    if netloc == parts.netloc and query == parts.query:
        return text
    return urlunsplit(parts._replace(netloc=netloc, query=query))


__all__ = ["MASK", "shown_location"]
