#!/usr/bin/env bash
# TorchTitan 0.3.0's Llama 3 debug config (shrunk: 2 layers, dim 64) under torchrun, one process per
# NeuronCore, backend `neuron` (spmd_backend partial_dtensor: the default spmd_types makes torch 2.13's
# fully_shard refuse plain parameters). Builds the offline tokenizer and dataset first; never touches the Hub.
#   examples/torchtitan/run.sh [RANKS] [extra TorchTitan overrides, e.g. --parallelism.tensor_parallel_degree 2]
#   REFERENCE_CPU=1 examples/torchtitan/run.sh 2   # the same job on the host with Gloo
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ranks="${1:-1}"
shift || true
[[ "$ranks" =~ ^[1-9][0-9]*$ ]] || { echo "RANKS must be a positive integer, got '$ranks'" >&2; exit 2; }
work="${TITAN_WORK_DIR:-$(mktemp -d /tmp/localneuron-titan.XXXXXX)}"
python="${PYTHON:-python3}"
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 HF_DATASETS_CACHE="$work/hf-datasets-cache"
"$python" "$here/assets.py" "$work/assets"
reference=()
if [[ "${REFERENCE_CPU:-0}" == 1 ]]; then
  reference=(--reference-cpu)
  export TORCH_DEVICE_BACKEND_AUTOLOAD=0  # a plain host process: no accelerator for c10d to pick
fi
exec "$python" -m torch.distributed.run --standalone --nproc_per_node "$ranks" "$here/train.py" "${reference[@]}" \
  --module neuron_llama3 --config llama3_debugmodel_tiny \
  --hf_assets_path "$work/assets/tokenizer" --dataloader.dataset_path "$work/assets/c4_test" \
  --training.seq_len 64 --training.local_batch_size 1 --training.steps 3 --debug.seed 0 \
  --parallelism.spmd_backend partial_dtensor \
  --dump_folder "$work/out" "$@"
