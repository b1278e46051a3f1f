#!/usr/bin/env bash
# Installs what localneuron needs and builds its C++ core against the installed torch. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# torch==2.13.0 resolves to the CPU wheel; the build must not pull another torch (no build isolation).
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0" numpy ninja pytest expecttest "setuptools>=64" wheel
# The hf extra (Hugging Face libraries) is constrained to the installed torch: none of them may pull another.
python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation -c scripts/constraints.txt -e ".[hf,nki]"
# Headless Chromium for the HTML report's browser test (tests/report/test_html_report.py), where Debian's apt
# can install it (as root, or CI with password-less sudo). Optional: without it that test skips and says why.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  as_root=none
  if [ "$(id -u)" = 0 ]; then as_root=""; elif [ -n "${CI:-}" ] && sudo -n true 2>/dev/null; then as_root="sudo -n"; fi
  if [ "$as_root" != none ]; then
    { $as_root apt-get update -qq && DEBIAN_FRONTEND=noninteractive $as_root apt-get install -y -qq \
        --no-install-recommends chromium fonts-liberation >/dev/null; } \
      || echo "setup: chromium could not be installed; the HTML report's browser test will skip" >&2
  fi
fi
