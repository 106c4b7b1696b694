"""Crash tests' shared step: start a writer process, SIGKILL it at a random moment, return its acks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path


def run_and_kill(child_code: str, path: Path, round_: int, rng: random.Random, sync: str) -> list[str]:
    """The complete lines the child printed after ``OPEN`` before it was killed (a cut last line dropped)."""
    child = subprocess.Popen(
        [sys.executable, "-c", child_code, str(path), str(round_), str(rng.getrandbits(32)), sync],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.readline()
    if first.strip() != "OPEN":
        child.kill()
        raise AssertionError(f"child failed to open the index: {first}{child.stderr.read()}")
    time.sleep(rng.uniform(0.0, 0.25))
    os.kill(child.pid, signal.SIGKILL)
    # Read through the same buffered stream as readline() above: communicate() reads the raw pipe and
    # would drop what readline() had already buffered (acks lost to the check, or a line cut in two).
    out = child.stdout.read()
    child.stderr.read()
    assert child.wait() == -signal.SIGKILL
    lines = out.splitlines()
    if out and not out.endswith("\n"):  # killed in the middle of writing it: not an acknowledgement
        lines.pop()
    return lines
