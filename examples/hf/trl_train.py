"""TRL on `neuron`, offline: supervised fine-tuning (SFTTrainer) or preference optimisation (DPOTrainer) of a
tiny Llama with an in-memory character tokenizer and datasets built from Python lists.

    python examples/hf/trl_train.py --trainer sft [--cpu]
    python examples/hf/trl_train.py --trainer dpo [--cpu]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from datasets import Dataset  # noqa: E402
from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer  # noqa: E402

from tiny_text import CORPUS, char_tokenizer, tiny_llama  # noqa: E402

COMMON = dict(max_steps=3, per_device_train_batch_size=2, learning_rate=5e-3, logging_steps=1, report_to=[],
              seed=0, data_seed=0, save_strategy="no", disable_tqdm=True, dataloader_num_workers=0)


def sft(tokenizer, model, cpu, output_dir):
    data = Dataset.from_dict({"text": CORPUS})
    config = SFTConfig(output_dir=output_dir, use_cpu=cpu, max_length=48, **COMMON)
    return SFTTrainer(model=model, args=config, train_dataset=data, processing_class=tokenizer)


def dpo(tokenizer, model, cpu, output_dir):
    pairs = {"prompt": [text[:12] for text in CORPUS], "chosen": [text[12:] for text in CORPUS],
             "rejected": [text[12:][::-1] for text in CORPUS]}
    config = DPOConfig(output_dir=output_dir, use_cpu=cpu, max_length=48, beta=0.1, **COMMON)
    return DPOTrainer(model=model, ref_model=tiny_llama(tokenizer), args=config,
                      train_dataset=Dataset.from_dict(pairs), processing_class=tokenizer)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--trainer", choices=["sft", "dpo"], required=True)
    parser.add_argument("--cpu", action="store_true")
    args = parser.parse_args()

    tokenizer = char_tokenizer()
    build = sft if args.trainer == "sft" else dpo
    with tempfile.TemporaryDirectory(prefix=f"{args.trainer}-") as output_dir:  # nothing is saved (save_strategy "no")
        trainer = build(tokenizer, tiny_llama(tokenizer), args.cpu, output_dir)
        trainer.train()
    history = [entry for entry in trainer.state.log_history if "loss" in entry]
    print("RESULT " + json.dumps({
        "trainer": args.trainer, "device": str(trainer.args.device),
        "param_device": str(next(trainer.model.parameters()).device),
        "losses": [round(entry["loss"], 5) for entry in history],
        "rewards_margins": [round(entry["rewards/margins"], 5) for entry in history if "rewards/margins" in entry],
    }), flush=True)


if __name__ == "__main__":
    main()
