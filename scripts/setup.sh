#!/usr/bin/env bash
# Installs what localneuron needs and builds its C++ core against the installed torch. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
# torch==2.13.0 resolves to the CPU wheel; the build must not pull another torch (no build isolation).
python3 -m pip install --quiet --disable-pip-version-check "torch==2.13.0" numpy ninja pytest expecttest "setuptools>=64" wheel
# The hf extra (Hugging Face libraries) is constrained to the installed torch: none of them may pull another.
python3 -m pip install --quiet --disable-pip-version-check --no-build-isolation -c scripts/constraints.txt -e ".[hf]"
