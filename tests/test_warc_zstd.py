"""``Content-Encoding: zstd``: decoded within the body-size cap, and never passed on silently when no
zstd module is installed (the page is reported, naming the extra to install)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scrapy_simhash.warc.read.payload import BodyTooLarge, decode_content
from scrapy_simhash.warc.records import http_head, response_record, warc_date
from scrapy_simhash.warc.write.writer import gzip_member

try:
    from compression import zstd  # type: ignore[import-not-found]  # Python 3.14+
except ImportError:
    from backports import zstd  # type: ignore[import-not-found,no-redef]  # the zstd extra, a test dependency

SCRIPT = Path(sys.executable).parent / "scrapy-simhash"
ARTICLE = (
    "<html><head><title>Zstd</title></head><body><article><p>"
    + " ".join(f"sentence {n} of an article served with zstd content coding." for n in range(60))
    + "</p></article></body></html>"
).encode()


def _zstd_warc(path: Path) -> Path:
    head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html"), ("Content-Encoding", "zstd")])
    path.write_bytes(
        gzip_member(
            response_record("https://example.org/z", warc_date(), head, zstd.compress(ARTICLE)).to_bytes()
        )
    )
    return path


def test_zstd_bodies_are_decoded_within_the_cap() -> None:
    assert decode_content(zstd.compress(ARTICLE), "zstd") == ARTICLE
    with pytest.raises(BodyTooLarge):
        decode_content(zstd.compress(bytes(64 << 20)), "zstd", limit=1 << 20)


def test_tag_fingerprints_a_zstd_encoded_record(tmp_path: Path) -> None:
    warc = _zstd_warc(tmp_path / "zstd.warc.gz")
    run = subprocess.run(
        [str(SCRIPT), "tag", "--no-progress", "--workers", "1", str(warc)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 fingerprinted" in run.stdout


HIDE_ZSTD = (
    "import sys\n"
    "for name in ('compression.zstd', 'backports.zstd', 'zstandard'):\n"
    "    sys.modules[name] = None  # as if not installed\n"
    "from scrapy_simhash.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_without_a_zstd_module_the_page_is_reported_with_the_module_to_install(tmp_path: Path) -> None:
    warc = _zstd_warc(tmp_path / "zstd.warc.gz")
    run = subprocess.run(
        [sys.executable, "-c", HIDE_ZSTD, "tag", "--no-progress", "--workers", "1", str(warc)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"skipped: {warc} @ 0: " in run.stderr and "scrapy-simhash[zstd]" in run.stderr
    assert "0 fingerprinted" in run.stdout and "binary" not in run.stdout
    assert (tmp_path / "zstd.warc.gz.simhash.warc.gz.open").is_file()  # redone once zstd is installed
