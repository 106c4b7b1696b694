"""Faulting in the memory-mapped table files after an open, in the background, without the GIL.

A lookup's first touch of a page of a mapped file costs a page fault (tens to hundreds of
microseconds on a busy machine, a disk read if the page is not cached). ``MAP_POPULATE`` took them
all at open instead, but that is linear in the index: ~5 GB of mapped files at 10M verified pages,
seconds. So an open maps the files without it and hands them to one thread of the process, which
asks the kernel to populate them (``madvise(MADV_POPULATE_READ)``, Linux 5.14+; else
``MADV_WILLNEED``, a read-ahead) a few MiB at a time, through ctypes, which releases the
interpreter's lock for each call: lookups run meanwhile, and are exact either way (a page not yet
populated is faulted in by the lookup itself).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import mmap
import queue
import threading

import numpy as np

logger = logging.getLogger(__name__)

MADV_POPULATE_READ = 22
_CHUNK = 1 << 23  # bytes a call: short enough to stop soon when the process exits
_queue: queue.SimpleQueue[np.ndarray] = queue.SimpleQueue()
_lock = threading.Lock()
_worker: threading.Thread | None = None
_populate = True
"""Whether the kernel takes MADV_POPULATE_READ (found out at the first call)."""
_done = 0
"""Arrays faulted in so far (for tests)."""


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


def in_background(array: np.ndarray) -> None:
    """Fault ``array``'s pages in soon, in this process's prefault thread (started on first use)."""
    global _worker
    if _MADVISE is None or not array.size:
        return
    _queue.put(array)
    with _lock:
        if _worker is None:
            _worker = threading.Thread(target=_run, name="scrapy-simhash-prefault", daemon=True)
            _worker.start()


def _run() -> None:
    global _done
    while True:
        array = _queue.get()
        try:
            _fault_in(array)
        except Exception:  # a hint to the kernel: a failure costs only page faults later
            logger.debug("prefault failed", exc_info=True)
        del array  # the mapping may be unmapped once nothing else holds it
        _done += 1


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
