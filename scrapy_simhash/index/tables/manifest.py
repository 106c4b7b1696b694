"""Table files on disk: written once, replaced atomically, checked on open.

One generation of the bulk tables is four ``.npy`` files (the packed table entries and their
directory, :mod:`.packed_tables`; fingerprints; sequence numbers) named after the generation, plus
``manifest.json`` that names them with their sizes and CRC-32s. A new generation is written to new files, each
fsynced, then the manifest is written to a temporary file, fsynced and renamed over the
old one, and the directory fsynced: a crash leaves either the old or the new generation,
never a mix. Files of other generations are garbage and removed.

Any damage (missing, truncated, flipped bits, wrong shape) is reported as
:class:`TablesInvalid`; the index then rebuilds the tables from the database. An open checks each
file's size, header and shape (constant time); reading the files whole for their CRC-32s (linear: ~5 GB
at 10M verified pages) is asked for with ``verify`` (``verify="full"``, ``scrapy-simhash index
check``: :func:`crc_problems`).
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from tokenize import TokenError
from typing import Any

import numpy as np

from ..array_files import GenerationFiles, Parts
from ..packed_buckets import PackedBuckets
from . import prefault
from .layouts import Layout
from .packed_tables import ENTRY_FORMAT, PackedTables, prefix_bits

FORMAT = "scrapy-simhash-index/1"
MANIFEST = "manifest.json"
_PARTS = ("entries", "directory", "hashes", "seqs")
_EARLIER_PARTS = ("keys", "rows")
"""The table files of the earlier layout (8 bytes a table entry): rebuilt from the database."""
_TOUCH_CHUNK = 1 << 20


class TablesInvalid(Exception):
    """The table files cannot be trusted (the reason says why); rebuild them."""


class EarlierLayout(TablesInvalid):
    """Sound table files of the earlier layout (8 bytes a table entry): not damage, but a writer
    writes them again in this version's layout (until then the index answers from the rows)."""


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _crc(path: Path) -> int:
    crc = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            crc = zlib.crc32(chunk, crc)
    return crc


def write_files(
    directory: Path,
    generation: int,
    layout: Layout,
    info: dict[str, Any],
    put: Callable[[Parts], dict[str, Any]],
) -> dict[str, Any]:
    """Write generation ``generation``'s files, each fsynced, and return the manifest that names them,
    not yet switched to (:func:`switch_manifest`): until then they are garbage that the next open
    deletes. ``put`` puts the parts (the tables': entries, directory, hashes, seqs; more one-dimensional
    arrays, written, named and checked alike: the sketches' LSH, :mod:`.lsh_segment`) and returns the
    manifest's fields it knows (``count``, ``prefix_bits``; ``lsh``)."""
    files = GenerationFiles(directory, f"tables-{generation:06d}")
    fields = put(files)
    return {
        "format": FORMAT,
        "generation": generation,
        "layout": layout.spec,
        "tables": ENTRY_FORMAT,
        **fields,
        "files": files.files,
        **info,
    }


