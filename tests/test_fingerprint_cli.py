"""``scrapy-simhash fingerprint``: gzipped pages are read, HTML hashed as text gets a warning, every
option has help. Run as the real console entry point in a child process."""

from __future__ import annotations

import argparse
import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash.cli import build_parser

ENTRY = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-c", ENTRY, "fingerprint", *args],
        input=stdin,
        capture_output=True,
        timeout=120,
    )
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode("utf-8", "replace")
    )


@pytest.fixture(scope="module")
def page(corpus: Path) -> Path:
    return sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[0]


@pytest.fixture
def plain_page(page: Path, tmp_path: Path) -> Path:
    path = tmp_path / "page.html"
    path.write_bytes(gzip.decompress(page.read_bytes()))
    return path


def test_a_gzipped_page_gives_the_fingerprint_of_the_page(
    page: Path, plain_page: Path, tmp_path: Path
) -> None:
    expected = cli(str(plain_page), "--html")
    assert expected.returncode == 0, expected.stderr
    fingerprint = expected.stdout.strip()
    assert len(fingerprint) == 13
    gzipped = cli(str(page), "--html")
    assert (gzipped.returncode, gzipped.stdout.strip()) == (0, fingerprint), gzipped.stderr
    # told by the magic bytes, not the name, and on standard input too
    renamed = tmp_path / "page.bin"
    renamed.write_bytes(page.read_bytes())
    assert cli(str(renamed), "--html").stdout.strip() == fingerprint
    assert cli("--html", stdin=page.read_bytes()).stdout.strip() == fingerprint
    # without --html a gzipped text file is the text, not its compressed bytes
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog by the river bank")
    zipped = tmp_path / "t.txt.gz"
    zipped.write_bytes(gzip.compress(text.read_bytes()))
    assert cli(str(zipped)).stdout == cli(str(text)).stdout != ""


def test_a_damaged_gzip_file_is_a_clear_error(page: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.html.gz"
    cut.write_bytes(page.read_bytes()[:200])
    proc = cli(str(cut), "--html")
    assert proc.returncode == 2
    assert "cannot be decompressed" in proc.stderr and "Traceback" not in proc.stderr


def test_html_hashed_as_text_gets_a_warning_but_the_same_result(plain_page: Path, tmp_path: Path) -> None:
    proc = cli(str(plain_page))
    assert proc.returncode == 0
    assert "looks like HTML" in proc.stderr and "--html" in proc.stderr
    assert len(proc.stdout.strip()) == 13  # the meaning of the command is unchanged: markup hashed as text
    fragment = tmp_path / "fragment.txt"  # no doctype, but many tags
    fragment.write_text("".join(f"<div><p>paragraph {i}</p></div>\n" for i in range(12)))
    assert "looks like HTML" in cli(str(fragment)).stderr
    with_html = cli(str(plain_page), "--html")
    assert with_html.returncode == 0 and with_html.stderr == ""


def test_plain_text_gets_no_warning(tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("Compare a < b and b > c; the <html> element is the root of a page.\n" * 3)
    proc = cli(str(text))
    assert proc.returncode == 0 and proc.stderr == ""


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[name]


def test_every_fingerprint_option_has_help() -> None:
    parser = _subparser("fingerprint")
    for action in parser._actions:
        assert action.help, f"{action.option_strings or action.dest} has no help text"
    text = parser.format_help()
    assert "json" in text.split("--format", 2)[-1]  # the --format entry explains its choices
