"""The one on-disk format the embedded indexes read and write, recorded in their settings as ``format``.

Format 3: the rows ``entries(seq, key, simhash, meta, chk, sketch)``, every row with its checksum
(:mod:`.integrity`), the tables ``tombstones`` and ``resketched``, settings signed by their ``check``;
a page's sketch, when it has one, is in its own row, a byte a value (``sketch_value_bits`` 8).

The MinHash kind (:mod:`.minhash_store`, ``minhash.sqlite3``) records the same number: its rows
``sketches(seq, key, sketch, meta, chk)`` and signed settings that include ``value_bits``.

Databases written by earlier development versions (no ``format``, or 1 or 2: rows without
checksums, sketches in a second store ``sketches/``, 32-bit sketch values, no sketch column; a MinHash
index without ``format``, perhaps without ``value_bits``) are
refused at open with :class:`IndexFormatError`, which names the one-off converter
(``scrapy-simhash index upgrade OLD NEW``, :mod:`.upgrade`): the store has one reading path.
"""

from __future__ import annotations

from pathlib import Path

from ..base import IndexSettingsError

FORMAT = 3
"""The database format this version writes and reads (setting ``format``)."""


class IndexFormatError(IndexSettingsError):
    """The index was written in an on-disk format this version does not read (an earlier one: convert
    it with ``scrapy-simhash index upgrade OLD NEW``)."""


def upgrade_command(directory: str | Path) -> str:
    """The command that converts the index at ``directory`` into this version's format."""
    return f"scrapy-simhash index upgrade {directory} NEW"


def refuse_format(directory: str | Path, found: str | None, kind: str = "index") -> IndexFormatError:
    """The error for an index whose settings record format ``found`` (None: no format recorded)."""
    if found is not None and found.isdigit() and int(found) > FORMAT:
        return IndexFormatError(
            f"the {kind} at {directory} has format {found}, written by a later version of "
            f"scrapy-simhash; this version reads format {FORMAT}: upgrade scrapy-simhash"
        )
    written = "an earlier development version" if found is None else f"format {found}"
    return IndexFormatError(
        f"the {kind} at {directory} was written by {written} of scrapy-simhash, which this version does "
        f"not read (format {FORMAT}); convert it once with `{upgrade_command(directory)}` (NEW: a new "
        f"directory; the old one is left as it is) and use NEW"
    )
