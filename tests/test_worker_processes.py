"""Worker processes end with the crawl or ``tag`` that started them, and never re-run a crawl script.

Real processes throughout: a real crawl (example_project/run_crawl.py) or a real
``scrapy-simhash tag`` in a subprocess, SIGKILLed once its workers exist; then
/proc is read until every process it started (workers, forkserver, resource
tracker) is gone.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from crawl_support import EXAMPLE, REPO, demo_site
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

GRACE = 30.0
"""Seconds the leftovers get to exit after the kill (they take well under one)."""


# -- processes, from /proc ----------------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every live process (zombies count as gone).

    The start time tells a process from a later one that got its pid.
    """
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] not in ("Z", "X"):
            table[int(entry)] = (int(fields[1]), int(fields[19]))
    return table


def _descendants(root: int) -> set[tuple[int, int]]:
    """(pid, start time) of every process under ``root``."""
    table = _processes()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return {(pid, table[pid][1]) for pid in found}


def _still_running(processes: set[tuple[int, int]]) -> set[tuple[int, int]]:
    return processes & {(pid, start) for pid, (_, start) in _processes().items()}


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return "(gone)"


def _poll(condition: Callable[[], bool], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def _kill_and_list_leftovers(process: subprocess.Popen, log: Path, processes: int) -> list[str]:
    """Wait until ``process`` has ``processes`` descendants, SIGKILL it; those still running after GRACE."""
    tree: set[tuple[int, int]] = set()

    def started() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"exited early ({process.returncode}): {log.read_text()[-3000:]}")
        now = _descendants(process.pid)
        tree.update(now)
        return len(now) >= processes

    try:
        _poll(started, 120, f"{processes} processes under {process.pid}")
        time.sleep(1)  # let them all finish starting (the fix must not depend on it, though)
        tree.update(_descendants(process.pid))
        process.kill()
        process.wait()
        deadline = time.monotonic() + GRACE
        while _still_running(tree) and time.monotonic() < deadline:
            time.sleep(0.2)
        return [f"{pid}: {_command(pid)[:200]}" for pid, _ in sorted(_still_running(tree))]
    finally:
        for pid, _ in _still_running(tree):  # do not leave them behind for the other tests
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _start(command: list[str], tmp_path: Path, **env: str) -> tuple[subprocess.Popen, Path]:
    log = tmp_path / "stderr.log"
    with log.open("w") as stderr:
        process = subprocess.Popen(
            command, cwd=tmp_path, env=dict(_env(), **env), stdout=subprocess.DEVNULL, stderr=stderr
        )
    return process, log


def _env() -> dict[str, str]:
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    )


# -- a site that never answers: the crawl waits, its workers idle --------------------------------------


@contextmanager
def _silent_site() -> Iterator[str]:
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the http.server API
            release.wait(300)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        release.set()
        server.shutdown()
        server.server_close()


@linux_only
def test_a_killed_crawl_leaves_no_worker_forkserver_or_resource_tracker(tmp_path: Path) -> None:
    with _silent_site() as url:
        command = [sys.executable, str(EXAMPLE / "run_crawl.py"), url]
        for name, value in {"SIMHASH_WORKERS": 2, "SIMHASH_INDEX": str(tmp_path / "index")}.items():
            command += ["-s", f"{name}={json.dumps(value)}"]
        crawl, log = _start(command, tmp_path)
        # two workers, the forkserver and the resource tracker
        leftovers = _kill_and_list_leftovers(crawl, log, processes=4)
    assert not leftovers, "left running after SIGKILL of the crawl:\n" + "\n".join(leftovers)


