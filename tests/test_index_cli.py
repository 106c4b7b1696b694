"""``scrapy-simhash index ...`` run as a real subprocess against a real index directory."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scrapy_simhash import SimhashIndex, to_base32, to_hex
from scrapy_simhash.fingerprint.minhash import MinHash
from scrapy_simhash.index import open_index
from scrapy_simhash.page import fingerprint_page

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


# -- verified mode: sketches in query, export and stats ------------------------------------------


def _sketch(seed: int) -> MinHash:
    return MinHash(np.random.default_rng(seed).integers(0, 2**32, size=128, dtype=np.uint32))


@pytest.fixture
def verified_dir(tmp_path: Path) -> Path:
    """Two pages with sketches (the second 16 bits away, sharing 3/4 of the values), one without."""
    path = tmp_path / "vx"
    first = _sketch(1)
    near = first.values.copy()
    near[96:] ^= 1
    with open_index(path) as index:
        index.add(BASE, "https://a.example/1", {"date": "2024-01-01"}, sketch=first)
        index.add(BASE ^ 0xFFFF, "https://a.example/edited", sketch=MinHash(near))
        index.add(BASE ^ 0b1, "https://legacy.example/old")
    return path


def test_query_with_a_sketch_prints_distance_and_similarity(verified_dir: Path) -> None:
    result = cli(
        "query", str(verified_dir), to_hex(BASE), "--minhash", _sketch(1).to_text(), "--format", "json"
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    assert [(m["key"], m["distance"], m["similarity"]) for m in record["matches"]] == [
        ("https://a.example/1", 0, 1.0),
        # 16 bits: only the sketch finds it; 96/128 equal bytes, less the 1/256 chance: 191/255
        ("https://a.example/edited", 16, 191 / 255),
        ("https://legacy.example/old", 1, None),  # stored without sketch: by simhash
    ]
    assert record["minhash"] == _sketch(1).to_text()
    text = cli("query", str(verified_dir), to_hex(BASE), "--minhash", _sketch(1).to_text())
    assert text.returncode == 0, text.stderr
    assert "3 matches" in text.stdout
    assert "  16\t0.7490\t" in text.stdout
    assert "1\t-\t" in text.stdout
    # without a sketch every page is judged by simhash; --mode simhash ignores a sketch given
    plain = cli("query", str(verified_dir), to_hex(BASE), "--format", "json")
    assert [m["key"] for m in json.loads(plain.stdout)["matches"]] == [
        "https://a.example/1",
        "https://legacy.example/old",
    ]
    simhash_mode = cli(
        "query",
        str(verified_dir),
        to_hex(BASE),
        "--minhash",
        _sketch(1).to_text(),
        "--mode",
        "simhash",
        "--format",
        "json",
    )
    matches = json.loads(simhash_mode.stdout)["matches"]
    assert [(m["key"], m["similarity"]) for m in matches] == [
        ("https://a.example/1", None),
        ("https://legacy.example/old", None),
    ]


def test_query_an_html_file_fingerprinted_with_its_sketch(tmp_path: Path, corpus: Path) -> None:
    html = gzip.decompress(sorted((corpus / "pages" / "scrapinghub-aeb").glob("*.html.gz"))[0].read_bytes())
    page = fingerprint_page(html)
    assert page.simhash is not None and page.minhash is not None
    path = tmp_path / "ix"
    with open_index(path) as index:
        index.add(page.simhash, "https://original.example/", sketch=page.minhash)
    copy = tmp_path / "copy.html"
    copy.write_bytes(html.replace(b"</body>", b"<p>One more comment appended below the article.</p></body>"))
    result = cli("query", str(path), "--html", str(copy), "--format", "json")
    assert result.returncode == 0, result.stderr
    (match,) = json.loads(result.stdout)["matches"]
    assert match["key"] == "https://original.example/" and 0.5 <= match["similarity"] <= 1.0
    text = cli("query", str(path), "--html", str(copy))
    assert text.returncode == 0 and f"{copy}: 1 match" in text.stdout


def test_export_writes_the_sketch_beside_the_simhash(verified_dir: Path) -> None:
    result = cli("export", str(verified_dir))
    assert result.returncode == 0, result.stderr
    records = {r["key"]: r for r in map(json.loads, result.stdout.splitlines())}
    first = records["https://a.example/1"]
    assert first["simhash_hex"] == to_hex(BASE) and first["minhash_scheme"] == "minhash-doc/1"
    # the values the index keeps: the low 8 bits of each (the default rule's value_bits)
    assert first["minhash_bits"] == 8
    assert np.array_equal(MinHash.from_text(first["minhash"]).values, _sketch(1).values & 0xFF)
    assert "minhash" not in records["https://legacy.example/old"]


def test_stats_count_pages_without_sketch(verified_dir: Path, index_dir: Path) -> None:
    stats = json.loads(cli("stats", str(verified_dir)).stdout)
    assert stats["size"] == 3 and stats["mode"] == "verified" and stats["without_sketch"] == 1
    assert stats["value_bits"] == 8 and stats["sketches"]["value_bits"] == 8
    legacy = cli("stats", str(index_dir))  # an index written without sketches (SimhashIndex): every page
    assert legacy.returncode == 0, legacy.stderr
    assert json.loads(legacy.stdout)["without_sketch"] == 3
    assert "without_sketch" not in json.loads(cli("stats", str(verified_dir), "--mode", "simhash").stdout)


def test_sketch_arguments_are_checked(verified_dir: Path) -> None:
    two = cli("query", str(verified_dir), to_hex(BASE), to_hex(BASE ^ 1), "--minhash", _sketch(1).to_text())
    assert two.returncode == 2 and "exactly one FINGERPRINT" in two.stderr
    bad = cli("query", str(verified_dir), to_hex(BASE), "--minhash", "not a sketch")
    assert bad.returncode == 2 and "not a base64url minhash sketch" in bad.stderr
    nothing = cli("query", str(verified_dir))
    assert nothing.returncode == 2 and "nothing to look up" in nothing.stderr
