"""``scrapy-simhash fingerprint``: gzipped pages are read, HTML hashed as text gets a warning, every
option has help. Run as a user runs it: the ``scrapy-simhash`` script pip installed beside the
interpreter, in a child process (and ``python -m scrapy_simhash``, the same command)."""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash import __version__
from scrapy_simhash.cli import build_parser

SCRIPT = Path(sys.executable).parent / "scrapy-simhash"
"""The console script of the environment the tests run in (``pip install`` puts it beside python)."""


def _run(command: list[str], stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    proc = subprocess.run(command, input=stdin, capture_output=True, timeout=120, env=environment)
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, proc.stdout.decode(), proc.stderr.decode("utf-8", "replace")
    )


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"{SCRIPT} is missing: install the package (make install)"
    return _run([str(SCRIPT), "fingerprint", *args], stdin)


def test_python_dash_m_scrapy_simhash_is_the_same_command(tmp_path: Path) -> None:
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog by the river bank")
    module = _run([sys.executable, "-m", "scrapy_simhash", "fingerprint", str(text)])
    assert (module.returncode, module.stderr) == (0, "")
    assert module.stdout == cli(str(text)).stdout != ""
    version = _run([sys.executable, "-m", "scrapy_simhash", "--version"])
    assert version.stdout == f"scrapy-simhash {__version__}\n"
    missing = _run([sys.executable, "-m", "scrapy_simhash", "fingerprint", str(tmp_path / "missing.txt")])
    assert missing.returncode == 2 and "scrapy-simhash fingerprint: error" in missing.stderr


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
