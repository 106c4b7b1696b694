#!/usr/bin/env bash
# Debian packages the tests use: redis-server (the Redis backend's tests start
# their own server on 127.0.0.1) and a Java runtime (tests/test_spark.py starts a
# local Spark; pyspark 3.5 runs on Java 8/11/17, pyspark 4 on Java 17/21: Debian
# bookworm's default-jre-headless is Java 17) and Chromium (tests/test_report_browser.py renders the
# HTML report and calibration page in headless Chromium over the DevTools protocol). Installs only what
# is missing. unicode-data: the Unicode Character Database the tokenizer's tables are generated from
# (scripts/generate_unicode_data.py; tests/test_fingerprint_unicode.py checks the committed tables against it).
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v cc >/dev/null 2>&1 || missing+=(gcc)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ -f /usr/share/unicode/DerivedAge.txt ] || missing+=(unicode-data)
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-system-deps: please install: ${missing[*]} (no apt-get here)" >&2
  exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install-system-deps: run as root or install sudo to get: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "install-system-deps: installing ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
