"""docs/spark.md's spark-submit recipe, run as written against a real standalone Spark cluster.

A Spark master and one worker (separate JVMs, as on a cluster, bound to 127.0.0.1) are started from
the pyspark installation; ``spark-submit`` sends the job script printed in docs/spark.md, in client
mode, with executors launched by the worker; its report must be the one ``scrapy-simhash dedupe``
writes on one machine. Executors use this test's Python (the "installed on every node" variant: the
packed-environment variant needs a Spark distribution's pyspark.zip, which a pip install lacks).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_support import SMALL_DEDUPE_INPUTS

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not installed (pip install -e '.[test]' installs it)"
)

ROOT = Path(__file__).resolve().parent.parent
INPUTS = SMALL_DEDUPE_INPUTS


def _tool(name: str) -> str:
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found beside {sys.executable} or on PATH (it comes with pyspark)")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _state(ui_port: int) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as reply:
            return json.load(reply)
    except OSError:
        return None


def _env() -> dict[str, str]:
    from pyspark.find_spark_home import _find_spark_home

    return {
        **os.environ,
        "SPARK_HOME": _find_spark_home(),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


QUICK_JVM = "-XX:TieredStopAtLevel=1"
"""The JVM's quick compiler only, as for the in-process tests' session (tests/spark_support.py): the
cluster's daemons and the job's JVMs run briefly, and the optimising compiler costs more than it wins."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A standalone master and one 2-core worker on 127.0.0.1; stopped afterwards."""
    home = tmp_path_factory.mktemp("spark-cluster")
    port, ui, worker_ui = _free_port(), _free_port(), _free_port()
    spark_class, env = _tool("spark-class"), {**_env(), "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM}
    processes = []
    master_log = (home / "master.log").open("wb")
    worker_log = (home / "worker.log").open("wb")
    try:
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui),
                ],
                env=env,
                stdout=master_log,
                stderr=subprocess.STDOUT,
            )
        )
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    f"spark://127.0.0.1:{port}",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "2",
                    "--memory",
                    "2g",
                    "--webui-port",
                    str(worker_ui),
                    "--work-dir",
                    str(home / "work"),
                ],
                env=env,
                stdout=worker_log,
                stderr=subprocess.STDOUT,
            )
        )
        deadline = time.monotonic() + 180
        while True:
            state = _state(ui)
            if state and state.get("aliveworkers") == 1:
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                logs = (home / "master.log").read_text() + (home / "worker.log").read_text()
                pytest.fail(f"the standalone cluster did not come up:\n{logs[-3000:]}")
            time.sleep(0.2)
        yield {"master": f"spark://127.0.0.1:{port}", "ui": ui, "work": home / "work"}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        master_log.close()
        worker_log.close()


def documented_job() -> str:
    """The job script docs/spark.md tells users to write, verbatim."""
    text = (ROOT / "docs" / "spark.md").read_text(encoding="utf-8")
    found = re.search(r"cat > dedupe_job\.py <<'PY'\n(.*?)\nPY\n", text, re.S)
    assert found, "docs/spark.md no longer shows the dedupe_job.py recipe"
    return found.group(1) + "\n"


def test_spark_submit_recipe_on_a_standalone_cluster(cluster, corpus, tmp_path, dedupe_report):
    inputs = [str(corpus / "warcs" / name) for name in INPUTS]
    job = tmp_path / "dedupe_job.py"
    job.write_text(documented_job(), encoding="utf-8")
    report = tmp_path / "spark.jsonl"
    submitted = subprocess.run(
        [
            _tool("spark-submit"),
            "--master",
            cluster["master"],
            "--deploy-mode",
            "client",
            "--conf",
            "spark.executor.memory=1g",
            "--conf",
            "spark.sql.shuffle.partitions=4",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.driver.extraJavaOptions={QUICK_JVM}",
            "--conf",
            f"spark.executor.extraJavaOptions={QUICK_JVM}",
            str(job),
            *inputs,
            "--report",
            str(report),
        ],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert submitted.returncode == 0, submitted.stderr[-3000:]
    assert "clusters: " in submitted.stdout
    want = dedupe_report(INPUTS)  # dedupe's report of the same inputs
    assert '"role": "duplicate"' in want
    assert report.read_text(encoding="utf-8") == want
    # it ran on the cluster: the master lists the finished application, and the worker launched its
    # executors (their logs are in the worker's directory), not the driver process
    apps = _state(cluster["ui"])["completedapps"]  # type: ignore[index]
    assert [(a["name"], a["state"]) for a in apps] == [("scrapy-simhash spark dedupe", "FINISHED")]
    executor_logs = list(cluster["work"].glob(f"{apps[0]['id']}/*/stderr"))
    assert executor_logs, "the worker launched no executor for the job"
