"""Faulting in the memory-mapped table files after an open, in the background, without the GIL.

A lookup's first touch of a page of a mapped file costs a page fault (tens to hundreds of
microseconds on a busy machine, a disk read if the page is not cached). ``MAP_POPULATE`` took them
all at open instead, but that is linear in the index: ~5 GB of mapped files at 10M verified pages,
seconds. So an open maps the files without it and hands them to one thread of the process, which
asks the kernel to populate them (``madvise(MADV_POPULATE_READ)``, Linux 5.14+; else
``MADV_WILLNEED``, a read-ahead) a few MiB at a time, through ctypes, which releases the
interpreter's lock for each call: lookups run meanwhile, and are exact either way (a page not yet
populated is faulted in by the lookup itself).

The same thread checks each file's CRC-32 when the open hands it one (an open after a clean close,
which no longer reads the files whole): reading the mapping for the CRC faults it in too, and
``zlib.crc32`` releases the interpreter's lock as well. A file that fails is recorded under its
directory (:func:`damage_in`); the index refuses its next call (``IndexCorruptError``). Damage at
rest is so found within seconds of an open (about 1 GB/s of mapped files, one core), not only by
``scrapy-simhash index check``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
import os
import queue
import threading
import time
import zlib
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

MADV_POPULATE_READ = 22
_CHUNK = 1 << 23  # bytes a call: short enough to stop soon when the process exits
_queue: queue.SimpleQueue[tuple[np.ndarray, Path | None, int, tuple[int, int] | None]] = queue.SimpleQueue()
_lock = threading.Lock()
_worker: threading.Thread | None = None
_populate = True
"""Whether the kernel takes MADV_POPULATE_READ (found out at the first call)."""
_done = 0
"""Arrays faulted in so far (for tests)."""
_pending = 0
_damage: dict[Path, dict[str, tuple[int, int, str]]] = {}
"""Per index directory: file name -> (inode, mtime) of the damaged file, and what is wrong."""
damage_found = 0
"""How many files failed their CRC-32 in this process: what an index's every call compares with 0."""


def _madvise() -> object | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        function = libc.madvise
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    function.restype = ctypes.c_int
    return function


_MADVISE = _madvise()


def in_background(
    array: np.ndarray, path: Path | None = None, crc32: int = 0, identity: tuple[int, int] | None = None
) -> None:
    """Fault ``array``'s pages in soon, in this process's prefault thread (started on first use);
    with ``path``, the file ``array`` maps, check it against ``crc32`` too (``identity``: the file's
    (inode, mtime) when it was mapped: a file written again under its name since is not judged)."""
    global _worker
    if not array.size or (_MADVISE is None and path is None):
        return
    with _lock:
        global _pending
        _pending += 1
    _queue.put((array, path, crc32, identity))
    with _lock:
        if _worker is None:
            _worker = threading.Thread(target=_run, name="scrapy-simhash-prefault", daemon=True)
            _worker.start()


def _run() -> None:
    global _done, _pending
    while True:
        array, path, crc32, identity = _queue.get()
        try:
            if path is None:
                _fault_in(array)
            else:
                _check(array, path, crc32, identity)
        except Exception:  # a hint to the kernel: a failure costs only page faults later
            logger.debug("prefault failed", exc_info=True)
        del array  # the mapping may be unmapped once nothing else holds it
        _done += 1
        with _lock:
            _pending -= 1


def _check(array: np.ndarray, path: Path, expected: int, identity: tuple[int, int] | None = None) -> None:
    """The CRC-32 of ``path`` (its small header read from the file, its data from the mapping). No
    verdict when the file under that name is no longer the one mapped (``identity``): an open that
    found the generation damaged wrote it again, and the new files are checked by their own open."""
    global damage_found
    data = array.reshape(-1).view(np.uint8)
    with path.open("rb") as f:
        stat = os.fstat(f.fileno())
        if identity is not None and (stat.st_ino, stat.st_mtime_ns) != identity:
            return
        crc = zlib.crc32(f.read(stat.st_size - data.size))
    for start in range(0, data.size, _CHUNK):
        crc = zlib.crc32(data[start : start + _CHUNK].data, crc)
    if crc != expected:
        stat = os.stat(path)
        if identity is not None and (stat.st_ino, stat.st_mtime_ns) != identity:
            return
        logger.error("index %s: %s fails its CRC-32 check", path.parent, path.name)
        found = (stat.st_ino, stat.st_mtime_ns, f"{path.name} fails its CRC-32 check")
        _damage.setdefault(path.parent.resolve(), {})[path.name] = found
        damage_found += 1


def damage_in(directory: Path) -> list[tuple[str, str]]:
    """(file name, what is wrong) for each file of the index at ``directory`` that the thread found
    damaged and that is still there as it was (a file rebuilt since under its name is a new file)."""
    problems = []
    for name, (inode, mtime, problem) in sorted(_damage.get(directory.resolve(), {}).items()):
        try:
            stat = os.stat(directory / name)
        except FileNotFoundError:
            continue
        if (stat.st_ino, stat.st_mtime_ns) == (inode, mtime):
            problems.append((name, problem))
    return problems


def idle() -> bool:
    """Whether the thread has done every array handed to it so far."""
    return _pending == 0


def wait(timeout: float = 60.0) -> bool:
    """Wait until :func:`idle` (tests, benchmarks: figures after the files are faulted in and checked);
    False when ``timeout`` seconds passed first."""
    deadline = time.monotonic() + timeout
    while not idle():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _fault_in(array: np.ndarray) -> None:
    global _populate
    start = array.ctypes.data
    aligned = start - start % mmap.PAGESIZE
    end = start + array.nbytes
    for at in range(aligned, end, _CHUNK):
        length = min(_CHUNK, end - at)
        if _populate and _MADVISE(at, length, MADV_POPULATE_READ) == 0:  # type: ignore[operator]
            continue
        if _populate and ctypes.get_errno() == 22:  # EINVAL: a kernel before 5.14
            _populate = False
        if not _populate:
            _MADVISE(at, length, mmap.MADV_WILLNEED)  # type: ignore[operator]


def faulted_in() -> int:
    """How many arrays the prefault thread has finished (for tests)."""
    return _done
