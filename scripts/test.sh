#!/usr/bin/env bash
# Set up, then run the whole test suite (exits non-zero when a test fails).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
python3 -m pytest -q -ra tests "$@"
