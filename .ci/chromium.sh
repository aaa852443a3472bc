#!/usr/bin/env bash
# Install headless Chromium (Debian's `chromium` package) for tests/test_report_browser.py, which
# loads analysis.report's pages in it. Exit 0: chromium is there; 77: it cannot be installed here
# (the reason on stderr; the test then skips, saying so).
#
# Needs root and apt-get (CI: Debian 12 as root), as .ci/slurm/start.sh does.
set -uo pipefail

skip() { echo "chromium setup skipped: $*" >&2; exit 77; }

if command -v chromium >/dev/null; then
  echo "chromium: already installed"
  exit 0
fi
[ "$(id -u)" -eq 0 ] || skip "needs root to install it with apt-get (running as $(id -un))"
command -v apt-get >/dev/null || skip "no apt-get to install it"
export DEBIAN_FRONTEND=noninteractive
log=/tmp/gemmlab-chromium-apt.log
echo "chromium: installing"
if ! apt-get install -y -q --no-install-recommends chromium >"$log" 2>&1; then
  apt-get update -q >>"$log" 2>&1
  apt-get install -y -q --no-install-recommends chromium >>"$log" 2>&1 \
    || { tail -n 20 "$log" >&2; skip "apt-get could not install chromium"; }
fi
command -v chromium >/dev/null || skip "installed, but no chromium on PATH"
echo "chromium: installed"
