"""The archive files a report reads from its inputs: files, WARCs inside WACZ packages, and both
found in directories."""

from __future__ import annotations

import os

from ..warc.read.wacz import expand_archive, is_wacz_name


def archive_files(inputs: list[str]) -> list[str]:
    """The archives to read: files, WARCs inside WACZ packages, and both found in directories
    (sidecars included: they hold the fingerprints). A WACZ that cannot be read stays in the list,
    so that reading it gives its problem."""
    files: list[str] = []
    for location in inputs:
        if os.path.isdir(location):
            for root, _dirs, names in sorted(os.walk(location)):
                for name in sorted(names):
                    if ".warc" in name or ".arc" in name or is_wacz_name(name):
                        files.extend(_expanded(os.path.join(root, name)))
        else:
            files.extend(_expanded(location))
    return files


def _expanded(path: str) -> list[str]:
    try:
        return expand_archive(path)
    except OSError:
        return [path]
