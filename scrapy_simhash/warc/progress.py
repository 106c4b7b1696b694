"""A one-line progress display on stderr (records/s), redrawn at most a few times a second.

No dependency: a long reprocessing run should not need tqdm to tell you how far it got.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts records and pages and redraws ``files  records  rec/s  pages`` in place."""

    def __init__(
        self, total_files: int, *, enabled: bool = True, stream: TextIO | None = None, interval: float = 0.25
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.total_files = total_files
        self.interval = interval
        self.files = 0
        self.records = 0
        self.pages = 0
        self.started = time.perf_counter()
        self._drawn = 0.0
        self._width = 0

    @property
    def elapsed(self) -> float:
        return max(time.perf_counter() - self.started, 1e-9)

    @property
    def rate(self) -> float:
        """Records per second since the start."""
        return self.records / self.elapsed

    def update(self, *, records: int = 0, pages: int = 0, files: int = 0) -> None:
        self.records += records
        self.pages += pages
        self.files += files
        now = time.perf_counter()
        if self.enabled and now - self._drawn >= self.interval:
            self._drawn = now
            self._draw()

    def _draw(self) -> None:
        line = (
            f"{self.files}/{self.total_files} files  {self.records} records  "
            f"{self.rate:,.0f} rec/s  {self.pages} pages fingerprinted"
        )
        pad = max(self._width - len(line), 0)
        self._width = len(line)
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()

    def clear(self) -> None:
        """Erase the line (before printing a message, and at the end)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def message(self, text: str) -> None:
        self.clear()
        print(text, file=self.stream)
