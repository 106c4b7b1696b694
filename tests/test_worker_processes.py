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

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

GRACE = 30.0
"""Seconds the leftovers get to exit after the kill (they take well under one)."""


# -- processes, from /proc ----------------------------------------------------------------------------


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) of every live process (zombies count as gone)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        state, ppid = stat.rsplit(")", 1)[1].split()[:2]
        if state not in ("Z", "X"):
            table[int(entry)] = (int(ppid), state)
    return table


def _descendants(root: int) -> set[int]:
    table = _processes()
    found, frontier = set(), {root}
    while frontier:
        frontier = {pid for pid, (ppid, _) in table.items() if ppid in frontier} - found
        found |= frontier
    return found


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


def _kill_and_count_leftovers(process: subprocess.Popen, workers: int) -> tuple[set[int], list[str]]:
    """Wait until ``process`` has its workers, SIGKILL it; the processes it left that outlive GRACE."""
    tree: set[int] = set()

    def started() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"exited early ({process.returncode}): {process.stderr.read()[-3000:]}")
        tree.update(_descendants(process.pid))
        return len(_descendants(process.pid)) >= workers

    try:
        _poll(started, 120, f"{workers} worker processes")
        time.sleep(1)  # let them all finish starting (the fix must not depend on it, though)
        tree.update(_descendants(process.pid))
        process.kill()
        process.wait()
        deadline = time.monotonic() + GRACE
        while (alive := tree & set(_processes())) and time.monotonic() < deadline:
            time.sleep(0.2)
        return alive, [f"{pid}: {_command(pid)[:200]}" for pid in sorted(alive)]
    finally:
        for pid in tree & set(_processes()):  # do not leave them behind for the other tests
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


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


def test_a_killed_crawl_leaves_no_worker_forkserver_or_resource_tracker(tmp_path: Path) -> None:
    with _silent_site() as url:
        command = [sys.executable, str(EXAMPLE / "run_crawl.py"), url]
        for name, value in {"SIMHASH_WORKERS": 2, "SIMHASH_INDEX": str(tmp_path / "index")}.items():
            command += ["-s", f"{name}={json.dumps(value)}"]
        crawl = subprocess.Popen(
            command, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        # two workers, the forkserver and the resource tracker
        alive, leftovers = _kill_and_count_leftovers(crawl, workers=4)
    assert not alive, "left running after SIGKILL of the crawl:\n" + "\n".join(leftovers)


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


def test_a_killed_tag_leaves_no_worker(tmp_path: Path) -> None:
    archive = tmp_path / "big.warc"
    _big_warc(archive, 6000)
    tool = Path(sys.executable).parent / "scrapy-simhash"
    command = [str(tool)] if tool.exists() else [sys.executable, "-m", "scrapy_simhash.cli"]
    command += ["tag", "--workers", "2", "--no-progress", "--out", str(tmp_path / "out"), str(archive)]
    tag = subprocess.Popen(
        command, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    alive, leftovers = _kill_and_count_leftovers(tag, workers=2)
    assert not alive, "left running after SIGKILL of tag:\n" + "\n".join(leftovers)
