"""Trains a tiny Llama with Accelerate, saves the full training state, restores it into a fresh model and
optimizer, and checks that both continue identically. Runs unchanged on `neuron` or the CPU, in one process
or under `accelerate launch --num_processes 2`.

    accelerate launch --num_processes 2 examples/hf/accelerate_train.py --mixed-precision bf16
    ACCELERATE_USE_CPU=1 accelerate launch --num_processes 2 examples/hf/accelerate_train.py  # CPU + Gloo
"""
import argparse
import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from accelerate import Accelerator  # noqa: E402
from accelerate.utils import set_seed  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

from shared_tempdir import shared_temporary_directory  # noqa: E402


def tiny_model():
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=96, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def batches(count, batch_size=4, length=16):
    generator = torch.Generator().manual_seed(1234)
    tokens = torch.randint(0, 96, (count * batch_size, length), generator=generator)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(tokens), batch_size=batch_size)


def prepared(accelerator, steps):
    set_seed(0)
    model = tiny_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    return accelerator.prepare(model, optimizer, batches(steps))


def train(accelerator, model, optimizer, loader):
    losses = []
    for (tokens,) in loader:
        loss = model(input_ids=tokens, labels=tokens).loss
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(accelerator.reduce(loss.detach(), reduction="mean").item())
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mixed-precision", default="no", choices=["no", "bf16", "fp16"])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--state-dir", default=None,
                        help="shared by all ranks (default: a temporary directory on rank 0's machine, removed at the end)")
    args = parser.parse_args()

    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    model, optimizer, loader = prepared(accelerator, args.steps)
    first = train(accelerator, model, optimizer, loader)

    directory = (contextlib.nullcontext(args.state_dir) if args.state_dir
                 else shared_temporary_directory("accelerate-state-"))
    with directory as state_dir:
        accelerator.save_state(state_dir)
        continued = train(accelerator, model, optimizer, loader)

        # a fresh accelerator, model and optimizer restored from the saved state continue like the original
        accelerator = Accelerator(mixed_precision=args.mixed_precision)
        model, optimizer, loader = prepared(accelerator, args.steps)
        accelerator.load_state(state_dir)
        resumed = train(accelerator, model, optimizer, loader)

    result = {"rank": accelerator.process_index, "processes": accelerator.num_processes,
              "device": str(accelerator.device), "distributed_type": str(accelerator.distributed_type),
              "mixed_precision": accelerator.mixed_precision, "losses": first, "continued": continued,
              "resumed": resumed, "param_device": str(next(model.parameters()).device)}
    print("RESULT " + json.dumps(result), flush=True)
    accelerator.end_training()  # destroys the process group: Gloo's threads left alive can abort the exit
    if os.environ.get("ACCELERATE_EXAMPLE_STRICT", "1") == "1" and resumed != continued:
        raise SystemExit(f"load_state did not restore the run: {resumed} != {continued}")


if __name__ == "__main__":
    main()
