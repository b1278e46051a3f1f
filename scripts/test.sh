#!/usr/bin/env bash
# Set up, then run the test suite (exits non-zero when a test fails): first the whole suite in the default mode,
# asynchronous execution (ops queue per NeuronCore and stream, as on TorchNeuron), then, with
# NEURON_LAUNCH_BLOCKING=1 (every op runs when it is issued, the debugging mode users switch to, which must behave
# the same), the tests whose behaviour depends on the mode: device/, execution/, ops/, compile/, distributed/ and
# profiler/. The rest runs once; tests/conftest.py lists it with the reason per folder or file (DEVICE_FREE:
# no device op, checked; ABOVE_THE_QUEUE: ordinary device ops the layers below test in both modes). The passes
# run one after the other: two at once on 2 cores are no faster and make timing-bounded multi-process tests flaky.
# Arguments go to both passes; without arguments, the integration extras that need their own environment run
# after them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# extra -> its tests (each extra has a virtual environment of its own: scripts/extra_env.sh)
declare -A EXTRA_TESTS=(
  [titan]="tests/integrations/test_torchtitan_recipe.py"
  [vllm]="tests/integrations/test_vllm_plugin.py"
)
status=0
echo "== asynchronous execution (the default)"
python3 -m pytest -q -ra tests "$@" || status=$?
echo "== ops run when issued (NEURON_LAUNCH_BLOCKING=1): the tests whose behaviour can depend on the mode"
NEURON_LAUNCH_BLOCKING=1 python3 -m pytest -q -ra tests -m "not slow and not mode_independent" "$@" || status=$?
if [[ $# -eq 0 ]]; then
  for extra in "${!EXTRA_TESTS[@]}"; do
    echo "== tests of the $extra extra, in its own environment"
    python="$(bash scripts/extra_env.sh "$extra")"
    "$python" -m pytest -q -ra ${EXTRA_TESTS[$extra]} || status=$?
  done
fi
exit "$status"
