#!/usr/bin/env bash
# Installs what localneuron needs and builds its C++ core against the installed torch. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# From Debian's apt, where it can install them (as root, or CI with password-less sudo): ccache, so that the core's
# next build reuses this one's objects, and headless Chromium for the HTML report's browser test
# (tests/report/test_html_report.py). Optional: without ccache the core compiles from scratch every time, and
# without Chromium that test skips and says why.
if ! { command -v chromium && command -v ccache; } >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  as_root=none
  if [ "$(id -u)" = 0 ]; then as_root=""; elif [ -n "${CI:-}" ] && sudo -n true 2>/dev/null; then as_root="sudo -n"; fi
  if [ "$as_root" != none ]; then
    { $as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq \
        --no-install-recommends chromium fonts-liberation ccache >/dev/null; } \
      || echo "setup: chromium or ccache could not be installed (the core compiles without a cache; the HTML" \
              "report's browser test may skip)" >&2
  fi
fi
# A clone of unchanged sources (CI's fresh clone, a second checkout) takes its compiled objects from ccache instead
# of compiling for minutes. ccache writes paths under the clone relative to the compiler's working directory, pip's
# temporary build folder: that folder is made inside the clone (build/, ignored by git), so the relative paths,
# and with them the cache keys, are the same whatever folder the clone is in.
if command -v ccache >/dev/null 2>&1 && [ -d /usr/lib/ccache ]; then
  mkdir -p build/tmp
  export PATH="/usr/lib/ccache:$PATH" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1 TMPDIR="$PWD/build/tmp"
fi
# torch==2.13.0 resolves to the CPU wheel; the build must not pull another torch (no build isolation).
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0" numpy ninja pytest pytest-xdist expecttest "setuptools>=64" wheel
# The hf extra (Hugging Face libraries) is constrained to the installed torch: none of them may pull another.
python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation -c scripts/constraints.txt -e ".[hf,nki]"
