"""Progress of ``tag``/``dedupe`` and ``index export``/``compact``, run as real processes.

stderr a pipe: plain lines, no carriage returns or ANSI codes; stderr a pseudo-terminal (``pty``): a
tqdm bar; ``--no-progress``: nothing. The summary on stdout is the same either way.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scrapy_simhash import SimhashIndex
from scrapy_simhash.warc.pipeline import Options, Pipeline
from scrapy_simhash.warc.progress import Progress, RowProgress, elapsed_spinner, format_bytes, format_seconds
from scrapy_simhash.warc.read.inputs import plan_inputs
from scrapy_simhash.warc.reprocess import tag

ENTRY = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"
SMALL = ["resiliparse/warcfile.warc", "resiliparse/warcfile.warc.gz"]
FINAL = re.compile(
    r"progress: done: (\d+)/(\d+) files  (\d+) records  [\d,]+ rec/s  (\d+) pages fingerprinted  "
    r"(\S+ \S+) of (\S+ \S+) \((\d+)%\)  elapsed \d\d:\d\d$"
)


def command(*args: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, *args]


def run_piped(args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)


def run_on_terminal(args: list[str], tmp_path: Path, size: tuple[int, int] | None) -> tuple[int, str, str]:
    """Run with stderr a pseudo-terminal of ``size`` (rows, columns; None: 0x0, as some terminals
    report); returns (status, stdout, what reached the terminal)."""
    master, slave = pty.openpty()
    if size is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", size[0], size[1], 0, 0))
    out_path = tmp_path / "stdout.txt"
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=slave)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    status = proc.wait(timeout=300)
    return status, out_path.read_text(), b"".join(chunks).decode("utf-8", "replace")


@pytest.fixture
def inputs(corpus: Path, tmp_path: Path) -> list[Path]:
    """Two small corpus files (read in place) and a truncated copy (a reading problem to report)."""
    damaged = tmp_path / "truncated.warc.gz"
    data = (corpus / "warcs" / SMALL[1]).read_bytes()
    damaged.write_bytes(data[: len(data) // 2])
    return [corpus / "warcs" / name for name in SMALL] + [damaged]


def _summary(stdout: str) -> str:
    return re.sub(r"\([\d,]+/s\)", "(N/s)", stdout)  # the only figure that depends on timing


def test_piped_stderr_gets_plain_lines_with_the_totals(inputs: list[Path], tmp_path: Path) -> None:
    result = run_piped(command("tag", *map(str, inputs), "--out", str(tmp_path / "out"), "--workers", "1"))
    assert result.returncode == 1, result.stderr  # the truncated copy: its last record clipped, a loss
    assert "\r" not in result.stderr and "\x1b" not in result.stderr
    final = result.stderr.splitlines()[-1]
    match = FINAL.match(final)
    assert match, final
    files, total_files, records, pages, read, total, share = match.groups()
    assert (files, total_files, share) == ("3", "3", "100")
    assert read == total == format_bytes(sum(p.stat().st_size for p in inputs))
    summary = result.stdout.splitlines()
    assert summary[0] == "files: 3 processed, 0 already complete"
    assert re.match(rf"records: {records} read \([\d,]+/s\), \d+ HTML, {pages} fingerprinted", summary[1])
    assert re.search(r"^skipped: .*truncated\.warc\.gz", result.stderr, re.M)  # problems still shown


def test_a_resumed_run_counts_only_the_bytes_it_reads(inputs: list[Path], tmp_path: Path) -> None:
    """Inputs whose sidecar is complete leave the total: no 100% at once, no ETA from skipped bytes."""
    out = str(tmp_path / "out")
    assert run_piped(command("tag", str(inputs[0]), "--out", out, "--workers", "1")).returncode == 0
    resumed = run_piped(command("tag", *map(str, inputs[:2]), "--out", out, "--workers", "1"))
    match = FINAL.match(resumed.stderr.splitlines()[-1])
    assert match, resumed.stderr
    assert match.group(1, 2) == ("2", "2")
    assert match.group(5) == match.group(6) == format_bytes(inputs[1].stat().st_size)


def test_dedupe_piped_ends_with_the_same_plain_line(inputs: list[Path], tmp_path: Path) -> None:
    report = tmp_path / "report.jsonl"
    result = run_piped(command("dedupe", *map(str, inputs[:2]), "--report", str(report), "--workers", "1"))
    assert result.returncode == 0, result.stderr
    match = FINAL.match(result.stderr.splitlines()[-1])
    assert match and match.group(1, 2, 7) == ("2", "2", "100"), result.stderr
    assert "\r" not in result.stderr and "\x1b" not in result.stderr


@pytest.mark.parametrize("size", [(30, 120), None], ids=["120x30", "0x0"])
def test_terminal_gets_a_bar_and_the_same_summary(
    inputs: list[Path], tmp_path: Path, size: tuple[int, int] | None
) -> None:
    args = ["tag", *map(str, inputs), "--workers", "1"]
    piped = run_piped(command(*args, "--out", str(tmp_path / "piped")))
    status, stdout, terminal = run_on_terminal(command(*args, "--out", str(tmp_path / "tty")), tmp_path, size)
    assert status == piped.returncode == 1  # the truncated copy's clipped record is a loss
    assert "\r" in terminal
    assert re.search(r"100%\|", terminal), terminal  # the bar's last frame, before it is erased
    assert "3/3 files" in terminal
    assert "progress:" not in terminal  # no plain lines on a terminal
    # the reading problem is printed on a line of its own above the bar, not into it
    assert re.search(r"(^|[\r\n])note: [^\r\n]*truncated\.warc\.gz[^\r\n]*\r\n", terminal)
    assert terminal.rstrip(" ").endswith("\r")  # the bar is erased: the terminal is left clean
    assert _summary(stdout) == _summary(piped.stdout)


def test_no_progress_silences_both(inputs: list[Path], tmp_path: Path) -> None:
    args = ["tag", *map(str, inputs[:2]), "--workers", "1", "--no-progress"]
    piped = run_piped(command(*args, "--out", str(tmp_path / "piped")))
    assert piped.returncode == 0 and piped.stderr == ""
    status, _, terminal = run_on_terminal(command(*args, "--out", str(tmp_path / "tty")), tmp_path, (30, 120))
    assert status == 0 and terminal == ""


def test_plain_lines_are_periodic_and_their_figures_only_grow(corpus: Path, tmp_path: Path) -> None:
    """With a period of 0 every record prints a line: each is plain, bytes never pass the total."""
    paths = [corpus / "warcs" / name for name in SMALL]
    stream = io.StringIO()
    progress = Progress(len(paths), stream=stream, interval=0, terminal=False)
    for _event in Pipeline(Options(workers=1), progress).run(plan_inputs(paths, tmp_path)):
        pass
    progress.clear()
    lines = stream.getvalue().splitlines()
    total = sum(p.stat().st_size for p in paths)
    assert len(lines) > 50 and all(line.startswith("progress: ") for line in lines)
    records = [int(re.search(r"(\d+) records", line).group(1)) for line in lines]  # type: ignore[union-attr]
    shares = [int(re.search(r"\((\d+)%\)", line).group(1)) for line in lines]  # type: ignore[union-attr]
    assert records == sorted(records) and shares == sorted(shares)
    assert progress.bytes_read == progress.total_bytes == total
    assert lines[-1].startswith("progress: done: ") and "(100%)" in lines[-1]
    assert any("ETA" in line and "warcfile.warc" in line for line in lines[:-1])  # current file, time left


def test_tag_without_a_terminal_keeps_quiet_until_the_end(corpus: Path, tmp_path: Path) -> None:
    """The default period (10 s) is longer than this run: a single line, at the end."""
    stream = io.StringIO()
    summary = tag(plan_inputs([corpus / "warcs" / SMALL[0]], tmp_path), Options(progress=True), stream=stream)
    [line] = stream.getvalue().splitlines()
    assert FINAL.match(line) and f" {summary.records} records " in line


@given(st.integers(min_value=0, max_value=10**15))
def test_format_bytes_is_short_and_in_decimal_units(count: int) -> None:
    text = format_bytes(count)
    number, unit = text.split(" ")
    assert unit in ("B", "kB", "MB", "GB", "TB")
    factor = 1000 ** ("B", "kB", "MB", "GB", "TB").index(unit)
    assert abs(float(number) * factor - count) <= 0.05 * factor + 0.5


@given(st.integers(min_value=0, max_value=10**7))
def test_format_seconds_reads_back(seconds: int) -> None:
    parts = [int(p) for p in format_seconds(seconds).split(":")]
    assert sum(p * 60**i for i, p in enumerate(reversed(parts))) == seconds


# -- index export / compact -------------------------------------------------------------------


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    path = tmp_path / "ix"
    with SimhashIndex(path) as index:
        for i in range(1, 201):
            index.add(i * 0x9E3779B97F4A7C15 % 2**64 or 1, f"https://e.test/{i}")
    return path


def test_index_export_piped_reports_rows_written(index_dir: Path) -> None:
    result = run_piped(command("index", "export", str(index_dir)))
    assert result.returncode == 0, result.stderr
    assert len([json.loads(line) for line in result.stdout.splitlines()]) == 200
    assert re.fullmatch(r"export: 200 of 200 rows, elapsed \d\d:\d\d, done\n", result.stderr)
    quiet = run_piped(command("index", "export", str(index_dir), "--no-progress"))
    assert quiet.stdout == result.stdout and quiet.stderr == ""


class StepClock:
    """A clock the test moves: ``now`` seconds, read by the progress display instead of time."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_plain_row_lines_show_the_elapsed_time_of_the_clock_and_come_every_interval() -> None:
    clock = StepClock()
    stream = io.StringIO()
    rows = RowProgress("export", 5, stream=stream, terminal=False, clock=clock)
    for step in (4, 7, 2):  # 4 s, then 11 s (a line: 10 s since the start), then 13 s
        clock.now += step
        rows.update()
    clock.now += 3661 - 13
    rows.close()
    assert (
        stream.getvalue()
        == "export: 2 of 5 rows, elapsed 00:11\nexport: 3 of 5 rows, elapsed 1:01:01, done\n"
    )


