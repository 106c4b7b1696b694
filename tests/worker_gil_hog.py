"""A fingerprint function for tests that holds the GIL for good on marked pages.

A catastrophic regular expression runs in C without releasing the GIL, like a
runaway parse in a C extension: no other thread of the worker gets to run.
Loaded in the worker processes through SIMHASH_FINGERPRINT_FUNCTION; it
creates the file named by $GIL_HOG_STARTED first, so a test knows when.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from scrapy_simhash.page import PageFingerprint, fingerprint_page


def fingerprint(body: bytes, url: str | None, encoding: str | None, **options: object) -> PageFingerprint:
    if b"HOG-THE-GIL" in body:
        Path(os.environ["GIL_HOG_STARTED"]).touch()
        re.fullmatch(r"(a|aa)+b", "a" * 64)  # ~2**44 steps: hours, all in one C call
    return fingerprint_page(body, url, encoding, **options)  # type: ignore[arg-type]
