"""The inputs of ``tag``, ``dedupe``, ``cdxj`` and ``spark``: files, directories and WACZ packages
planned into one list of WARC/ARC files, each with the sidecar ``tag`` writes for it.

What is not read says why (a sidecar given as input, a directory without archives, a WACZ without
WARCs), so that a run reports it instead of passing over it in silence.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..write.writer import OPEN_SUFFIX
from .reader import ReadProblem
from .wacz import ARCHIVE_FOLDER, archive_exists, expand_archive, is_wacz_name, split_location

SIDECAR_SUFFIX = ".simhash.warc.gz"

_ARCHIVE_NAME = re.compile(r"\.w?arc(\.|$)")
_NOT_ARCHIVES = (".cdx", ".cdxj", ".json", ".idx", ".txt", ".md")


@dataclass(frozen=True)
class Input:
    path: Path
    sidecar: Path
    not_read: str | None = None
    """Why this input is not read at all (a sidecar given as input, a directory without archives)."""
    lost: bool = False
    """With ``not_read``: whether that is a problem (exit status 1) rather than a note."""
    source: str | None = None
    """How the sidecar names its input when ``path`` is a local copy of it (a Hadoop URI that
    ``spark tag`` spooled); None: the path relative to the sidecar."""


@dataclass(frozen=True)
class InputProblem(ReadProblem):
    """An input passed over as a whole, e.g. one of our own sidecars (``kind="sidecar"``)."""

    kind: str = ""


def is_sidecar_name(name: str) -> bool:
    """``x.simhash.warc.gz`` (and ``.open``): an output of ``tag``, never an input."""
    return name.lower().endswith((SIDECAR_SUFFIX, SIDECAR_SUFFIX + OPEN_SUFFIX))


def is_archive_name(name: str) -> bool:
    """Names with a ``.warc``/``.arc`` part (``x.warc.gz``, ``x.arc``, ``x.warc.gz.open``); not sidecars."""
    lower = name.lower()
    if is_sidecar_name(lower) or lower.endswith(_NOT_ARCHIVES):
        return False
    return bool(_ARCHIVE_NAME.search(lower))


SIDECAR_INPUT = "a simhash sidecar (an output of tag, recognised by its name), not an input: not read"
NO_ARCHIVES = "a directory without WARC/ARC files (names with .warc or .arc) in it: nothing read"
NO_WACZ_ARCHIVES = "a WACZ without WARC files in its archive/ folder: nothing read"


def plan_inputs(
    inputs: Iterable[str | os.PathLike[str]], out: str | os.PathLike[str] | None = None
) -> list[Input]:
    """Expand directories (recursively, sorted) and WACZ packages, and name each input's sidecar.

    The sidecar is ``<name>.simhash.warc.gz`` beside the input; with ``out``, under ``out``
    at the input's path relative to the directory argument it was found in. A ``.wacz``
    becomes one input per WARC inside it (``x.wacz#archive/a.warc.gz``, read in place), each
    with its sidecar beside the package (:func:`sidecar_name`). Sidecars given as inputs (a
    shell glob such as ``*.warc.gz`` matches them), directories holding no archive and WACZ
    files that cannot be read are kept with a ``not_read`` reason, so the run reports them
    instead of reading them (and goes on with the others).
    """
    planned: list[Input] = []
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and _is_input_name(p.name))
            if not found:
                planned.append(Input(path, path, not_read=NO_ARCHIVES, lost=True))
            for file in found:
                rel = file.relative_to(path)
                planned.extend(_file_inputs(file, Path(out) / rel.parent if out else file.parent))
        elif path.is_file():
            planned.extend(_file_inputs(path, Path(out) if out else path.parent))
        elif (split := split_location(path)) is not None and archive_exists(path):
            # one WARC of a WACZ, named as reports name it: its sidecar beside the package
            planned.append(Input(path, (Path(out) if out else Path(split[0]).parent) / sidecar_name(path)))
        else:
            raise ValueError(f"no such file or directory: {path}")
    seen: dict[Path, Path] = {}
    for entry in planned:
        if entry.not_read:
            continue
        other = seen.setdefault(entry.sidecar.resolve(), entry.path)
        if other != entry.path:
            raise ValueError(
                f"{other} and {entry.path} would share the sidecar {entry.sidecar}; "
                f"pass their directory instead, or run them separately"
            )
    return planned


def sidecar_name(path: str | os.PathLike[str]) -> str:
    """``x.warc.gz.simhash.warc.gz``; for a WARC inside a WACZ, named after the package and the member,
    to sit beside the package: ``c.wacz#archive/a.warc.gz`` -> ``c.wacz.a.warc.gz.simhash.warc.gz``."""
    split = split_location(path)
    if split is None:
        return Path(path).name + SIDECAR_SUFFIX
    wacz, member = split
    member = member.removeprefix(ARCHIVE_FOLDER).replace("/", ".")
    return f"{Path(wacz).name}.{member}{SIDECAR_SUFFIX}"


def _is_input_name(name: str) -> bool:
    return is_archive_name(name) or is_wacz_name(name)


def _file_inputs(path: Path, base: Path) -> list[Input]:
    """The inputs of one file: itself, or each WARC of a WACZ (sidecars in ``base``)."""
    if is_sidecar_name(path.name):
        return [Input(path, base / (path.name + SIDECAR_SUFFIX), not_read=SIDECAR_INPUT)]
    try:
        names = expand_archive(path)
    except OSError as exc:
        return [Input(path, path, not_read=f"{exc.strerror or exc}; nothing read", lost=True)]
    if not names:
        return [Input(path, path, not_read=NO_WACZ_ARCHIVES, lost=True)]
    if names == [str(path)]:
        return [Input(path, base / (path.name + SIDECAR_SUFFIX))]
    return [Input(Path(name), base / sidecar_name(name)) for name in names]