def test_rows_that_stop_on_an_error_say_stopped_not_done() -> None:
    clock = StepClock()

    def rows() -> Iterator[int]:
        yield 1
        clock.now += 3
        yield 2
        clock.now += 62
        raise OSError("disk gone")

    stream = io.StringIO()
    with pytest.raises(OSError):
        for _row in RowProgress("export", 5, stream=stream, terminal=False, clock=clock).wrap(rows()):
            pass
    assert stream.getvalue() == "export: 2 of 5 rows, elapsed 01:05, stopped\n"
    stream = io.StringIO()
    with pytest.raises(KeyError), elapsed_spinner("compacting", stream=stream, terminal=False, clock=clock):
        clock.now += 125
        raise KeyError("x")
    assert stream.getvalue() == "compacting: stopped, elapsed 02:05\n"
    stream = io.StringIO()
    with elapsed_spinner("compacting", stream=stream, terminal=False, clock=clock):
        clock.now += 7
    assert stream.getvalue() == "compacting: done, elapsed 00:07\n"


def test_index_export_and_compact_on_a_terminal(index_dir: Path, tmp_path: Path) -> None:
    export = command("index", "export", str(index_dir))
    status, stdout, terminal = run_on_terminal(export, tmp_path, (30, 120))
    assert status == 0 and len(stdout.splitlines()) == 200
    assert "\r" in terminal and "export" in terminal and "200/200" in terminal
    status, stdout, terminal = run_on_terminal(command("index", "compact", str(index_dir)), tmp_path, None)
    assert status == 0 and json.loads(stdout)["size"] == 200
    assert "\r" in terminal and "compacting 200 fingerprints" in terminal


def test_index_compact_piped_says_it_is_done(index_dir: Path) -> None:
    result = run_piped(command("index", "compact", str(index_dir)))
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"compacting 200 fingerprints: done, elapsed \d\d:\d\d\n", result.stderr)
    quiet = run_piped(command("index", "compact", str(index_dir), "--no-progress"))
    assert quiet.returncode == 0 and quiet.stderr == ""
