"""A fingerprint function for tests that crashes or hangs on marked pages.

Loaded in the worker processes through SIMHASH_FINGERPRINT_FUNCTION.
"""

from __future__ import annotations

import os
import time

from scrapy_simhash.page import PageFingerprint, fingerprint_page


def fingerprint(body: bytes, url: str | None, encoding: str | None, **options: object) -> PageFingerprint:
    if b"CRASH-THIS-WORKER" in body:
        os._exit(3)
    if b"HANG-THIS-WORKER" in body:
        time.sleep(120)
    return fingerprint_page(body, url, encoding, **options)  # type: ignore[arg-type]
