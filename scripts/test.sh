#!/usr/bin/env bash
# Set up, then run the test suite (exits non-zero when a test fails): first the whole suite in the default mode,
# asynchronous execution (ops queue per NeuronCore and stream, as on TorchNeuron), then, with
# NEURON_LAUNCH_BLOCKING=1 (every op runs when it is issued, the debugging mode users switch to, which must behave
# the same), the tests whose behaviour depends on the mode: device/, execution/, ops/, compile/, distributed/ and
# profiler/. The rest runs once; tests/conftest.py lists it with the reason per folder or file (DEVICE_FREE:
# no device op, checked; ABOVE_THE_QUEUE: ordinary device ops the layers below test in both modes).
# Each pass runs its tests in two processes, one per core (pytest-xdist; `-n 0` among the arguments runs one); with
# --dist loadgroup the tests of a file that share a module-scoped fixture stay in one of them (tests/conftest.py), so
# the fixture is built once.
# The passes run one after the other; each prints its 15 slowest tests (where CI time goes).
# Arguments go to both passes; without arguments, the integration extras that need their own environment run
# after them: their environments one after the other, then their tests side by side, since neither fills two cores
# alone (run one after the other, vLLM's engines used 3 min 53 s of CPU in 3 min 40 s, TorchTitan's ranks 4 min 56 s
# in 2 min 45 s). Each phase prints its time ("== phase NAME: N s"; benchmarks/ci_phases.py tabulates them); each
# extra's output is printed when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
cpu_ticks() {  # "busy total": the machine's CPU time since boot, in clock ticks (Linux's /proc/stat)
  awk '/^cpu /{total = 0; for (i = 2; i <= NF; i++) total += $i; print total - $5 - $6, total; exit}' /proc/stat \
    2>/dev/null || echo "0 0"
}
busy_line() {  # NAME "BUSY TOTAL" (from cpu_ticks at its start): how many of the cores were busy meanwhile
  local busy total now_busy now_total
  read -r busy total <<< "$2"
  read -r now_busy now_total < <(cpu_ticks)
  (( now_total > total )) && echo "== busy $1: $(awk -v b=$((now_busy - busy)) -v t=$((now_total - total)) \
    -v n="$(nproc)" 'BEGIN { printf "%.2f of %d cores", n * b / t, n }')"
  return 0
}
phase() {  # NAME COMMAND...: runs it, keeps a failure's status, prints how long it took and how busy the cores were
  local name="$1" start=$SECONDS ticks
  ticks="$(cpu_ticks)"
  shift
  echo "== $name"
  "$@" || status=$?
  echo "== phase $name: $((SECONDS - start)) s"
  busy_line "$name" "$ticks"
}
phase setup bash scripts/setup.sh
[[ $status -eq 0 ]] || exit "$status"
# one compile cache for both passes and their workers (tests/support/compile_models.py), removed at exit
LOCALNEURON_TEST_COMPILE_CACHE="$(mktemp -d)"
export LOCALNEURON_TEST_COMPILE_CACHE
cleanup() { rm -rf "$LOCALNEURON_TEST_COMPILE_CACHE" ${logs:+"$logs"}; }
trap cleanup EXIT
phase asynchronous python3 -m pytest -q -ra --durations=15 -n 2 --dist loadgroup tests "$@"
phase blocking env NEURON_LAUNCH_BLOCKING=1 python3 -m pytest -q -ra --durations=15 -n 2 --dist loadgroup tests -m "not slow and not mode_independent" "$@"
# extra -> its pytest arguments (each extra has a virtual environment of its own: scripts/extra_env.sh)
declare -A EXTRA_TESTS=(
  [titan]="tests/integrations/test_torchtitan_recipe.py"
  [vllm]="-n 2 --dist loadgroup tests/integrations/test_vllm_plugin.py"  # its engines run single-threaded
)
extra_python=""
make_extra_env() { extra_python="$(bash scripts/extra_env.sh "$1")"; }
if [[ $# -eq 0 ]]; then
  declare -A extra_pythons=()
  for extra in "${!EXTRA_TESTS[@]}"; do
    extra_python=""
    phase "$extra extra: environment" make_extra_env "$extra"
    [[ -z "$extra_python" ]] || extra_pythons[$extra]="$extra_python"
  done
  logs="$(mktemp -d)"
  extras_ticks="$(cpu_ticks)"
  for extra in "${!extra_pythons[@]}"; do
    ( started=$SECONDS
      code=0
      "${extra_pythons[$extra]}" -m pytest -q -ra ${EXTRA_TESTS[$extra]} > "$logs/$extra.log" 2>&1 || code=$?
      echo "$code $((SECONDS - started))" > "$logs/$extra.done" ) &
  done
  wait
  busy_line "extras side by side" "$extras_ticks"
  for extra in "${!extra_pythons[@]}"; do
    echo "== $extra extra: tests"
    cat "$logs/$extra.log"
    # a run that left no result (its shell was killed) counts as failed
    read -r code seconds < "$logs/$extra.done" 2>/dev/null || { code=1; seconds=0; }
    [[ "$code" -eq 0 ]] || status="$code"
    echo "== phase $extra extra: tests: $seconds s"
  done
fi
exit "$status"
