#!/usr/bin/env bash
# Set up, then run the test suite (exits non-zero when a test fails): first the whole suite in the default mode,
# asynchronous execution (ops queue per NeuronCore and stream, as on TorchNeuron), then, with
# NEURON_LAUNCH_BLOCKING=1 (every op runs when it is issued, the debugging mode users switch to, which must behave
# the same), the tests whose behaviour depends on the mode: device/, execution/, ops/, compile/, distributed/ and
# profiler/. The rest runs once; tests/conftest.py lists it with the reason per folder or file (DEVICE_FREE:
# no device op, checked; ABOVE_THE_QUEUE: ordinary device ops the layers below test in both modes).
# Each pass runs its tests in two processes, one per core (pytest-xdist; `-n 0` among the arguments runs one).
# The passes run one after the other.
# Arguments go to both passes; without arguments, the integration extras that need their own environment run
# after them. Each phase prints its time ("== phase NAME: N s"; benchmarks/ci_phases.py tabulates them).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
phase() {  # NAME COMMAND...: runs it, keeps a failure's status, prints how long it took
  local name="$1" start=$SECONDS
  shift
  echo "== $name"
  "$@" || status=$?
  echo "== phase $name: $((SECONDS - start)) s"
}
phase setup bash scripts/setup.sh
[[ $status -eq 0 ]] || exit "$status"
phase asynchronous python3 -m pytest -q -ra -n 2 tests "$@"
phase blocking env NEURON_LAUNCH_BLOCKING=1 python3 -m pytest -q -ra -n 2 tests -m "not slow and not mode_independent" "$@"
# extra -> its tests (each extra has a virtual environment of its own: scripts/extra_env.sh)
declare -A EXTRA_TESTS=(
  [titan]="tests/integrations/test_torchtitan_recipe.py"
  [vllm]="tests/integrations/test_vllm_plugin.py"
)
extra_python=""
make_extra_env() { extra_python="$(bash scripts/extra_env.sh "$1")"; }
if [[ $# -eq 0 ]]; then
  for extra in "${!EXTRA_TESTS[@]}"; do
    extra_python=""
    phase "$extra extra: environment" make_extra_env "$extra"
    if [[ -n "$extra_python" ]]; then
      phase "$extra extra: tests" "$extra_python" -m pytest -q -ra ${EXTRA_TESTS[$extra]}
    fi
  done
fi
exit "$status"
