"""Opening the embedded index's layers: the base from its table files, checked against the database.

The manifest is read first, then the rows in one snapshot: a concurrent writer can only move the
database ahead of the files. Files that are damaged, foreign, or that account for other rows than the
database holds are not used: the layers are filled from the rows (a rebuild, logged and counted),
and a writer writes them again. Verified table files that account for *more* rows than the database
holds mean lost rows: :class:`IndexCorruptError`, never a silent rebuild into a smaller index.
"""

from __future__ import annotations

import logging
from typing import Any

from ..tables.layers import Layers
from ..tables.manifest import TablesInvalid, read_manifest
from ..tables.tables import members
from .integrity import check_manifest

logger = logging.getLogger(__name__)


def _invalid(layers: Layers, exc: TablesInvalid) -> int:
    logger.warning("index %s: table files invalid (%s); rebuilding them from the database", layers.path, exc)
    return 1


def load_layers(
    layers: Layers, store: Any, db_id: str, verify: bool | str, read_only: bool, crc: bool = True
) -> int:
    """Fill empty ``layers`` from the table files and ``store`` (a :class:`~.storage.Store`); the
    number of rebuilds this took (0: the files were used). ``crc``: read the files whole for their
    CRC-32s (else their sizes, headers and shapes are checked: :mod:`.integrity` says when)."""
    rebuilds = 0
    try:
        manifest = read_manifest(layers.path)
    except TablesInvalid as exc:
        manifest = None
        rebuilds += _invalid(layers, exc)
    with store.snapshot():
        try:
            if manifest is not None and not check_manifest(store.path, manifest, db_id, store.high):
                raise TablesInvalid("the table files belong to another database")
            layers.set_base(manifest, verify=crc)
        except TablesInvalid as exc:
            layers.drop_base()
            rebuilds += _invalid(layers, exc)
        dead = set(members(layers.base.seqs, store.tombstones()).tolist())
        seqs, hashes = store.rows(after=layers.base_max_seq)
        layers.set_rest(dead, hashes, seqs)
        count, expected = store.live, len(layers)
        if expected != count and store.recount():  # the count was the mark's: count the rows after all
            count = store.live
        if expected > count and verify and not rebuilds and not read_only:
            # verified table files and newer rows account for rows the database no longer has
            raise store.damaged(f"it holds {count} rows, its table files account for {expected}")
        if expected != count:
            # the files do not describe this database (restored from elsewhere, or damaged)
            logger.warning(
                "index %s: table files hold %d live fingerprints, the database %d; rebuilding",
                layers.path,
                expected,
                count,
            )
            layers.drop_base()
            seqs, hashes = store.rows()
            layers.set_rest(set(), hashes, seqs)
            rebuilds += 1
    return rebuilds
