"""``make demo``: installs the package alone, once (a stamp in the venv, redone when pyproject.toml changes);
``make test`` installs the system packages before the test extra; and the demo
says why its table has more rows than the site has pages."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _make_n(target: str, venv: Path) -> str:
    """What ``make`` would run (``-n``: nothing is run) with ``venv`` as the virtual environment."""
    proc = subprocess.run(
        ["make", "-n", "-C", str(REPO), target, f"VENV={venv}"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    return venv


def _pip_line(commands: str) -> str:
    return next(line for line in commands.splitlines() if "pip install" in line and "-e " in line)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_demo_installs_the_package_alone_once_and_again_when_pyproject_changes(venv: Path) -> None:
    first = _make_n("demo", venv)
    assert "installing scrapy-simhash" in first  # says what it does
    line = _pip_line(first)
    assert " -q" not in line and "-e ." in line and "[test]" not in line  # progress shows; no test tools
    assert "install-system-deps" not in first  # the demo needs no Debian packages
    stamp = venv / ".installed-core"
    stamp.touch()
    again = _make_n("demo", venv)
    assert "pip install" not in again and "example_project/demo.py" in again
    old = (REPO / "pyproject.toml").stat().st_mtime - 10
    os.utime(stamp, (old, old))  # pyproject.toml is now newer than the install
    assert "pip install" in _make_n("demo", venv)


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_test_installs_the_system_packages_before_building_the_extensions(venv: Path) -> None:
    """The C extensions are built by the editable install: a compiler must be there first."""
    commands = _make_n("test", venv)
    assert '".[test]"' in _pip_line(commands)
    assert commands.index("install-system-deps") < commands.index(_pip_line(commands))
    (venv / ".installed").touch()
    again = _make_n("test", venv)
    assert '".[test]"' not in again and "pytest" in again  # installed once


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One run of the demo (a crawl of its local site), read by the tests below."""
    out = tmp_path_factory.mktemp("demo") / "out"
    proc = subprocess.run(
        [sys.executable, str(REPO / "example_project" / "demo.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_the_demo_explains_the_extra_rows(demo: subprocess.CompletedProcess[str]) -> None:
    served = int(re.search(r"Serving (\d+) pages", demo.stdout)[1])
    table = demo.stdout.split("near-duplicate of\n", 1)[1].split("\n\n", 1)[0].splitlines()
    variants = [line for line in table if "?utm_source=" in line]
    assert variants and len(table) == served + len(variants)
    note = re.search(r"(\d+) rows for the (\d+) pages the site serves: (\d+) link", demo.stdout)
    assert note and tuple(map(int, note.groups())) == (len(table), served, len(variants))
    assert "tracking parameters" in demo.stdout and "separate page" in demo.stdout
    for line in variants:  # each variant is caught as a near-duplicate of the URL without the parameters
        url, _, similarity, bits, original = line.split()
        assert original == url.split("?")[0] and (similarity, bits) == ("100%", "0")


def _demo_rows(stdout: str) -> dict[str, list[str]]:
    table = stdout.split("near-duplicate of\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return {line.split()[0]: line.split()[1:] for line in table}


def test_the_demo_catches_an_edit_and_appended_comments_and_shows_the_similarity(
    demo: subprocess.CompletedProcess[str],
) -> None:
    """The planted one-sentence edit and appended-comments copies are caught by the default (verified)
    rule though their simhashes are more than 3 bits off; different articles of one template are not."""
    rows = _demo_rows(demo.stdout)
    for kind in ("corrected", "comments"):
        planted = {path: cells for path, cells in rows.items() if f"-{kind}.html" in path}
        assert len(planted) >= 2, kind
        for path, cells in planted.items():
            _, similarity, bits, original = cells
            assert original == path.replace(f"-{kind}", "")  # the article it was made from
            assert similarity.endswith("%") and 50 <= int(similarity[:-1]) < 100
            assert int(bits) > 3  # simhash alone (k = 3) would miss it
    for path, cells in rows.items():  # each page is caught against its own article only
        story = re.search(r"story-\d+", path)
        if len(cells) == 4:
            assert story and story[0] in cells[3], (path, cells)
    assert "Different articles share one template: none is a near-duplicate of another." in demo.stdout
