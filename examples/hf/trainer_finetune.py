"""Fine-tunes a tiny Llama with the Transformers Trainer on `neuron` (or the CPU), offline: gradient
accumulation, evaluation, checkpoints, then a second Trainer that resumes from the first checkpoint and
must reproduce the rest of the run. Works in one process or under `torchrun --nproc_per_node 2`.

    python examples/hf/trainer_finetune.py --bf16
    torchrun --nproc_per_node 2 examples/hf/trainer_finetune.py
    python examples/hf/trainer_finetune.py --cpu        # the reference run (CPU, Gloo under torchrun)
"""
import argparse
import contextlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402
from transformers import Trainer, TrainingArguments  # noqa: E402

from shared_tempdir import shared_temporary_directory  # noqa: E402
from tiny_text import CORPUS, TokenizedTexts, char_tokenizer, tiny_llama  # noqa: E402


def arguments(output_dir, args):
    return TrainingArguments(
        output_dir=output_dir, max_steps=args.steps, per_device_train_batch_size=2, per_device_eval_batch_size=4,
        gradient_accumulation_steps=2, learning_rate=5e-3, eval_strategy="steps", eval_steps=2, save_steps=2,
        logging_steps=1, bf16=args.bf16, use_cpu=args.cpu, report_to=[], seed=0, data_seed=0,
        dataloader_num_workers=0, disable_tqdm=True)


def losses(trainer):
    train = {entry["step"]: round(entry["loss"], 5) for entry in trainer.state.log_history if "loss" in entry}
    evaluation = {entry["step"]: round(entry["eval_loss"], 5) for entry in trainer.state.log_history
                  if "eval_loss" in entry}
    return train, evaluation


def parameter_sums(model):
    """Sum and absolute sum of all parameters: equal on every rank when DDP kept the replicas in step."""
    flat = torch.cat([p.detach().flatten().cpu().double() for p in model.parameters()])
    return [flat.sum().item(), flat.abs().sum().item()]


def train_and_resume(output_dir, args):
    tokenizer = char_tokenizer()
    train_set, eval_set = TokenizedTexts(tokenizer), TokenizedTexts(tokenizer, CORPUS[:4])
    trainer = Trainer(model=tiny_llama(tokenizer), args=arguments(output_dir, args), train_dataset=train_set,
                      eval_dataset=eval_set)
    trainer.train()
    train, evaluation = losses(trainer)

    resumed = Trainer(model=tiny_llama(tokenizer, seed=1), args=arguments(output_dir, args),
                      train_dataset=train_set, eval_dataset=eval_set)
    resumed.train(resume_from_checkpoint=os.path.join(output_dir, "checkpoint-2"))
    resumed_train, resumed_eval = losses(resumed)

    return {
        "rank": trainer.args.process_index, "world_size": trainer.args.world_size, "device": str(trainer.args.device),
        "param_device": str(next(trainer.model.parameters()).device),
        "mixed_precision": trainer.accelerator.mixed_precision,
        "wrapper": type(trainer.model_wrapped).__name__,
        "find_unused_parameters": getattr(trainer.model_wrapped, "find_unused_parameters", None),
        "train_loss": train, "eval_loss": evaluation, "parameter_sums": parameter_sums(trainer.model),
        "resumed_train_loss": resumed_train, "resumed_eval_loss": resumed_eval,
        "resumed_parameter_sums": parameter_sums(resumed.model),
        "checkpoints": sorted(d for d in os.listdir(output_dir) if d.startswith("checkpoint-"))}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cpu", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--output-dir", default=None,
                        help="shared by all ranks (default: a temporary directory on rank 0's machine, removed at the end)")
    args = parser.parse_args()

    directory = (contextlib.nullcontext(args.output_dir) if args.output_dir
                 else shared_temporary_directory("trainer-", cpu=args.cpu))
    with directory as output_dir:
        result = train_and_resume(output_dir, args)
    print("RESULT " + json.dumps(result), flush=True)
    if torch.distributed.is_initialized():
        # Trainer leaves its process group alive; Gloo's worker threads then abort the interpreter's exit
        # ("terminate called without an active exception") now and then
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