def switch_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    """Name ``manifest``'s generation the current one: a temporary file, fsynced, renamed over the
    manifest, the directory fsynced (a few small writes: the switch, not the rewrite)."""
    tmp = directory / f"{MANIFEST}.tmp"
    with tmp.open("w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, directory / MANIFEST)
    _fsync_dir(directory)


def _generation_files(directory: Path) -> Iterator[tuple[int, Path]]:
    """Each table file in ``directory`` with the generation its name gives."""
    for path in directory.glob("tables-*.npy"):
        try:
            yield int(path.name.split(".")[0].split("-")[1]), path
        except (IndexError, ValueError):
            continue


def remove_stale(directory: Path, keep: int | None) -> None:
    """Delete table files of every generation but ``keep`` (left over by a crash or a merge)."""
    for generation, path in _generation_files(directory):
        if generation != keep:
            path.unlink(missing_ok=True)
    (directory / f"{MANIFEST}.tmp").unlink(missing_ok=True)


def remove_older(directory: Path, below: int) -> None:
    """Delete the table files of every generation below ``below``: what a switch to ``below`` left
    behind. Safe beside a writer: every file it writes afterwards is of a later generation."""
    for generation, path in _generation_files(directory):
        if generation < below:
            path.unlink(missing_ok=True)


def read_manifest(directory: Path) -> dict[str, Any] | None:
    """The manifest, None when there is none yet; TablesInvalid when unreadable."""
    path = directory / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
        if manifest.get("format") != FORMAT:
            raise TablesInvalid(f"manifest format {manifest.get('format')!r} is not {FORMAT}")
        earlier = all(part in manifest.get("files", ()) for part in _EARLIER_PARTS)
        if manifest.get("tables") != ENTRY_FORMAT and earlier:
            raise EarlierLayout("the table files have an earlier layout (8 bytes a table entry)")
        for part in _PARTS:
            entry = manifest["files"][part]
            if not isinstance(entry["name"], str) or "/" in entry["name"]:
                raise TablesInvalid("manifest names a file outside the index")
            _require_ints(entry, "bytes", "crc32")
        _require_ints(manifest, "generation", "count", "max_seq", "prefix_bits")
        if not isinstance(manifest["layout"], str) or not isinstance(manifest["db_id"], str):
            raise TablesInvalid("manifest.json is damaged (layout or db_id is not a string)")
        return manifest
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TablesInvalid(f"manifest.json is damaged ({type(exc).__name__}: {exc})") from None


def _require_ints(mapping: dict[str, Any], *names: str) -> None:
    """Every field a reader will use must be there with its type: a KeyError later would escape."""
    for name in names:
        value = mapping[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TablesInvalid(f"manifest.json is damaged ({name} is {value!r}, not an integer)")


def _map_array(path: Path) -> np.ndarray:
    """A read-only array backed by the file's pages (mapped lazily: the caller faults them in, in the
    background, :mod:`.prefault` or :func:`touch_pages`). A plain ndarray over the mapping avoids
    np.memmap's per-call subclass overhead.
    """
    with path.open("rb") as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        offset = f.tell()
        if fortran or len(shape) != 1 or dtype.hasobject:
            raise ValueError("expected a one-dimensional numeric array")
        size = os.fstat(f.fileno()).st_size
        if offset + shape[0] * dtype.itemsize != size:
            raise ValueError(f"{size - offset} data bytes for {shape[0]} items of {dtype}")
        if shape[0] == 0:
            return np.zeros(0, dtype=dtype)
        mapping = mmap.mmap(f.fileno(), size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    return np.frombuffer(mapping, dtype=dtype, count=shape[0], offset=offset)


def touch_pages(array: np.ndarray) -> None:
    """Fault in every page of a mapped array, a megabyte at a time: what MAP_POPULATE does, without
    holding the interpreter's lock for the whole mapping (Python's ``mmap`` holds it while the
    kernel populates: seconds for a large generation, every other thread stopped)."""
    data = array.reshape(-1).view(np.uint8) if array.size else array
    for start in range(0, data.size, _TOUCH_CHUNK):
        int(data[start : start + _TOUCH_CHUNK : mmap.PAGESIZE].sum())


def crc_problems(directory: Path, manifest: dict[str, Any]) -> tuple[int, list[str]]:
    """Every file ``manifest`` names read whole against its size and CRC-32 (the full check; an open
    checks sizes and headers only, unless asked): how many were read, and what is wrong."""
    problems = []
    for part, entry in sorted(manifest["files"].items()):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or "/" in name:
            problems.append(f"the manifest's entry for {part} is damaged")
            continue
        path = directory / name
        try:
            if path.stat().st_size != entry.get("bytes"):
                problems.append(f"{name} has {path.stat().st_size} bytes, expected {entry.get('bytes')}")
            elif _crc(path) != entry.get("crc32"):
                problems.append(f"{name} fails its CRC-32 check")
        except FileNotFoundError:
            problems.append(f"{name} is missing")
    return len(manifest["files"]), problems


def _load_part(directory: Path, entry: dict[str, Any], verify: bool, background: bool = False) -> np.ndarray:
    """One table file, checked and mapped (a reader can race a writer removing an old generation:
    a file that vanishes meanwhile is simply invalid)."""
    path = directory / entry["name"]
    try:
        stat = path.stat()
        size = stat.st_size
        if size != entry["bytes"]:
            raise TablesInvalid(f"{entry['name']} has {size} bytes, expected {entry['bytes']}")
        if verify and _crc(path) != entry["crc32"]:
            raise TablesInvalid(f"{entry['name']} fails its CRC-32 check")
    except FileNotFoundError:
        raise TablesInvalid(f"{entry['name']} is missing") from None
    try:
        array = _map_array(path)
        if background:
            touch_pages(array)
        else:
            # not at open: MAP_POPULATE and the CRC are linear in the index
            identity = (stat.st_ino, stat.st_mtime_ns)
            prefault.in_background(array, None if verify else path, entry["crc32"], identity)
        return array
    except (ValueError, OSError, SyntaxError, TokenError) as exc:  # numpy parses the header as Python
        raise TablesInvalid(f"{entry['name']} is not a valid array file ({exc})") from None


def load_parts(
    directory: Path,
    manifest: dict[str, Any],
    parts: tuple[str, ...],
    verify: bool = True,
    background: bool = False,
) -> dict[str, np.ndarray] | None:
    """The extra arrays ``parts`` of the generation ``manifest`` names, mapped after checking sizes
    (and CRCs with ``verify``); None when the generation was written without them. ``background``:
    mapped by a thread beside others, its pages faulted in by :func:`touch_pages`."""
    files = manifest["files"]
    if not all(part in files for part in parts):
        return None
    for part in parts:
        entry = files[part]
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or "/" in entry["name"]:
            raise TablesInvalid("manifest names a file outside the index")
        _require_ints(entry, "bytes", "crc32")
    return {part: _load_part(directory, files[part], verify, background) for part in parts}


def load_generation(
    directory: Path, manifest: dict[str, Any], layout: Layout, verify: bool = True, background: bool = False
) -> PackedTables:
    """Memory-map the generation named by ``manifest``, after checking sizes and CRCs (``background``:
    as :func:`load_parts`)."""
    if manifest["layout"] != layout.spec:
        raise TablesInvalid(f"tables were built for layout {manifest['layout']}, not {layout.spec}")
    arrays = {part: _load_part(directory, manifest["files"][part], verify, background) for part in _PARTS}
    if arrays["seqs"].dtype == np.uint32:  # narrowed on disk (generations written before: int64)
        arrays["seqs"] = arrays["seqs"].astype(np.int64)
    prefix = prefix_bits(layout)
    if manifest["prefix_bits"] != prefix:
        raise TablesInvalid(f"table entries keep {manifest['prefix_bits']} key bits, not {prefix}")
    try:
        buckets = PackedBuckets(arrays["entries"], arrays["directory"], arrays["hashes"].shape[0], prefix)
    except ValueError as exc:
        raise TablesInvalid(f"the table entries do not fit their directory ({exc})") from None
    segment = PackedTables(buckets, arrays["hashes"], arrays["seqs"])
    problem = segment.check(layout)
    if problem is None and len(segment) != int(manifest["count"]):
        problem = f"tables hold {len(segment)} fingerprints, manifest says {manifest['count']}"
    if problem:
        raise TablesInvalid(problem)
    return segment
