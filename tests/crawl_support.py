"""Running real Scrapy crawls of a local site from tests, one process per crawl."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "example_project"
sys.path.insert(0, str(EXAMPLE))

import demo_site  # noqa: E402  (lives in the example project)

__all__ = ["CrawlResult", "demo_site", "run_crawl", "scrapy_crawl"]


@dataclass
class CrawlResult:
    stats: dict[str, Any]
    items: list[dict[str, Any]]
    log: str

    def stat(self, name: str) -> int:
        return int(self.stats.get(name, 0))

    def by_path(self, base: str) -> dict[str, dict[str, Any]]:
        return {item["url"][len(base) :]: item for item in self.items}


def run_crawl(
    start_url: str,
    tmp: Path,
    settings: dict[str, Any],
    spider_args: dict[str, str] | None = None,
    timeout: int = 180,
) -> CrawlResult:
    """Crawl ``start_url`` with the demo project and ``settings``; stats and items come back."""
    tmp.mkdir(parents=True, exist_ok=True)
    stats_path, items_path = tmp / "stats.json", tmp / "items.jsonl"
    command = [sys.executable, str(EXAMPLE / "run_crawl.py"), start_url, "--stats", str(stats_path)]
    command += ["--items", str(items_path)]
    for name, value in settings.items():
        command += ["-s", f"{name}={json.dumps(value)}"]
    for name, value in (spider_args or {}).items():
        command += ["-a", f"{name}={value}"]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])
    )
    done = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not stats_path.exists():
        raise AssertionError(f"crawl failed ({done.returncode}):\n{done.stderr[-4000:]}")
    items = [json.loads(line) for line in items_path.read_text().splitlines()] if items_path.exists() else []
    return CrawlResult(json.loads(stats_path.read_text()), items, done.stderr)


def scrapy_crawl(
    start_url: str, tmp: Path, settings: dict[str, Any], timeout: int = 180, output: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``scrapy crawl site`` as a user runs it: in a copy of the demo project, with the environment
    the tests run in and nothing added; the finished process (exit status, stderr) comes back.
    ``output``: where ``-O`` writes the items (JSON lines)."""
    project = tmp / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns(".scrapy", "__pycache__"))
    command = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"start_url={start_url}"]
    if output is not None:
        command += ["-O", f"{output}:jsonlines"]
    for name, value in settings.items():
        command += ["-s", f"{name}={value}"]
    return subprocess.run(command, cwd=project, capture_output=True, text=True, timeout=timeout)
