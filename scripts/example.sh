#!/usr/bin/env bash
# The main job: set up, then train the example GPT on the neuron device and print the portability report.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
localneuron run examples/train_gpt.py --device neuron "$@"
