"""Crash tests' shared steps: start a writer process, SIGKILL it at a random moment, return its acks;
the verified index's writer program and the reading of its acks.

The writers are forked from one process that imported the package once (:class:`_Forker`): each kill
round used to pay a fresh interpreter's import of numpy and the package before its child could open the
index. A forked writer is still a process of its own, killed by a real SIGKILL in the middle of its
writes; only the imports it would have repeated are already done."""

from __future__ import annotations

import atexit
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

FORKER = r"""
import json, os, socket, sys, traceback
import numpy, scrapy_simhash, scrapy_simhash.index  # what every writer imports, imported once here

control = socket.socket(fileno=int(sys.argv[1]))
while True:
    # one request a message ({"code", "argv"}), its stdout and stderr pipes passed beside it
    message, fds, _, _ = socket.recv_fds(control, 1 << 20, 2)
    if not message:
        break
    request = json.loads(message)
    pid = os.fork()
    if pid == 0:
        control.close()
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        os.close(fds[0])
        os.close(fds[1])
        sys.argv = ["-c", *request["argv"]]
        try:
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__"})
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()
            status = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    os.close(fds[0])
    os.close(fds[1])
    control.send(str(pid).encode())
    _, wait_status = os.waitpid(pid, 0)
    control.send(str(os.waitstatus_to_exitcode(wait_status)).encode())
"""
"""The forking server: imports the package, then for each request forks a writer that runs the
request's code as ``python -c CODE ARGV...`` would, on the pipes passed with it; answers the writer's
pid, then its exit status (negative: the signal that ended it) once it ended."""


class _Forker:
    """One :data:`FORKER` process for the test session, started at the first crash test."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}  # no threads to fork
        self.process = subprocess.Popen(
            [sys.executable, "-c", FORKER, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=env,
        )
        theirs.close()
        self.control = ours

    def start(self, code: str, argv: list[str]) -> tuple[int, int, int]:
        """Fork a writer running ``code``: its pid and the read ends of its stdout and stderr."""
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        request = json.dumps({"code": code, "argv": argv}).encode()
        socket.send_fds(self.control, [request], [out_write, err_write])
        os.close(out_write)
        os.close(err_write)
        return self._answer(), out_read, err_read

    def exit_status(self) -> int:
        """The last writer's exit status, once it ended (negative: the signal that ended it)."""
        return self._answer()

    def _answer(self) -> int:
        answer = self.control.recv(64)
        if not answer:
            status = self.process.wait()
            raise AssertionError(f"the crash tests' forking process ended (exit status {status})")
        return int(answer)

    def close(self) -> None:
        self.control.close()
        self.process.wait(timeout=30)


_forker: _Forker | None = None


def _the_forker() -> _Forker:
    global _forker
    if _forker is None or _forker.process.poll() is not None:
        _forker = _Forker()
        atexit.register(_forker.close)
    return _forker


def run_and_kill(child_code: str, path: Path, round_: int, rng: random.Random, sync: str) -> list[str]:
    """The complete lines the child printed after ``OPEN`` before it was killed (a cut last line dropped)."""
    forker = _the_forker()
    pid, out_fd, err_fd = forker.start(child_code, [str(path), str(round_), str(rng.getrandbits(32)), sync])
    with open(out_fd, encoding="utf-8") as stdout, open(err_fd, encoding="utf-8") as stderr:
        first = stdout.readline()
        if first.strip() != "OPEN":
            os.kill(pid, signal.SIGKILL)
            forker.exit_status()
            raise AssertionError(f"child failed to open the index: {first}{stderr.read()}")
        time.sleep(rng.uniform(0.0, 0.25))
        os.kill(pid, signal.SIGKILL)
        # Read through the same buffered stream as readline() above: reading the raw pipe would drop
        # what readline() had already buffered (acks lost to the check, or a line cut in two).
        out = stdout.read()
        errors = stderr.read()
    status = forker.exit_status()
    assert status == -signal.SIGKILL, f"the child ended by itself (exit status {status}):\n{errors}"
    lines = out.splitlines()
    if out and not out.endswith("\n"):  # killed in the middle of writing it: not an acknowledgement
        lines.pop()
    return lines


