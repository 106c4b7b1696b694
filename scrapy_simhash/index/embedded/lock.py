"""The single-writer lock of an embedded index: an ``flock`` on the file ``LOCK``.

The lock belongs to the open file descriptor, so it is dropped when the descriptor is closed,
by ``close()`` or by the process dying; no stale lock survives a crash.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from ..base import IndexLockedError

LOCK = "LOCK"
"""The lock file's name inside an index directory."""


def acquire_write_lock(path: Path) -> int:
    """The descriptor holding the exclusive lock on ``path``; IndexLockedError when it is held."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise IndexLockedError(
            f"the index at {path.parent} is open for writing by another process (or another "
            f"SimhashIndex in this one); open it with read_only=True to read it meanwhile"
        ) from None
    return fd