@linux_only
def test_a_worker_stuck_in_c_code_holding_the_gil_goes_with_the_crawl(tmp_path: Path) -> None:
    started = tmp_path / "hog-started"
    page = demo_site.Page(b"<html><body><p>HOG-THE-GIL</p></body></html>")
    with demo_site.serve({"/": page}) as base:
        settings = {
            "SIMHASH_WORKERS": 1,
            "SIMHASH_INDEX": str(tmp_path / "index"),
            "SIMHASH_TIMEOUT": 3600,  # the pool must not replace the worker itself
            "SIMHASH_FINGERPRINT_FUNCTION": "worker_gil_hog.fingerprint",
        }
        command = [sys.executable, str(EXAMPLE / "run_crawl.py"), base + "/"]
        for name, value in settings.items():
            command += ["-s", f"{name}={json.dumps(value)}"]
        crawl, log = _start(command, tmp_path, GIL_HOG_STARTED=str(started))
        _poll(lambda: started.exists() or crawl.poll() is not None, 120, "the worker to take the page")
        # the worker, the forkserver and the resource tracker
        leftovers = _kill_and_list_leftovers(crawl, log, processes=3)
    assert not leftovers, "left running after SIGKILL of the crawl:\n" + "\n".join(leftovers)


# -- tag over an archive big enough to be killed in the middle ----------------------------------------


def _big_warc(path: Path, pages: int) -> None:
    site = [body for body in demo_site.build_site(12).values() if isinstance(body, bytes)]
    with path.open("wb") as out:
        writer = WARCWriter(out, gzip=False)
        for n in range(pages):
            body = site[n % len(site)].replace(b"<body>", f"<body><p>copy {n}</p>".encode(), 1)
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], "HTTP/1.1")
            record = writer.create_warc_record(
                f"http://example.com/{n}", "response", payload=io.BytesIO(body), http_headers=headers
            )
            writer.write_record(record)


@linux_only
def test_a_killed_tag_leaves_no_worker(tmp_path: Path) -> None:
    archive = tmp_path / "big.warc"
    _big_warc(archive, 6000)
    tool = Path(sys.executable).parent / "scrapy-simhash"  # the console script, as a user runs it
    assert tool.exists(), f"{tool} is missing: install the package (make install)"
    command = [
        str(tool),
        "tag",
        "--workers",
        "2",
        "--no-progress",
        "--out",
        str(tmp_path / "out"),
        str(archive),
    ]
    tag, log = _start(command, tmp_path)
    leftovers = _kill_and_list_leftovers(tag, log, processes=2)  # two workers (fork: no forkserver)
    assert not leftovers, "left running after SIGKILL of tag:\n" + "\n".join(leftovers)


# -- a "run from a script" crawl without a main guard -------------------------------------------------

SCRIPT = """\
import os
import scrapy
from scrapy.crawler import CrawlerProcess

with open({runs!r}, "a") as runs:
    runs.write(f"{{os.getpid()}} {{__name__}}\\n")


class Site(scrapy.Spider):
    name = "site"
    start_urls = [{url!r}]

    def parse(self, response):
        yield {{"url": response.url, "simhash": response.meta.get("simhash")}}
        yield from response.follow_all(css="a", callback=self.parse)

{function}
process = CrawlerProcess(settings={{
    "ADDONS": {{"scrapy_simhash.Addon": 500}},
    "SIMHASH_WORKERS": 2,
    "SIMHASH_INDEX": {index!r},
    "TELNETCONSOLE_ENABLED": False,
    "LOG_LEVEL": "INFO",
    "FEEDS": {{{items!r}: {{"format": "jsonlines"}}}},
    {settings}
}})
process.crawl(Site)
{start}
"""

IN_SCRIPT_FUNCTION = """
def counting(body, url, encoding, **options):
    from scrapy_simhash.page import fingerprint_page
    with open({calls!r}, "a") as calls:
        calls.write(f"{{os.getpid()}}\\n")
    return fingerprint_page(body, url, encoding, **options)
"""


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with demo_site.serve(demo_site.build_site(4)) as base:
        yield base + "/"


