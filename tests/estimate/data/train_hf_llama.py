"""Train a Hugging Face causal LM built from a config.json the way a tuned Trainium recipe trains it,
written in plain PyTorch: the model computes in bf16 on the neuron device, compiled with
torch.compile(backend="neuron"); its gradients accumulate into fp32 buffers, AdamW updates fp32 master
weights, and the bf16 weights are refreshed from them after each step.

    python train_hf_llama.py CONFIG.json --micro-batch 1 --seq 512 --accumulate 1 --steps 10
"""
import argparse
import json

import torch
import transformers


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("config", help="a Hugging Face config.json")
    parser.add_argument("--micro-batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=512)
    parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()

    with open(args.config) as f:
        config = transformers.AutoConfig.for_model(**json.load(f))
    with torch.device("neuron"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    model.train()
    compiled = torch.compile(model, backend="neuron")

    weights = list(model.parameters())
    master = [w.detach().float() for w in weights]
    master_of = {w: m for w, m in zip(weights, master)}

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
        torch._foreach_copy_(weights, master)

    optimizer.register_step_post_hook(refresh_bf16_weights)

    for step in range(args.steps):
        for _ in range(args.accumulate):
            ids = torch.randint(0, config.vocab_size, (args.micro_batch, args.seq)).to("neuron")
            loss = compiled(input_ids=ids, labels=ids).loss / args.accumulate
            loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        print(f"step {step} loss {loss.item():.3f}", flush=True)


if __name__ == "__main__":
    main()
