"""``scrapy-simhash index ...`` run as a real subprocess against a real index directory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash import SimhashIndex, to_base32, to_hex

BASE = 0x0123456789ABCDEF
ENTRY = "import sys; from scrapy_simhash.cli import main; sys.exit(main())"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ENTRY, "index", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def index_dir(tmp_path: Path) -> Path:
    path = tmp_path / "ix"
    with SimhashIndex(path) as index:
        index.add(BASE, "https://a.example/1", {"date": "2024-01-01"})
        index.add(BASE ^ 0b11, "https://b.example/2")
        index.add(BASE ^ 0xFFFF, "https://c.example/far")
    return path


def test_stats(index_dir: Path) -> None:
    result = cli("stats", str(index_dir))
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["size"] == 3 and stats["k"] == 3 and stats["layout"] == "tiered:4:1:4:1"


def test_query_accepts_base32_and_hex(index_dir: Path) -> None:
    result = cli("query", str(index_dir), to_base32(BASE), to_hex(BASE ^ 0xFFFF), "--format", "json")
    assert result.returncode == 0, result.stderr
    first, second = (json.loads(line) for line in result.stdout.splitlines())
    assert [(m["key"], m["distance"]) for m in first["matches"]] == [
        ("https://a.example/1", 0),
        ("https://b.example/2", 2),
    ]
    assert first["matches"][0]["meta"] == {"date": "2024-01-01"}
    assert [m["key"] for m in second["matches"]] == ["https://c.example/far"]
    text = cli("query", str(index_dir), to_base32(BASE), "-k", "1")
    assert text.returncode == 0 and "1 match" in text.stdout and "https://b.example/2" not in text.stdout


def test_query_while_a_writer_holds_the_index(index_dir: Path) -> None:
    with SimhashIndex(index_dir) as writer:
        writer.add(BASE ^ 1, "https://d.example/new")
        result = cli("query", str(index_dir), to_hex(BASE), "--format", "json")
        assert result.returncode == 0, result.stderr
        assert "https://d.example/new" in result.stdout
        locked = cli("compact", str(index_dir))
        assert locked.returncode == 2 and "open for writing" in locked.stderr


def test_compact_then_export_round_trips(index_dir: Path) -> None:
    result = cli("compact", str(index_dir))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["base"] == 3
    exported = cli("export", str(index_dir))
    assert exported.returncode == 0, exported.stderr
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [r["key"] for r in records] == [
        "https://a.example/1",
        "https://b.example/2",
        "https://c.example/far",
    ]
    assert records[0]["simhash_hex"] == to_hex(BASE) and records[0]["meta"] == {"date": "2024-01-01"}


def test_bad_input_gives_clear_errors(index_dir: Path, tmp_path: Path) -> None:
    bad = cli("query", str(index_dir), "not-a-fingerprint")
    assert bad.returncode == 2 and "error" in bad.stderr
    missing = cli("stats", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no index" in missing.stderr
    too_far = cli("query", str(index_dir), to_hex(BASE), "-k", "5")
    assert too_far.returncode == 2 and "k=3" in too_far.stderr