def _run_script(tmp_path: Path, url: str, *, guard: bool, in_script_function: bool) -> dict:
    runs, calls, items = tmp_path / "runs.txt", tmp_path / "calls.txt", tmp_path / "items.jsonl"
    script = tmp_path / "crawl_script.py"
    script.write_text(
        SCRIPT.format(
            runs=str(runs),
            url=url,
            index=str(tmp_path / "index"),
            items=str(items),
            function=IN_SCRIPT_FUNCTION.format(calls=str(calls)) if in_script_function else "",
            settings='"SIMHASH_FINGERPRINT_FUNCTION": "__main__.counting",' if in_script_function else "",
            start='if __name__ == "__main__":\n    process.start()' if guard else "process.start()",
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300
    )
    lines = lambda path: path.read_text().splitlines() if path.exists() else []  # noqa: E731
    return {
        "returncode": done.returncode,
        "runs": lines(runs),
        "calls": lines(calls),
        "items": [json.loads(line) for line in lines(items)],
        "log": done.stderr,
    }


def test_a_script_without_main_guard_crawls_once(site: str, tmp_path: Path) -> None:
    result = _run_script(tmp_path, site, guard=False, in_script_function=False)
    assert result["returncode"] == 0, result["log"][-3000:]
    assert len(result["runs"]) == 1, result["runs"]  # the workers did not run the script again
    assert result["runs"][0].endswith(" __main__")
    fingerprinted = [item for item in result["items"] if item["simhash"]]
    assert len(fingerprinted) >= 4, result["log"][-3000:]  # the workers did fingerprint the pages


def test_a_fingerprint_function_in_a_guarded_script_runs_in_the_workers(site: str, tmp_path: Path) -> None:
    result = _run_script(tmp_path, site, guard=True, in_script_function=True)
    assert result["returncode"] == 0, result["log"][-3000:]
    main_pid = int(result["runs"][0].split()[0])
    # the workers import the script (that is how they find the function); the guard keeps the crawl out
    assert [line.split()[1] for line in result["runs"]] == ["__main__", "__mp_main__", "__mp_main__"]
    assert result["calls"] and main_pid not in {int(pid) for pid in result["calls"]}
    assert sum(1 for item in result["items"] if item["simhash"]) >= 4
    assert "Spider opened" in result["log"] and result["log"].count("Spider opened") == 1


def test_a_fingerprint_function_in_an_unguarded_script_is_refused_once(site: str, tmp_path: Path) -> None:
    result = _run_script(tmp_path, site, guard=False, in_script_function=True)
    assert len(result["runs"]) == 1, result["runs"]  # no worker started, so none re-ran the script
    assert not result["calls"]
    assert "crawl_script.py, so every worker process has to import that script" in result["log"]
    assert "Spider opened" not in result["log"]  # refused before the crawl started


POOL_SCRIPT = r"""
import json, sys
from twisted.internet import reactor
from scrapy_simhash.extract import DEFAULT_EXTRACTOR
from scrapy_simhash.page import fingerprint_page
from scrapy_simhash.pool import FingerprintPool

if __name__ == "__main__":
    body = open(sys.argv[1], "rb").read()
    out = {}
    pools = {
        name: FingerprintPool(1, extractor=DEFAULT_EXTRACTOR, min_tokens=30, timeout=60, minhash=minhash)
        for name, minhash in (("verified", True), ("simhash", False))
    }

    def done(page, name):
        sketch = page.minhash
        out[name] = {"simhash": page.simhash, "minhash": None if sketch is None else sketch.to_text()}
        if len(out) == len(pools):
            for pool in pools.values():
                pool.close()
            reactor.stop()

    for name, pool in pools.items():
        pool.submit(body, "http://127.0.0.1/a").addCallback(done, name)
    reactor.run()
    inline = fingerprint_page(body, "http://127.0.0.1/a")
    out["inline"] = {"simhash": inline.simhash, "minhash": inline.minhash.to_text()}
    print(json.dumps(out))
"""


def test_the_sketch_comes_back_from_a_worker_process(tmp_path: Path) -> None:
    """A page fingerprinted in a worker process comes back with its minhash-doc/1 sketch, equal to the
    one computed in the crawl's own process; with minhash=False (simhash mode) none is computed."""
    body = demo_site.build_site(2)["/news/story-001.html"]
    (tmp_path / "page.html").write_bytes(body)
    (tmp_path / "pool_script.py").write_text(POOL_SCRIPT)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "pool_script.py"), str(tmp_path / "page.html")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["verified"]["minhash"] is not None
    assert out["verified"] == {"simhash": out["inline"]["simhash"], "minhash": out["inline"]["minhash"]}
    assert out["simhash"] == {"simhash": out["inline"]["simhash"], "minhash": None}
