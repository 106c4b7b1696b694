"""``dedupe --keep``: which record of a cluster is the original, the same whatever reads the archives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from keep_support import EARLIEST, EXPECTED, LATEST, LONGEST, SHORTEST, TIED, keep_inputs

from scrapy_simhash.keep import KEEP_POLICIES, capture_instant, keep_order


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``scrapy-simhash ARGS`` in a subprocess with a clean environment (no variable the tests set)."""
    tool = Path(sys.executable).with_name("scrapy-simhash")
    env = {name: os.environ[name] for name in ("PATH", "HOME", "LANG") if name in os.environ}
    return subprocess.run([str(tool), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def dedupe_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return cli("dedupe", *args, "--no-progress", cwd=cwd)


@pytest.fixture(scope="module")
def inputs(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return keep_inputs(corpus, tmp_path_factory.mktemp("keep") / "in")


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def originals(rows: list[dict]) -> dict[frozenset[str], str]:
    """Each cluster (its URIs) and the URI of its original."""
    members: dict[int, set[str]] = {}
    for row in rows:
        members.setdefault(row["cluster"], set()).add(row["uri"])
    return {frozenset(members[r["cluster"]]): r["uri"] for r in rows if r["role"] == "original"}


@pytest.mark.parametrize("keep", KEEP_POLICIES)
def test_each_policy_chooses_its_original_whatever_the_worker_count(
    inputs: list[Path], tmp_path: Path, keep: str
) -> None:
    reports = {}
    for workers in ("1", "2"):
        report = tmp_path / f"w{workers}.jsonl"
        done = dedupe_cli(
            *map(str, inputs), "--keep", keep, "--workers", workers, "--report", str(report), cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert f"originals: chosen by --keep {keep}" in done.stdout
        reports[workers] = report.read_text(encoding="utf-8")
    assert reports["1"] == reports["2"]  # the same clusters, originals and rows, byte for byte
    rows = read_rows(tmp_path / "w1.jsonl")
    story = frozenset({EARLIEST, SHORTEST, LONGEST, LATEST})
    assert originals(rows) == {story: EXPECTED[keep], frozenset(TIED): TIED[1]}
    assert {row["keep"] for row in rows} == {keep}
    for row in rows:  # distances and similarities are measured against the chosen original
        if row["role"] == "original":
            assert (row["distance"], row["similarity"]) == (0, 1.0)
    first = next(row for row in rows if row["cluster"] == rows[0]["cluster"])
    assert first["role"] == "original"  # each cluster's rows start with its original
    # the HTML report built from the rows says which policy chose, and marks the same originals
    page = tmp_path / "report.html"
    done = cli("report", str(tmp_path / "w1.jsonl"), "-o", str(page), "--diffs", "0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = page.read_text(encoding="utf-8")
    assert f"(chosen by the keep policy: {keep})" in text
    data = json.loads(text.split('id="report-data">', 1)[1].split("</script>", 1)[0].replace("<\\/", "</"))
    marked = {member[0] for cluster in data["clusters"] for member in cluster["members"] if member[5]}
    assert marked == {EXPECTED[keep], TIED[1]}


def test_the_default_is_earliest_and_an_unknown_policy_is_a_usage_error(
    inputs: list[Path], tmp_path: Path
) -> None:
    report = tmp_path / "default.jsonl"
    done = dedupe_cli(*map(str, inputs), "--workers", "1", "--report", str(report), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "originals: chosen by --keep earliest" in done.stdout
    rows = read_rows(report)
    assert originals(rows)[frozenset({EARLIEST, SHORTEST, LONGEST, LATEST})] == EARLIEST
    wrong = dedupe_cli(*map(str, inputs), "--keep", "newest", cwd=tmp_path)
    assert wrong.returncode == 2 and "--keep" in wrong.stderr and "shortest-url" in wrong.stderr


@pytest.mark.parametrize("keep", ["latest", "longest"])
def test_with_an_index_two_runs_choose_the_originals_of_one_run_over_both(
    inputs: list[Path], tmp_path: Path, keep: str
) -> None:
    """The second run finds the first run's pages in the index (with their dates and token counts),
    and names the same originals as one run over both archives."""
    index = tmp_path / "index"
    first = dedupe_cli(str(inputs[0]), "--keep", keep, "--index", str(index), "--workers", "1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    report = tmp_path / "second.jsonl"
    args = [str(inputs[1]), "--keep", keep, "--index", str(index), "--workers", "1", "--report", str(report)]
    second = dedupe_cli(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    story = frozenset({EARLIEST, SHORTEST, LONGEST, LATEST})
    assert originals(read_rows(report))[story] == EXPECTED[keep]


def test_capture_dates_compare_as_instants() -> None:
    assert capture_instant("2024-02-01T09:00:00+01:00") == capture_instant("2024-02-01T08:00:00Z")
    assert capture_instant("2024-02-01T08:00:00.5Z") == (
        capture_instant("2024-02-01T08:00:00Z")[0],
        500_000_000,
    )
    assert capture_instant("20240201080000") == capture_instant("2024-02-01T08:00:00Z")  # an ARC date
    assert capture_instant("2024-02-30T00:00:00Z") is None and capture_instant("null") is None

    def key(policy: str, date: str | None, uri: str = "http://a/", offset: int = 0) -> tuple:
        return keep_order(policy, date=date, uri=uri, file="f.warc.gz", offset=offset, tokens=100)

    # a record without a valid date comes after dated ones, under "latest" too
    assert key("earliest", "2024-01-01T00:00:00Z") < key("earliest", None)
    assert key("latest", "2024-01-01T00:00:00Z") < key("latest", "garbage")
    # ties: the earlier capture, then the URL, then the offset
    assert key("shortest-url", "2024-01-02T00:00:00Z", "http://b/") > key(
        "shortest-url", "2024-01-01T00:00:00Z"
    )
    assert key("longest", "2024-01-01T00:00:00Z", "http://b/") > key("longest", "2024-01-01T00:00:00Z")
    assert key("earliest", "2024-01-01T00:00:00Z", offset=9) > key(
        "earliest", "2024-01-01T00:00:00Z", offset=1
    )
    with pytest.raises(ValueError, match="shortest-url"):
        keep_order("newest", date=None, uri=None, file=None, offset=None, tokens=None)
