"""Progress of long runs on stderr: a tqdm bar on a terminal, a plain line every few seconds elsewhere.

``tag``/``dedupe`` show bytes read out of the inputs' total size (so a percentage and an ETA),
records/s, pages fingerprinted and the current file; ``index export``/``compact`` show rows written
or elapsed time. On a terminal the bar is redrawn in place; in CI logs, pipes and files a bar would
be hundreds of ``\\r`` frames, so a plain line with the same figures is printed every
:data:`PLAIN_INTERVAL` seconds and once at the end instead.

tqdm rather than rich: tqdm has no dependencies of its own (rich brings pygments and markdown-it)
and is already installed with the ``warc-fast`` extra (FastWARC requires it); a bar is all we need.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from tqdm import tqdm

from .read.wacz import archive_size

PLAIN_INTERVAL = 10.0
"""Seconds between plain lines when stderr is not a terminal."""
BAR_INTERVAL = 0.25
"""Seconds between redraws of the bar on a terminal."""


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _interval(interval: float | None, terminal: bool) -> float:
    if interval is not None:
        return interval
    return BAR_INTERVAL if terminal else PLAIN_INTERVAL


def _width(stream: Any) -> dict[str, Any]:
    """tqdm's size options: follow the terminal's size, or 100x20 when it reports none (a
    pseudo-terminal of size 0x0, on which tqdm would draw nothing)."""
    try:
        size = os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):
        size = os.terminal_size((0, 0))
    if size.columns and size.lines:
        return {"dynamic_ncols": True}
    return {"ncols": size.columns or 100, "nrows": size.lines or 20}


def format_bytes(count: float) -> str:
    """``1.2 MB``: decimal units, as tqdm's bar shows them."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(count) < 1000 or unit == "TB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    raise AssertionError("unreachable")


def format_seconds(seconds: float) -> str:
    """``1:02:03`` or ``02:03``, as tqdm shows elapsed and remaining time."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


class Progress:
    """How far ``tag``/``dedupe`` got: files, records (and per second), pages, bytes of total, ETA.

    The pipeline reports records with their offsets and files as they start and end; the size of
    every input is taken up front (:meth:`plan`), so bytes read are ``finished files + offset``.
    """

    def __init__(
        self,
        total_files: int,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float | None = None,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.terminal = is_terminal(self.stream) if terminal is None else terminal
        self.interval = _interval(interval, self.terminal)
        self.total_files = total_files
        self.files = 0
        self.records = 0
        self.pages = 0
        self.total_bytes = 0
        self.current: str | None = None
        self.clock = clock
        """Seconds, for elapsed time and redraw intervals (a test gives its own)."""
        self.started = clock()
        self._sizes: dict[str, int] = {}
        self._done_bytes = 0
        self._position = 0
        self._drawn = self.started if not self.terminal else 0.0  # plain lines: the first after a period
        self._bar: tqdm | None = None
        self._finished = False

    # -- figures ---------------------------------------------------------------------------------

    @property
    def elapsed(self) -> float:
        return max(self.clock() - self.started, 1e-9)

    @property
    def rate(self) -> float:
        """Records per second since the start."""
        return self.records / self.elapsed

    @property
    def bytes_read(self) -> int:
        read = self._done_bytes + self._position
        return min(read, self.total_bytes) if self.total_bytes else read

    @property
    def eta(self) -> float | None:
        """Seconds left at the byte rate so far; None before anything is read or without a total."""
        read = self.bytes_read
        if not read or not self.total_bytes:
            return None
        return self.elapsed * (self.total_bytes - read) / read

    def figures(self) -> str:
        return (
            f"{self.files}/{self.total_files} files  {self.records} records  "
            f"{self.rate:,.0f} rec/s  {self.pages} pages fingerprinted"
        )

    def line(self) -> str:
        """The plain line: every figure, no bar."""
        read = format_bytes(self.bytes_read)
        if self.total_bytes:
            share = 100 * self.bytes_read / self.total_bytes
            read += f" of {format_bytes(self.total_bytes)} ({share:.0f}%)"
        eta = self.eta
        text = f"{self.figures()}  {read}  elapsed {format_seconds(self.elapsed)}"
        if eta is not None and not self._finished:
            text += f"  ETA {format_seconds(eta)}"
        if self.current and not self._finished:
            text += f"  {os.path.basename(self.current)}"
        return text

    # -- reports from the pipeline ---------------------------------------------------------------

    def plan(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Take the size of every input up front: the total that bytes read are shown out of."""
        for path in paths:
            try:
                self._sizes[os.fspath(path)] = archive_size(path)
            except OSError:  # missing or unreadable: reported by the reader, counts 0 here
                self._sizes[os.fspath(path)] = 0
        self.total_bytes = sum(self._sizes.values())

    def file_started(self, path: str | os.PathLike[str]) -> None:
        self.current = os.fspath(path)
        self._position = 0

    def file_done(self, path: str | os.PathLike[str]) -> None:
        """A file read to its end: all its bytes count as read."""
        self._done_bytes += self._sizes.get(os.fspath(path), 0)
        self._position = 0
        self.current = None
        self._tick()

    def file_skipped(self, path: str | os.PathLike[str]) -> None:
        """A file passed over (its sidecar is complete): out of the total, so the ETA counts only
        what is really read."""
        self.total_bytes -= self._sizes.pop(os.fspath(path), 0)
        self._tick()

    def update(self, *, records: int = 0, pages: int = 0, files: int = 0, offset: int | None = None) -> None:
        self.records += records
        self.pages += pages
        self.files += files
        if offset is not None:
            self._position = offset
        self._tick()

    # -- display ---------------------------------------------------------------------------------

    def _tick(self) -> None:
        if not self.enabled or self._finished:
            return
        now = self.clock()
        if now - self._drawn >= self.interval:
            self._drawn = now
            self._draw()

    def _draw(self) -> None:
        if not self.terminal:
            self._print("progress: " + self.line())
            return
        if self._bar is None:
            self._bar = tqdm(
                total=self.total_bytes or None,
                desc=os.path.basename(self.current or ""),
                unit="B",
                unit_scale=True,
                file=self.stream,
                leave=False,
                mininterval=0,
                miniters=0,
                smoothing=0,  # the average rate: the same ETA as the plain line
                **_width(self.stream),
            )
        self._bar.n = self.bytes_read
        self._bar.set_description_str(os.path.basename(self.current or ""), refresh=False)
        self._bar.set_postfix_str(
            f"{self.files}/{self.total_files} files, {self.records:,} records ({self.rate:,.0f}/s), "
            f"{self.pages:,} pages",
            refresh=False,
        )
        self._bar.refresh()

    def _print(self, text: str) -> None:
        print(text, file=self.stream)
        self.stream.flush()

    def message(self, text: str) -> None:
        """Print a line (a reading problem) without mixing it into the bar."""
        if self._bar is not None:
            self._bar.clear()
        self._print(text)
        if self._bar is not None:
            self._bar.refresh()

    def clear(self) -> None:
        """At the end: erase the bar from the terminal, or print the final plain line."""
        if not self.enabled or self._finished:
            return
        if self._bar is not None:
            self._draw()  # the final figures, then erased: the summary follows on a clean line
            self._bar.close()
            self._bar = None
            self._finished = True
        else:
            self._finished = True
            if not self.terminal:
                self._print("progress: done: " + self.line())


