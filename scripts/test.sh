#!/usr/bin/env bash
# Set up, then run the whole test suite twice (exits non-zero when a test fails): first in the default
# mode, asynchronous execution (ops queue per NeuronCore and stream, as on TorchNeuron), then with
# NEURON_LAUNCH_BLOCKING=1 (every op runs when it is issued), the debugging mode users switch to, which
# must behave the same. The blocking pass is the whole suite too: alone on 2 cores the suite takes about
# 11 minutes (the blocking pass CI ran before this change), within the 12 minutes a second pass may
# take; its slowest tests (--durations: multi-rank profiler and distributed runs, compiled-graph tests,
# 30-60 s each) test behaviour in both modes, so no tier is worth leaving out. Files whose behaviour
# depends on the mode (test_async_execution, test_adaptive_eager: they skip what does not apply, and
# compare both modes in subprocesses) thus run
# both ways. The passes run one after the other: two at once on 2 cores are no faster and make
# timing-bounded multi-process tests flaky. Arguments go to both passes; without arguments, the
# integration extras that need their own environment run after them.
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
echo "== ops run when issued: NEURON_LAUNCH_BLOCKING=1"
NEURON_LAUNCH_BLOCKING=1 python3 -m pytest -q -ra tests "$@" || status=$?
if [[ $# -eq 0 ]]; then
  for extra in "${!EXTRA_TESTS[@]}"; do
    echo "== tests of the $extra extra, in its own environment"
    python="$(bash scripts/extra_env.sh "$extra")"
    "$python" -m pytest -q -ra ${EXTRA_TESTS[$extra]} || status=$?
  done
fi
exit "$status"
