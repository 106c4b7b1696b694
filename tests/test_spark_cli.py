"""``scrapy-simhash spark ...`` run as a user runs it: the console script of this virtual environment,
in a subprocess whose environment has no ``PYSPARK_PYTHON`` and whose PATH leads ``python3`` to an
interpreter without scrapy-simhash (the base Python this environment was made from)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip(
    "pyspark", reason="pyspark is not installed (pip install -e '.[test]' installs it)"
)

from spark_support import QUICK_SPARK, SMALL_DEDUPE_INPUTS  # noqa: E402

from scrapy_simhash.spark.session import is_local_master  # noqa: E402

VENV_BIN = Path(sys.executable).parent
SCRIPT = VENV_BIN / "scrapy-simhash"
SMALL = "ukwa-webarchive-test-suite/small-arcs-and-warcs/IAH-20080430204825-00000-blackbook-truncated"
INPUTS = [f"{SMALL}.warc.gz", f"{SMALL}.arc.gz"]
"""The example crawl's first records as a WARC and as an ARC: one page twice, a cluster of two."""


@pytest.fixture()
def foreign_python3(tmp_path: Path) -> dict[str, str]:
    """A user's environment: PATH without this virtual environment's bin, whose ``python3`` is the
    base interpreter (no scrapy-simhash there); no ``PYSPARK_PYTHON``."""
    base = Path(os.path.realpath(sys.executable))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(base)
    # the user's spark-defaults.conf: the in-process tests' quick settings (tests/spark_support.py), which
    # spark-submit reads from SPARK_CONF_DIR when the command starts its session
    conf = tmp_path / "spark-conf"
    conf.mkdir()
    (conf / "spark-defaults.conf").write_text(
        "".join(f"{name} {value}\n" for name, value in QUICK_SPARK.items()), encoding="utf-8"
    )
    kept = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    env = {
        "PATH": os.pathsep.join([str(bin_dir), *kept]),
        "HOME": str(tmp_path / "home"),
        "LANG": "C.UTF-8",
        "SPARK_LOCAL_IP": "127.0.0.1",  # bind to the loopback only
        "SPARK_CONF_DIR": str(conf),
    }
    if "JAVA_HOME" in os.environ:
        env["JAVA_HOME"] = os.environ["JAVA_HOME"]
    probe = subprocess.run(
        ["python3", "-c", "import scrapy_simhash"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert probe.returncode != 0, "python3 on the test's PATH imports scrapy_simhash: it proves nothing"
    assert "No module named 'scrapy_simhash'" in probe.stderr
    return env


def _spark_cli(env: dict[str, str], *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), "spark", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=900
    )


def test_local_master_runs_executors_on_the_drivers_python(foreign_python3, corpus, tmp_path, dedupe_report):
    """The report is ``dedupe``'s on the same inputs (made once for this test, the spark-submit recipe's
    and the Hadoop-URI CLI's by the conftest's ``dedupe_report``)."""
    inputs = [str(corpus / "warcs" / name) for name in SMALL_DEDUPE_INPUTS]
    report = tmp_path / "spark.jsonl"
    run = _spark_cli(
        foreign_python3, "dedupe", *inputs, "--master", "local[2]", "--report", str(report), cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "clusters: " in run.stdout
    want = dedupe_report(SMALL_DEDUPE_INPUTS)
    assert '"role": "duplicate"' in want
    assert report.read_text(encoding="utf-8") == want


@pytest.mark.parametrize(
    ("master", "local"),
    [
        ("local", True),
        ("local[2]", True),
        ("local[*]", True),
        ("local[4,2]", True),
        ("local-cluster[2,1,1024]", True),
        ("spark://127.0.0.1:7077", False),
        ("yarn", False),
        ("k8s://https://host:443", False),
        ("localhost", False),
    ],
)
def test_is_local_master(master, local):
    assert is_local_master(master) is local


def _last_line(stderr: str) -> str:
    return stderr.strip().splitlines()[-1]


def test_a_failed_job_is_one_line_and_exit_status_2(foreign_python3, corpus, tmp_path):
    """The user's PYSPARK_PYTHON is kept even on a local master; here it lacks scrapy-simhash, so every
    task fails: one line says so and what to do, with exit status 2 (1 would mean "data skipped")."""
    python3 = str(Path(foreign_python3["PATH"].split(os.pathsep)[0]) / "python3")
    env = {**foreign_python3, "PYSPARK_PYTHON": python3}
    report = tmp_path / "spark.jsonl"
    inputs = [str(corpus / "warcs" / INPUTS[0])]
    run = _spark_cli(env, "dedupe", *inputs, "--master", "local[2]", "--report", str(report), cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-3000:]
    line = _last_line(run.stderr)
    assert line.startswith("scrapy-simhash spark: error: Spark failed: ModuleNotFoundError: "), line
    assert "No module named 'scrapy_simhash'" in line and python3 in line and "PYSPARK_PYTHON" in line
    assert str(SCRIPT) not in run.stderr  # no traceback of the command itself
    assert not report.exists()


def test_no_java_is_one_line_and_exit_status_2(foreign_python3, corpus, tmp_path):
    env = {**foreign_python3, "JAVA_HOME": str(tmp_path / "no-java")}
    run = _spark_cli(env, "tag", str(corpus / "warcs" / INPUTS[0]), "--out", str(tmp_path), cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-3000:]
    line = _last_line(run.stderr)
    assert line.startswith("scrapy-simhash spark: error: Spark failed: "), line
    assert "JAVA_GATEWAY_EXITED" in line and "Java" in line and "JAVA_HOME" in line
    assert str(SCRIPT) not in run.stderr


def test_failure_line_of_a_jvm_error_is_its_first_java_line():
    from scrapy_simhash.spark.failures import failure_line

    error = RuntimeError(
        "An error occurred while calling o52.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: lost executor 1\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:1)\n"
    )
    line = failure_line(error)
    assert line.startswith("Spark failed: org.apache.spark.SparkException: Job aborted due to stage")
    assert "\n" not in line and "DAGScheduler" not in line
