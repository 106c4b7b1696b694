"""Bit flips in the database and its WAL after a crash: never a silently different index.

A writer process runs a seeded program (batches, a compaction, single inserts, removals,
replacements, a generation switch), acknowledges it, and is killed with SIGKILL before it can
checkpoint: the last transactions live only in the WAL. Then, in many copies of that
directory, one bit of the WAL or of the database is flipped, and the index is reopened. Each
copy must either give exactly the acknowledged data (every key with its fingerprint and meta,
no removed key, queries equal to brute force) or raise IndexCorruptError; SQLite alone drops
the WAL from a damaged frame on, silently losing committed rows or bringing removals back.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from scrapy_simhash import SimhashIndex
from scrapy_simhash.index import IndexCorruptError

OPTIONS = {"pending_max": 8, "delta_min": 64}
CHILD = r"""
import json, sys, time
from scrapy_simhash import SimhashIndex

path, program = sys.argv[1], json.loads(open(sys.argv[2]).read())
index = SimhashIndex(path, pending_max=8, delta_min=64, synchronous="normal")
for op, *args in program:
    if op == "add_many":
        index.add_many([tuple(item) for item in args[0]])
    elif op == "remove":
        index.remove(args[0])
    else:
        index.compact()
print("DONE", flush=True)
time.sleep(60)
"""


def _program(rng: random.Random) -> tuple[list[list], dict[str, tuple[int, dict]], set[str]]:
    """A seeded program and the state it leaves: key -> (fingerprint, meta), removed keys."""
    program: list[list] = []
    state: dict[str, tuple[int, dict]] = {}
    removed: set[str] = set()
    serial = 0

    def rows(n: int) -> list[list]:
        nonlocal serial
        batch = []
        for _ in range(n):
            if state and rng.random() < 0.2:  # a replacement of a stored key
                key = rng.choice(sorted(state))
            else:
                key, serial = f"https://example.org/p/{serial}", serial + 1
            h = rng.getrandbits(64) or 1
            if state and rng.random() < 0.3:  # a near-duplicate of a stored fingerprint
                h = rng.choice(list(state.values()))[0] ^ (1 << rng.randrange(64)) or 1
            batch.append([h, key, {"n": serial, "v": rng.randrange(1000)}])
        for h, key, meta in batch:
            state[key] = (h, meta)
            removed.discard(key)
        return batch

    for _ in range(10):
        program.append(["add_many", rows(30)])
    program.append(["compact"])
    for _ in range(60):
        action = rng.random()
        if action < 0.5:
            program.append(["add_many", rows(1)])
        elif action < 0.8:
            program.append(["add_many", rows(rng.randint(2, 15))])
        else:
            key = rng.choice(sorted(state))
            del state[key]
            removed.add(key)
            program.append(["remove", key])
    return program, state, removed


def _crashed_index(tmp_path: Path, rng: random.Random) -> tuple[Path, dict[str, tuple[int, dict]], set[str]]:
    program, state, removed = _program(rng)
    (tmp_path / "program.json").write_text(json.dumps(program))
    path = tmp_path / "pristine"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(tmp_path / "program.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    os.kill(child.pid, signal.SIGKILL)
    _, err = child.communicate()
    assert line.strip() == "DONE", err
    assert (path / "index.sqlite3-wal").stat().st_size > 100_000  # the tail lives in the WAL only
    return path, state, removed


def _outcome(
    path: Path,
    state: dict[str, tuple[int, dict]],
    removed: set[str],
    rng: random.Random,
    verify: bool | str = True,
) -> str:
    """'exact', 'refused' (IndexCorruptError), or what differs."""
    try:
        with SimhashIndex(path, **OPTIONS, verify=verify) as index:
            stored = {m.key: (m.simhash, m.meta) for m in index}
            if stored != state:
                lost, extra = state.keys() - stored.keys(), stored.keys() - state.keys()
                changed = {k for k in state.keys() & stored.keys() if stored[k] != state[k]}
                return f"wrong rows: {len(lost)} lost, {len(extra)} extra, {len(changed)} changed"
            if len(index) != len(state):
                return f"wrong len {len(index)}"
            for key, (h, meta) in state.items():
                match = index.get(key)
                if match is None or (match.simhash, match.meta) != (h, meta):
                    return f"wrong get({key})"
            if any(index.get(key) is not None for key in removed):
                return "a removed key came back"
            hashes = [h for h, _ in state.values()]
            for probe in rng.sample(hashes, 40) + [h ^ 0b11 for h in rng.sample(hashes, 20)]:
                got = sorted((m.key, m.distance) for m in index.query(probe))
                want = sorted(
                    (key, bin(probe ^ h).count("1"))
                    for key, (h, _) in state.items()
                    if bin(probe ^ h).count("1") <= 3
                )
                if got != want:
                    return f"wrong query {probe:x}"
        return "exact"
    except IndexCorruptError:
        return "refused"


def _flip_cases(
    pristine: Path,
    tmp_path: Path,
    names: list[str],
    cases: int,
    state,
    removed,
    rng: random.Random,
    verify: bool | str = True,
) -> dict[str, list[str]]:
    """Outcome of each seeded one-bit flip in a fresh copy of ``pristine`` -> where it was."""
    case = tmp_path / "case"
    outcomes: dict[str, list[str]] = {}
    for number in range(cases):
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(pristine, case)
        target = case / names[number % len(names)]
        data = bytearray(target.read_bytes())
        where = rng.randrange(len(data))
        data[where] ^= 1 << rng.randrange(8)
        target.write_bytes(data)
        outcomes.setdefault(_outcome(case, state, removed, rng, verify), []).append(f"{target.name}@{where}")
    return outcomes


def _assert_never_wrong(outcomes: dict[str, list[str]], refused_at_least: int) -> None:
    wrong = {result: where for result, where in outcomes.items() if result not in ("exact", "refused")}
    assert not wrong, f"silently different answers: {wrong}"
    assert len(outcomes.get("refused", [])) >= refused_at_least, outcomes  # the flips did hit data


def test_bit_flips_after_a_crash_are_detected_never_answered(tmp_path: Path) -> None:
    rng = random.Random(20261123)
    pristine, state, removed = _crashed_index(tmp_path, rng)
    copy = tmp_path / "copy"
    shutil.copytree(pristine, copy)
    assert _outcome(copy, state, removed, rng) == "exact"  # the crash alone loses nothing
    names = ["index.sqlite3", "index.sqlite3-wal", "index.sqlite3-wal"]
    _assert_never_wrong(_flip_cases(pristine, tmp_path, names, 70, state, removed, rng), 20)


def test_bit_flips_in_a_cleanly_closed_database_are_detected(tmp_path: Path) -> None:
    rng = random.Random(5)
    program, state, removed = _program(rng)
    pristine = tmp_path / "pristine"
    with SimhashIndex(pristine, **OPTIONS) as index:
        for op, *args in program:
            if op == "add_many":
                index.add_many([tuple(item) for item in args[0]])
            elif op == "remove":
                index.remove(args[0])
            else:
                index.compact()
    assert not (pristine / "index.sqlite3-wal").exists()
    # damage at rest in a cleanly closed index: found by the full check (verify="full", as `index
    # check` runs it); a default open after a clean close does not read the database whole
    outcomes = _flip_cases(pristine, tmp_path, ["index.sqlite3"], 60, state, removed, rng, verify="full")
    _assert_never_wrong(outcomes, 10)
