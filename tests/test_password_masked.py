"""A Redis password is never shown: commands, the crawl's log and the report show ``redis://:***@...``.

Against a real redis-server started with ``--requirepass``; the commands and the crawl run as
subprocesses from a clean environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from crawl_support import demo_site, run_crawl
from redis_server import RedisServer

from scrapy_simhash.shown import shown_location

PASSWORD = "s3cr3t-pw"
CLI = Path(sys.executable).with_name("scrapy-simhash")


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("redis://:pw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("redis://alice:pw@host:6380/2?prefix=crawl1", "redis://alice:***@host:6380/2?prefix=crawl1"),
        ("rediss://alice:p%40ss@[::1]:6379/0", "rediss://alice:***@[::1]:6379/0"),
        ("redis://host:6379/0?prefix=a&password=pw", "redis://host:6379/0?prefix=a&password=***"),
        ("redis://:pw@host:notaport/0", "redis://:***@host:notaport/0"),
        ("redis://127.0.0.1:6379/0?prefix=a", "redis://127.0.0.1:6379/0?prefix=a"),
        ("redis://alice@127.0.0.1:6379/0", "redis://alice@127.0.0.1:6379/0"),
        ("/data/crawl-index", "/data/crawl-index"),
        (Path("relative/index"), "relative/index"),
    ],
)
def test_a_location_is_shown_with_its_password_masked_and_nothing_else_changed(location, shown):
    assert shown_location(location) == shown


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = RedisServer(tmp_path_factory.mktemp("redis"), password=PASSWORD).start()
    yield srv
    srv.stop()


def _cli(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return subprocess.run(
        [str(CLI), *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def _never_the_password(done: subprocess.CompletedProcess[str]) -> str:
    out = done.stdout + done.stderr
    assert PASSWORD not in out, out
    return out


def test_commands_never_print_the_password(server, corpus, tmp_path):
    warc = tmp_path / "in" / "warcfile.warc.gz"
    warc.parent.mkdir()
    shutil.copyfile(corpus / "warcs" / "resiliparse" / "warcfile.warc.gz", warc)
    prefix = f"masked-{uuid.uuid4().hex[:8]}"
    uri = f"{server.url}?prefix={prefix}"
    shown = f"redis://:***@127.0.0.1:{server.port}/0?prefix={prefix}"
    assert PASSWORD in uri  # the URI the user gives holds it

    tagged = _cli("tag", warc, "--index", uri, "--workers", "1", "--no-progress", cwd=tmp_path)
    assert tagged.returncode == 0, tagged.stderr
    _never_the_password(tagged)

    # another extractor: refused, naming the index
    refused = _cli(
        "tag", warc, "--index", uri, "--extractor", "resiliparse", "--workers", "1", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert refused.returncode == 2
    assert f"the index {shown} stores pages fingerprinted by the extractor" in _never_the_password(refused)

    # another extractor, mixed as asked: the warning names the index
    mixed = _cli(
        "dedupe", warc, "--index", uri, "--extractor", "resiliparse", "--mix-extractors",
        "--workers", "1", "--no-progress", "--report", tmp_path / "rows.jsonl", cwd=tmp_path,
    )  # fmt: skip
    assert mixed.returncode == 0, mixed.stderr
    assert f"warning: the index at {shown} stores pages made by" in _never_the_password(mixed)

    # a wrong password: the error names the index, not the password given
    wrong = uri.replace(PASSWORD, "not-it") + "&retries=0"
    failed = _cli("tag", warc, "--index", wrong, "--workers", "1", "--no-progress", cwd=tmp_path)
    assert failed.returncode == 2
    assert "not-it" not in failed.stderr
    assert f"cannot open the index redis://:***@127.0.0.1:{server.port}/0?prefix=" in failed.stderr

    info = _cli("index", "info", uri, cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    assert f"index: {shown} (redis)" in _never_the_password(info)

    page = tmp_path / "report.html"
    reported = _cli("report", uri, "-o", page, "--diffs", "0", cwd=tmp_path)
    assert reported.returncode == 0, reported.stderr
    _never_the_password(reported)
    html = page.read_text(encoding="utf-8")
    assert PASSWORD not in html
    assert f"index: {shown}" in html


@pytest.mark.slow  # a Scrapy crawl against the password-protected server, ~5 s
def test_the_crawl_s_log_and_report_never_show_the_password(server, tmp_path):
    uri = f"{server.url}?prefix=crawl-{uuid.uuid4().hex[:8]}"
    report = tmp_path / "crawl-report.html"
    with demo_site.serve(demo_site.build_site(4)) as base:
        done = run_crawl(
            base + "/",
            tmp_path / "crawl",
            {"SIMHASH_INDEX": uri, "SIMHASH_WORKERS": 1, "SIMHASH_REPORT": str(report), "LOG_LEVEL": "INFO"},
        )
    assert done.stat("simhash/computed") > 0
    assert PASSWORD not in done.log
    assert f"simhash: index redis://:***@127.0.0.1:{server.port}/0?prefix=crawl-" in done.log
    html = report.read_text(encoding="utf-8")
    assert PASSWORD not in html and f"redis://:***@127.0.0.1:{server.port}/0" in html
