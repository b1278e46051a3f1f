#!/usr/bin/env bash
# Runs AWS's NKI Library's own tests in --test-mode simulation on localneuron's NKI simulator, unchanged.
#   scripts/nki_library_tests.sh [LIBRARY_ROOT] [pytest arguments...]
# NKI_LIBRARY_TESTS picks test paths inside the tree (default: test/integration, every kernel's tests).
# LIBRARY_ROOT defaults to shared/third_party/nki-library beside the project (commit d2ad3a5). Users with
# network fetch the same tree with:
#   git clone https://github.com/aws-neuron/nki-library && git -C nki-library checkout d2ad3a5
# The library tree is only read: pytest runs from a scratch folder (NKI_LIBRARY_OUTPUT, default a new
# temporary folder) where the framework writes its artifacts, and compiled bytecode goes to a cache folder
# (PYTHONPYCACHEPREFIX, below), not beside the sources; localneuron/nki/library_shim supplies the
# module names the framework imports (nki_cpu_simulator, neuron_dtypes, two modules the release lacks).
# The framework's own PyPI requirements are installed first (see docs/nki-library.md).
set -euo pipefail
project="$(cd "$(dirname "$0")/.." && pwd)"
root=""
if [[ $# -gt 0 && -d "$1" ]]; then root="$(cd "$1" && pwd)"; shift; fi
# Both without importing localneuron (and torch): a file's run starts in seconds (docs/nki-library.md).
root="$(python3 "$project/localneuron/nki/library_tree.py" "$root")"
requirements="$project/localneuron/nki/library_shim/requirements.txt"
if ! python3 "$project/localneuron/nki/library_shim/requirements_met.py" "$requirements" >/dev/null; then
  if ! log="$(python3 -m pip install --quiet --disable-pip-version-check -r "$requirements" 2>&1)"; then
    echo "$log" >&2; exit 1
  fi
fi
out="${NKI_LIBRARY_OUTPUT:-$(mktemp -d -t nki-library-XXXXXX)}"
mkdir -p "$out"
cd "$out"
echo "NKI Library: $root; artifacts in $out" >&2
# One BLAS thread per process, as the library's framework sets for its xdist workers: the kernels' matmuls are
# small (at most 128 x 128 x 512), and on a busy machine two BLAS threads per process made each one 20x slower.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
       MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
read -ra tests <<< "${NKI_LIBRARY_TESTS:-test/integration}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/localneuron"
# Bytecode goes to the cache folder, not beside the tree's sources; where the user keeps Python from writing any
# (PYTHONDONTWRITEBYTECODE), no prefix: one would hide the installed packages' own bytecode, and every run would
# compile torch from source (8 s).
if [[ -z "${PYTHONDONTWRITEBYTECODE:-}" ]]; then export PYTHONPYCACHEPREFIX="$cache/nki-library-pycache"; fi
PYTHONPATH="$project/localneuron/nki/library_shim:$root/src:$root${PYTHONPATH:+:$PYTHONPATH}" \
  python3 -m pytest -p nki_library_plugin -p no:cacheprovider "${tests[@]/#/$root/}" \
    --test-mode simulation --output-directory "$out/neuron_test_output" --nki-library-cache "$cache" "$@"
