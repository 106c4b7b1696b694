"""Every ``scrapy-simhash`` run builds the whole parser (each command's options): what the commands
themselves need is imported when one of them runs, not by every run."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

HEAVY = {"numpy", "scrapy_simhash.index", "scrapy_simhash.warc.cdxj", "scrapy_simhash.warc.write.writer"}
"""Modules no command's options need: numpy and the index (``index``), the CDXJ indexer and the WARC
writer (``cdxj``)."""


def test_building_the_parser_imports_no_command_s_implementation() -> None:
    assert all(importlib.util.find_spec(name) for name in HEAVY)  # a renamed module would pass unseen
    code = "import sys\nfrom scrapy_simhash.cli import build_parser\nbuild_parser()\nprint(*sys.modules)"
    environment = {name: value for name, value in os.environ.items() if not name.startswith("PYTEST_")}
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=environment
    )
    assert run.returncode == 0, run.stderr
    loaded = set(run.stdout.split())
    assert "scrapy_simhash.cli.index" in loaded and "scrapy_simhash.cli.cdxj" in loaded
    assert HEAVY & loaded == set()
