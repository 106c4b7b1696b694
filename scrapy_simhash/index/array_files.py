"""A generation's arrays written a slice at a time: a merge never holds the next generation whole.

A merge writes the next generation of an embedded index (the simhash tables and the sketches' LSH,
:mod:`.tables.manifest`) from the mapped files of the current one and the in-memory layer it
absorbs. Built whole in memory, that generation cost about 1 kB of heap a page at the peak of each
merge (every entry as an 8-byte sort value, merged, then packed, the sketches copied): 20 GB at 20M
pages, more than the machine. Streamed, the heap holds the in-memory layer's own entries and a few
megabytes of slices, and the bulk goes from mapped pages to the new files.

Writers put their arrays into :class:`Parts`: :class:`GenerationFiles` writes each to a ``.npy`` file
(fsynced, its CRC-32 computed on the way), :class:`MemoryParts` keeps them as arrays (the same code
path, for merges that stay in memory and for tests). :func:`live_slices` gives a column's slices;
:class:`~.packed_buckets.BucketParts` turns sorted sort-form slices into packed entries as they pass.
"""

from __future__ import annotations

import ctypes
import io
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast

import numpy as np

SLICE_ENTRIES = 1 << 22
"""Entries a merge handles at a time (32 MB of sort values): bounds its heap, whatever the index's size."""
SEQ_NARROW_MAX = (1 << 32) - 1
"""Seqs up to this are stored as uint32."""


WRITEBACK_BYTES = 64 << 20
"""A merge hands its file's pages to the disk every this many bytes, and waits for the previous ones
(``sync_file_range``): gigabytes of dirty pages would make every commit's fsync wait for them
(ext4 flushes them with the journal), a stall for the writers the background merge must not cause."""


class Parts(Protocol):
    """Where a generation's arrays go, one named part at a time."""

    def put(self, part: str, array: np.ndarray) -> None:
        """A whole one-dimensional array."""

    def put_slices(self, part: str, dtype: np.dtype[Any], count: int, slices: Iterable[np.ndarray]) -> None:
        """``count`` values of ``dtype`` given as consecutive slices (a ValueError if they do not add up)."""


class MemoryParts:
    """The parts as in-memory arrays (``arrays[part]``)."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def put(self, part: str, array: np.ndarray) -> None:
        self.arrays[part] = np.ascontiguousarray(array)

    def put_slices(self, part: str, dtype: np.dtype[Any], count: int, slices: Iterable[np.ndarray]) -> None:
        out = np.empty(count, dtype=dtype)
        at = 0
        for piece in slices:
            if at + piece.size > count:
                raise ValueError(f"{part}: more than the {count} values announced")
            out[at : at + piece.size] = piece.reshape(-1)
            at += piece.size
        if at != count:
            raise ValueError(f"{part}: {at} values written, {count} announced")
        self.arrays[part] = out


class GenerationFiles:
    """The parts as ``<prefix>.<part>.npy`` files in ``directory``, each new (never an old file written
    again in place: a mapping of an earlier generation of that name keeps its pages), fsynced; ``files``
    names each with its size and CRC-32, as the manifest records them."""

    def __init__(self, directory: Path, prefix: str) -> None:
        self.directory, self.prefix = directory, prefix
        self.files: dict[str, dict[str, Any]] = {}

    def put(self, part: str, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array).reshape(-1)
        self.put_slices(part, array.dtype, array.size, _in_slices(array))

    def put_slices(self, part: str, dtype: np.dtype[Any], count: int, slices: Iterable[np.ndarray]) -> None:
        dtype = np.dtype(dtype)
        name = f"{self.prefix}.{part}.npy"
        path = self.directory / name
        path.unlink(missing_ok=True)
        header = _npy_header(dtype, count)
        crc, at = zlib.crc32(header), 0
        with path.open("wb") as f:
            f.write(header)
            flushed = 0
            for piece in slices:
                data = np.ascontiguousarray(piece, dtype=dtype).reshape(-1)
                if at + data.size > count:
                    raise ValueError(f"{name}: more than the {count} values announced")
                if data.size:
                    view = data.data.cast("B")
                    f.write(view)
                    crc = zlib.crc32(view, crc)
                at += data.size
                if f.tell() - flushed >= WRITEBACK_BYTES:
                    flushed = _write_back(f, flushed)
            if at != count:
                raise ValueError(f"{name}: {at} values written, {count} announced")
            f.flush()
            os.fsync(f.fileno())
            size = f.tell()
        self.files[part] = {"name": name, "bytes": size, "crc32": crc}


def live_slices(rows: np.ndarray, alive: np.ndarray | None, newer: np.ndarray) -> Iterator[np.ndarray]:
    """``rows``' live ones (all of them without ``alive``), a slice of about :data:`SLICE_ENTRIES`
    values at a time (rows of a matrix kept whole), then ``newer``: a column of the next generation."""
    width = int(np.prod(rows.shape[1:], dtype=np.int64))
    step = max(1, SLICE_ENTRIES // max(1, width))
    for start in range(0, rows.shape[0], step):
        piece = np.asarray(rows[start : start + step])
        yield piece if alive is None else piece[alive[start : start + step]]
    yield newer


def seq_dtype(highest: int) -> np.dtype[Any]:
    """How seqs up to ``highest`` are stored: 4 bytes a page while they fit (widened when loaded)."""
    return np.dtype(np.uint32 if highest <= SEQ_NARROW_MAX else np.int64)


def _libc_sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` (Python's ``os`` has no binding), None where there is none."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):  # not Linux, or no glibc symbol
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], function)


SYNC_FILE_RANGE = _libc_sync_file_range()
_WAIT_BEFORE, _WRITE, _WAIT_AFTER = 1, 2, 4  # <linux/fs.h>


def _write_back(f: BinaryIO, flushed: int) -> int:
    """Start writing back the file's pages from ``flushed`` on, after waiting for those before it
    (advice: a failure changes nothing, the final fsync makes the file durable); the new mark."""
    f.flush()
    end = f.tell()
    if SYNC_FILE_RANGE is not None:  # ctypes releases the interpreter's lock for the call
        SYNC_FILE_RANGE(f.fileno(), 0, flushed, _WAIT_BEFORE | _WRITE | _WAIT_AFTER)
        SYNC_FILE_RANGE(f.fileno(), flushed, end - flushed, _WRITE)
    return end


def _npy_header(dtype: np.dtype[Any], count: int) -> bytes:
    """The ``.npy`` header of a one-dimensional array (what ``np.save`` writes before the data)."""
    out = io.BytesIO()
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (count,)}
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue()


def _in_slices(array: np.ndarray) -> Iterator[np.ndarray]:
    step = max(1, (SLICE_ENTRIES * 8) // max(1, array.itemsize))
    for start in range(0, array.size, step):
        yield array[start : start + step]
