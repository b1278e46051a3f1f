#!/usr/bin/env bash
# Set up, then run the whole test suite (exits non-zero when a test fails). With arguments, they go to the
# main pytest run only; without, the integration extras that need their own environment run after it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# extra -> its tests (each extra has a virtual environment of its own: scripts/extra_env.sh)
declare -A EXTRA_TESTS=(
  [titan]="tests/test_torchtitan_recipe.py"
  [vllm]="tests/test_vllm_plugin.py"
)
status=0
python3 -m pytest -q -ra tests "$@" || status=$?
if [[ $# -eq 0 ]]; then
  for extra in "${!EXTRA_TESTS[@]}"; do
    echo "== tests of the $extra extra, in its own environment"
    python="$(bash scripts/extra_env.sh "$extra")"
    "$python" -m pytest -q -ra ${EXTRA_TESTS[$extra]} || status=$?
  done
fi
exit "$status"