class RowProgress:
    """Rows written by a long index operation (``index export``): out of a total when it is known."""

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float | None = None,
        terminal: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.label = label
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.terminal = is_terminal(self.stream) if terminal is None else terminal
        self.interval = _interval(interval, self.terminal)
        self.rows = 0
        self.clock = clock
        """Seconds, for elapsed time and redraw intervals (a test gives its own)."""
        self.started = clock()
        self._drawn = self.started
        self._bar: tqdm | None = None
        if enabled and self.terminal:
            self._bar = tqdm(
                total=total, desc=label, unit="rows", unit_scale=True, file=self.stream, leave=False,
                mininterval=self.interval, **_width(self.stream),
            )  # fmt: skip

    def line(self) -> str:
        elapsed = self.clock() - self.started
        done = f"{self.rows:,}" + (f" of {self.total:,}" if self.total is not None else "")
        return f"{self.label}: {done} rows, elapsed {format_seconds(elapsed)}"

    def update(self, rows: int = 1) -> None:
        self.rows += rows
        if self._bar is not None:
            self._bar.update(rows)
        elif self.enabled and not self.terminal:
            now = self.clock()
            if now - self._drawn >= self.interval:
                self._drawn = now
                print(self.line(), file=self.stream, flush=True)

    def close(self, finished: bool = True) -> None:
        if self._bar is not None:
            self._bar.refresh()  # the final count, then erased
            self._bar.close()
            self._bar = None
        elif self.enabled and not self.terminal:
            print(self.line() + (", done" if finished else ", stopped"), file=self.stream, flush=True)
            self.enabled = False

    def wrap(self, items: Iterable[Any]) -> Iterator[Any]:
        """Yield ``items``, counting each; closes at the end (or on an error: "stopped")."""
        try:
            for item in items:
                yield item
                self.update()
        except BaseException:
            self.close(finished=False)
            raise
        self.close()


@contextmanager
def elapsed_spinner(
    label: str,
    *,
    enabled: bool = True,
    stream: TextIO | None = None,
    interval: float | None = None,
    terminal: bool | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Iterator[None]:
    """Show that a step without progress figures (``index compact``) is still running, and for how long.

    A thread redraws ``label - spinner elapsed`` on a terminal, or prints a plain line every
    :data:`PLAIN_INTERVAL` seconds elsewhere; the step itself runs in the caller's thread. ``clock``:
    seconds, for the elapsed time shown (a test gives its own).
    """
    stream = stream or sys.stderr
    if not enabled:
        yield
        return
    on_terminal = is_terminal(stream) if terminal is None else terminal
    every = _interval(interval, on_terminal)
    started = clock()
    stop = threading.Event()
    bar = (
        tqdm(
            total=None, file=stream, leave=False, bar_format="{desc} {elapsed}", desc=label, **_width(stream)
        )
        if on_terminal
        else None
    )

    def run() -> None:
        frames = "|/-\\"
        turn = 0
        while not stop.wait(every):
            turn += 1
            if bar is not None:
                bar.set_description_str(f"{label} {frames[turn % len(frames)]}", refresh=True)
            else:
                elapsed = format_seconds(clock() - started)
                print(f"{label}: running, elapsed {elapsed}", file=stream, flush=True)

    thread = threading.Thread(target=run, name="progress-spinner", daemon=True)
    thread.start()
    outcome = "stopped"
    try:
        yield
        outcome = "done"
    finally:
        stop.set()
        thread.join()
        if bar is not None:
            bar.close()
        else:
            elapsed = format_seconds(clock() - started)
            print(f"{label}: {outcome}, elapsed {elapsed}", file=stream, flush=True)
