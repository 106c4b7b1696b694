"""Which rows of the simhash store (:mod:`.storage`) may lack a checksum, from the format its settings record.

Rows and settings carry checksums (:mod:`.integrity`) since format 2, which the settings record as
``format``. Only a database written before checksums (format 1, never recorded) may lack them, and
it is recognised by having *none* of the markers every later writer leaves: no ``format``, no
settings ``check``, no ``chk`` column. Deleting one of them from a newer database is damage, not a
way back to unverified rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import IndexSettingsError
from .database import settings_check

if TYPE_CHECKING:
    from .storage import Store

FORMAT = 2
"""The database format this version writes (setting ``format``)."""
UNCHECKED_ALL = (1 << 63) - 1
"""``unchecked_upto`` of a database read as written before checksums: no row has one."""


def settle_format(store: Store, has_chk: bool) -> int:
    """``unchecked_upto``: rows with a seq up to it may lack a checksum. A writer records the format of
    a database that predates the setting (adding the ``chk`` column to one without), in one transaction.

    - ``format`` recorded: the settings must carry their ``check``; ``unchecked_upto`` as stored
      (absent: 0, every row has a checksum).
    - No ``chk`` column: written before checksums, if no other marker (``check``, ``format``) is there
      either. A reader verifies no row; a writer adds the column, ``format`` and ``unchecked_upto``
      (the high-water seq: every row so far).
    - ``chk`` but no ``format`` (written by versions that had checksums but recorded no format):
      ``check`` must be there; rows without a checksum can then only be ones such a version kept from
      before checksums, so ``unchecked_upto`` is the last of them.
    """
    stored = store.stored_settings()
    check = stored.pop("check", None)
    if not has_chk and (check is not None or "format" in stored):
        raise store.damaged("its rows' checksum column is missing, but its settings are checksummed")
    if has_chk and stored and check is None:
        raise store.damaged("the settings lack their checksum")
    if check is not None and check != settings_check(stored):
        raise store.damaged("the settings fail their checksum")
    if "format" in stored:
        if stored["format"] != str(FORMAT):
            raise IndexSettingsError(
                f"the index database {store.path} has format {stored['format']}; this version of "
                f"scrapy-simhash reads format {FORMAT}: open it with the version that wrote it"
            )
        return int(stored.get("unchecked_upto", 0))
    if not has_chk:
        unchecked_upto = UNCHECKED_ALL if store.read_only else store.high
    else:
        with store._reading():
            last = store.conn.execute("SELECT max(seq) FROM entries WHERE chk IS NULL").fetchone()[0]
        unchecked_upto = int(last or 0)
    if store.read_only:
        return unchecked_upto
    with store._transaction():
        if not has_chk:
            store.conn.execute("ALTER TABLE entries ADD COLUMN chk INTEGER")
        if stored:  # (none: tables an older version created but never initialised; init_settings follows)
            marks = {"format": str(FORMAT)}
            if unchecked_upto:
                marks["unchecked_upto"] = str(unchecked_upto)
            store.add_settings(marks)
    return unchecked_upto
