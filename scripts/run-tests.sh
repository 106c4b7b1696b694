#!/usr/bin/env bash
# The whole suite as `make test` runs it: the Spark tests in a second pytest process beside the rest.
#
# Why two processes: the Spark files (a local[2] Spark, a JVM of their own) take about five minutes,
# and the rest of the suite runs in one Python process that leaves the second core mostly idle. Side by
# side they finish minutes sooner on two cores. The Spark run's output is kept in a file and printed
# after the other's, so neither report is interleaved; the exit status fails if either run fails.
#
# Usage: scripts/run-tests.sh PYTHON [pytest options for both runs...]
set -uo pipefail
python=$1
shift
cd "$(dirname "$0")/.."
spark_tests=(tests/test_spark*.py)
spark_log=$(mktemp "${TMPDIR:-/tmp}/scrapy-simhash-spark-tests.XXXXXX")
trap 'rm -f "$spark_log"' EXIT

"$python" -m pytest -p no:cacheprovider "$@" "${spark_tests[@]}" >"$spark_log" 2>&1 &
spark_pid=$!
"$python" -m pytest "$@" --ignore-glob='tests/test_spark*.py'
rest=$?
wait "$spark_pid"
spark=$?
echo
echo "==================== the Spark tests (run beside the rest) ===================="
cat "$spark_log"
echo "make test: the rest exited $rest, the Spark tests $spark"
exit $((rest != 0 || spark != 0))
