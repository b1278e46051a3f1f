"""LoRA / DoRA with PEFT on `neuron`, offline: wraps a tiny Llama, trains the adapter a few steps, saves it,
loads it back onto the device with `torch_device="neuron"`, and merges it into the base weights; the
loaded and the merged models must compute what the trained one computes.

    python examples/hf/lora_finetune.py [--dora] [--cpu]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from peft import LoraConfig, PeftModel, get_peft_model  # noqa: E402

from tiny_text import TokenizedTexts, char_tokenizer, tiny_llama  # noqa: E402


def run(device: str, dora: bool, steps: int = 5) -> dict:
    tokenizer = char_tokenizer()
    batch = TokenizedTexts(tokenizer)[:4]
    batch = {key: value.to(device) for key, value in batch.items()}
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], lora_dropout=0.0,
                        use_dora=dora, init_lora_weights="gaussian")
    torch.manual_seed(0)
    model = get_peft_model(tiny_llama(tokenizer).to(device), config)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(steps):
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(loss.item(), 5))
    model.eval()
    with torch.no_grad():
        trained = model(**batch).logits

    with tempfile.TemporaryDirectory(prefix="adapter-") as adapter_dir:
        model.save_pretrained(adapter_dir)
        adapter_files = sorted(os.listdir(adapter_dir))
        base = tiny_llama(tokenizer)  # same seed: the same base weights, still on the CPU
        loaded = PeftModel.from_pretrained(base, adapter_dir, torch_device=device).to(device).eval()
    adapter_devices = sorted({str(p.device) for n, p in loaded.named_parameters() if "lora_" in n})
    with torch.no_grad():
        reloaded = loaded(**batch).logits
        merged = loaded.merge_and_unload()(**batch).logits

    return {
        "device": device, "dora": dora, "losses": losses, "adapter_devices": adapter_devices,
        "adapter_files": adapter_files,
        "reload_max_diff": (reloaded - trained).abs().max().item(),
        "merge_max_diff": (merged - trained).abs().max().item(),
        "trainable": sum(p.numel() for p in model.parameters() if p.requires_grad)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dora", action="store_true")
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    print("RESULT " + json.dumps(run("cpu" if args.cpu else "neuron", args.dora, args.steps)), flush=True)


if __name__ == "__main__":
    main()