VERIFIED_CHILD = r"""
import random, sys
import numpy as np
from scrapy_simhash.index import open_index

location, round_, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sync, _, merging = (sys.argv[4] if len(sys.argv) > 4 else "").partition("-")
rng = random.Random(seed)
# "-merging": a table generation (the sketches' LSH files with it) every few writes, so kills land in them;
# "-background": and each generation's files written slowly (in the background), so that kills land
# inside those writes; LOCATION.merges gets "+" when one starts writing files, "-" when it wrote them
# "-runs": no generation, but the in-memory runs merged in threads of their own (a kill lands anywhere)
options = {"pending_max": 4, "delta_min": 16} if merging else {}
if merging == "runs":
    from scrapy_simhash.index.lsh import bucket_runs
    from scrapy_simhash.index.lsh.lsh import MinHashLSH
    from scrapy_simhash.index.tables import delta_runs
    options = {"pending_max": 4}
    delta_runs.RUN_CAP, delta_runs.INLINE_MAX = 256, 4
    MinHashLSH.RUN_CAP, bucket_runs.INLINE_MAX = 256 * 32, 4 * 32
if merging == "background":
    import os, time
    from scrapy_simhash.index.tables import manifest
    real, marks = manifest.write_files, os.open(location + ".merges", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    def slow_write_files(*args, **kwargs):
        os.write(marks, b"+")
        time.sleep(0.05)
        written = real(*args, **kwargs)
        os.write(marks, b"-")
        return written
    manifest.write_files = slow_write_files
index = open_index(location, synchronous=sync, **options) if sync else open_index(location, **options)
print("OPEN", flush=True)

def sketch(s):
    return None if s < 0 else np.random.default_rng(s % 50).integers(0, 2**32, 128, dtype=np.uint32)

done = []
i = 0
while True:
    action = rng.random()
    if action < 0.5:
        key, h, s = f"r{round_}-{i}", rng.getrandbits(64) or 1, rng.randrange(-10, 1000)
        if rng.random() < 0.6:
            index.check_and_add(h, key, {"i": i}, sketch=sketch(s))
        else:
            index.add(h, key, {"i": i}, sketch=sketch(s))
        print(f"A {key} {h:x} {s}", flush=True)
        done.append(key)
        i += 1
    elif action < 0.85:
        batch = []
        for _ in range(rng.randint(1, 40)):
            batch.append((f"r{round_}-{i}", rng.getrandbits(64) or 1, rng.randrange(-10, 1000)))
            i += 1
        index.add_many([(h, key, None, sketch(s)) for key, h, s in batch])
        print("\n".join(f"A {key} {h:x} {s}" for key, h, s in batch), flush=True)
        done.extend(key for key, _, _ in batch)
    elif done:
        key = done.pop(rng.randrange(len(done)))
        print(f"D {key}", flush=True)
        index.remove(key)
        print(f"R {key}", flush=True)
"""
"""A verified index's writer (argv: location, round, seed[, synchronous]): check_and_add, add, add_many
and remove at random, each acknowledged on stdout once it returned (``A key simhash sketch-seed``,
``D key`` before a removal, ``R key`` after it)."""


def crash_sketch(seed: int) -> np.ndarray | None:
    """The sketch :data:`VERIFIED_CHILD` stored for ``seed`` (None: stored without one)."""
    return None if seed < 0 else np.random.default_rng(seed % 50).integers(0, 2**32, 128, dtype=np.uint32)


def acknowledged(
    lines: list[str], present: dict[str, tuple[int, np.ndarray | None]]
) -> tuple[dict[str, tuple[int, np.ndarray | None]], str | None]:
    """``present`` updated with the child's acks, and the key whose removal was cut (either state)."""
    removing = None
    for line in lines:
        kind, key, *rest = line.split()
        if kind == "A":
            present[key] = (int(rest[0], 16), crash_sketch(int(rest[1])))
        elif kind == "D":
            removing = key
        else:
            present.pop(key, None)
            removing = None
    return present, removing
