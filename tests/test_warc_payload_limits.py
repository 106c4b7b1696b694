"""Decompression bombs: content decoding is streamed and stops at the body-size cap (``too_large``).

The bombs are real: gigabytes of zeros compressed, incrementally, to a few kilobytes or a megabyte,
inside real WARC files that ``scrapy-simhash tag`` reads in a subprocess whose peak memory is measured.
"""

from __future__ import annotations

import gzip
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_simhash.warc.read.payload import BodyTooLarge, HttpMessage, decode_content, decoded_body
from scrapy_simhash.warc.records import http_head, response_record, warc_date
from scrapy_simhash.warc.write.writer import gzip_member

try:
    import brotli
except ImportError:  # pragma: no cover - brotli is a test dependency
    brotli = None

GIB = 1 << 30
MIB = 1 << 20
HTML = (
    b"<html><head><title>A page</title></head><body><article>"
    + b" ".join(b"word%d" % i for i in range(400))
    + b"</article></body></html>"
)


def _zeros_compressed(size: int, compress: Callable[[bytes], bytes], finish: Callable[[], bytes]) -> bytes:
    """``size`` zero bytes compressed a megabyte at a time: the gigabytes never exist in memory."""
    chunk = bytes(MIB)
    return b"".join([*(compress(chunk) for _ in range(size // MIB)), finish()])


def _gzip_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    return _zeros_compressed(size, compressor.compress, compressor.flush)


def _deflate_bomb(size: int) -> bytes:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 15)
    return _zeros_compressed(size, compressor.compress, compressor.flush)


def _brotli_bomb(size: int) -> bytes:
    compressor = brotli.Compressor(quality=5)
    return _zeros_compressed(size, compressor.process, compressor.finish)


def _chunked(body: bytes, size: int = 4096) -> bytes:
    parts = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(f"{len(p):x}\r\n".encode() + p + b"\r\n" for p in parts) + b"0\r\n\r\n"


@pytest.fixture(scope="module")
def bombs() -> dict[str, tuple[list[tuple[str, str]], bytes]]:
    """name -> (HTTP headers, stored body): each decodes to 1 GiB of zeros (``gzip, gzip``: 1.8 KB)."""
    gz = _gzip_bomb(GIB)
    found = {
        "gzip": ([("Content-Encoding", "gzip")], gz),
        "deflate": ([("Content-Encoding", "deflate")], _deflate_bomb(GIB)),
        "gzip-gzip": ([("Content-Encoding", "gzip, gzip")], gzip_member(gz, 9)),
        "chunked-gzip": ([("Transfer-Encoding", "chunked"), ("Content-Encoding", "gzip")], _chunked(gz)),
    }
    if brotli is not None:
        found["br"] = ([("Content-Encoding", "br")], _brotli_bomb(GIB))
    return found


def test_bombs_are_small(bombs: dict) -> None:
    assert len(bombs["gzip-gzip"][1]) < 10_000 and len(bombs["gzip"][1]) < 1_100_000


@pytest.mark.parametrize("name", ["gzip", "deflate", "gzip-gzip", "chunked-gzip", "br"])
def test_decoding_a_bomb_stops_at_the_cap_and_allocates_about_the_cap(bombs: dict, name: str) -> None:
    if name not in bombs:
        pytest.skip("brotli not installed")
    headers, body = bombs[name]
    message = HttpMessage(200, [("Content-Type", "text/html"), *headers], body)
    cap = 2 * MIB
    tracemalloc.start()
    try:
        with pytest.raises(BodyTooLarge):
            decoded_body(message, cap)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # the decoder's output never passes cap + 1 byte; bytearray growth and the final copy are the rest
    assert peak < 4 * cap + 2 * len(body)


@settings(max_examples=60, deadline=None)
@given(
    st.binary(max_size=5000),
    st.integers(1, 6000),
    st.sampled_from(["gzip", "deflate", "raw-deflate", "gzip,gzip", "br"]),
)
def test_under_the_cap_decoding_is_exact_over_it_too_large(data: bytes, cap: int, coding: str) -> None:
    layers = [data]  # what each decoding step produces, the last applied coding first undone
    if coding == "br":
        if brotli is None:
            return
        encoded = brotli.compress(data)
    elif coding == "raw-deflate":
        raw = zlib.compressobj(6, zlib.DEFLATED, -15)
        encoded, coding = raw.compress(data) + raw.flush(), "deflate"
    elif coding == "deflate":
        encoded = zlib.compress(data)
    elif coding == "gzip":
        encoded = gzip.compress(data)
    else:
        inner = gzip.compress(data)
        layers.append(inner)
        encoded = gzip.compress(inner)
    if all(len(layer) <= cap for layer in layers):
        assert decode_content(encoded, coding, cap) == data
    else:  # every layer is capped: no step may produce more than the cap
        with pytest.raises(BodyTooLarge):
            decode_content(encoded, coding, cap)


def test_unknown_or_wrong_codings_still_pass_the_bytes_on() -> None:
    assert decode_content(HTML, "gzip", 100_000) == HTML  # header lies
    assert decode_content(HTML, "compress", 100_000) == HTML  # a coding we do not know
    assert decode_content(gzip.compress(HTML), "identity, gzip", 100_000) == HTML
    truncated = gzip.compress(HTML)[:200]  # a clipped record: what arrived is used
    assert HTML.startswith(decode_content(truncated, "gzip", 100_000))


def _bomb_warc(path: Path, bombs: dict) -> list[str]:
    """A per-record-gzip WARC: a real page, then one response per bomb."""
    uris = []
    with open(path, "wb") as out:
        html_head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html; charset=utf-8")])
        out.write(gzip_member(response_record("http://e.test/page", warc_date(), html_head, HTML).to_bytes()))
        for name, (headers, body) in bombs.items():
            head = http_head("HTTP/1.1 200 OK", [("Content-Type", "text/html"), *headers])
            uri = f"http://e.test/{name}"
            uris.append(uri)
            out.write(gzip_member(response_record(uri, warc_date(), head, body).to_bytes()))
    return uris


_PEAK_RSS = """
import os, subprocess, sys
with open(sys.argv[1], "w") as out, open(sys.argv[2], "w") as err:
    child = subprocess.Popen(sys.argv[3:], stdout=out, stderr=err)
    _, status, usage = os.wait4(child.pid, 0)
print(usage.ru_maxrss, os.waitstatus_to_exitcode(status))
"""
"""Runs a command; prints its peak RSS (KiB, its own and its reaped children's) and its exit status."""


def test_tag_on_bombs_reports_too_large_with_a_peak_memory_far_below_the_bombs(
    bombs: dict, tmp_path: Path
) -> None:
    warc = tmp_path / "bombs.warc.gz"
    _bomb_warc(warc, bombs)
    assert warc.stat().st_size < 4 * MIB
    cli = Path(sys.executable).with_name("scrapy-simhash")
    command = [str(cli), "tag", str(warc), "--out", str(tmp_path / "out"), "--workers", "1", "--no-progress"]
    # Linux carries a process's peak RSS across fork and exec: a child of this (large, late in the
    # suite) pytest process would report pytest's peak. A small Python in between starts tag afresh.
    measured = subprocess.run(
        [sys.executable, "-c", _PEAK_RSS, str(tmp_path / "out.txt"), str(tmp_path / "err.txt"), *command],
        capture_output=True,
        text=True,
        check=True,
    )
    peak_kib, returncode = (int(v) for v in measured.stdout.split())
    summary = (tmp_path / "out.txt").read_text()
    assert returncode == 0, (tmp_path / "err.txt").read_text()
    assert f"too_large {len(bombs)}" in summary and "1 fingerprinted" in summary
    peak_mib = peak_kib / 1024  # KiB on Linux
    # decoded whole, the gzip bomb alone is 1 GiB; capped, the process holds the interpreter,
    # trafilatura and lxml plus a few times the 8 MiB cap
    assert peak_mib < 400, f"peak RSS {peak_mib:.0f} MiB"
