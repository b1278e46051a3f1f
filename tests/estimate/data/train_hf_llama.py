"""Train a Hugging Face causal LM built from a config.json the way a tuned Trainium recipe trains it,
written in plain PyTorch: the model computes in bf16 on the neuron device, compiled with
torch.compile(backend="neuron"); its gradients accumulate into fp32 buffers, AdamW updates fp32 master
weights, and the bf16 weights are refreshed from them after each step. Launched on several ranks
(torchrun), the ranks split the model Megatron's way (tensor parallelism over all of them): attention
heads and MLP columns, the vocabulary of the embedding and of the head, with the loss computed on each
rank's slice of the vocabulary.

    torchrun --nproc-per-node 2 train_hf_llama.py CONFIG.json --micro-batch 1 --seq 512 --accumulate 1
"""
import argparse
import contextlib
import json
import os

import torch
import torch.nn.functional as F
import transformers
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel, loss_parallel,
                                               parallelize_module)


def tensor_parallel_plan(layers: int) -> dict:
    plan = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate()),
            "lm_head": ColwiseParallel(output_layouts=Shard(-1), use_local_output=False)}
    for i in range(layers):
        layer = f"model.layers.{i}"
        # the input q, k and v (gate and up) share is made replicated once, so its gradient is all-reduced once
        plan[f"{layer}.self_attn"] = PrepareModuleInput(
            input_kwarg_layouts={"hidden_states": Replicate()},
            desired_input_kwarg_layouts={"hidden_states": Replicate()}, use_local_output=False)
        plan[f"{layer}.mlp"] = PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Replicate(),),
                                                  use_local_output=False)
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            plan[f"{layer}.{name}"] = ColwiseParallel()
        for name in ("self_attn.o_proj", "mlp.down_proj"):
            plan[f"{layer}.{name}"] = RowwiseParallel()
    return plan


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config", help="a Hugging Face config.json")
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--attention-mask", action="store_true",
                        help="pass a padding mask (all ones), as a batch of padded prompts does")
    args = parser.parse_args()

    with open(args.config) as f:
        config = transformers.AutoConfig.for_model(**json.load(f))
    with torch.device("neuron"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.train()
    tp = int(os.environ.get("WORLD_SIZE", "1"))
    if tp > 1:
        mesh = init_device_mesh("neuron", (tp,), mesh_dim_names=("tp",))
        parallelize_module(model, mesh, tensor_parallel_plan(config.num_hidden_layers))
    compiled = torch.compile(model, backend="neuron")

    weights = list(model.parameters())
    master = [w.detach().float() for w in weights]
    master_of = dict(zip(weights, master))

    def accumulate_in_fp32(weight):
        main = master_of[weight]
        if main.grad is None:
            main.grad = weight.grad.float()
        else:
            main.grad.add_(weight.grad)
        weight.grad = None

    for weight in weights:
        weight.register_post_accumulate_grad_hook(accumulate_in_fp32)
    optimizer = torch.optim.AdamW(master, lr=3e-4, weight_decay=0.1)

    @torch.no_grad()
    def refresh_bf16_weights(*_):
        for weight, main in zip(weights, master):
            weight.copy_(main)

    optimizer.register_step_post_hook(refresh_bf16_weights)

    for step in range(args.steps):
        for _ in range(args.accumulate):
            ids = torch.randint(0, config.vocab_size, (args.micro_batch, args.seq + 1)).to("neuron")
            mask = torch.ones(args.micro_batch, args.seq, dtype=torch.long, device="neuron") \
                if args.attention_mask else None
            logits = compiled(input_ids=ids[:, :-1], attention_mask=mask).logits
            # with the head's output split over the vocabulary, the loss is computed on each rank's slice
            with loss_parallel() if tp > 1 else contextlib.nullcontext():
                loss = F.cross_entropy(logits.flatten(0, 1).float(), ids[:, 1:].flatten()) / args.accumulate
                loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
