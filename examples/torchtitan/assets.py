"""Offline stand-ins for the assets TorchTitan's Llama 3 debug config reads from ./tests/assets:
a byte-level BPE tokenizer (tokenizer.json + tokenizer_config.json) and a `c4_test`-shaped text
dataset (JSON lines with a "text" field). Both are deterministic, so every run (and every rank)
sees the same tokens, and nothing touches the Hugging Face Hub.

    python assets.py DIR   ->  DIR/tokenizer/ and DIR/c4_test/
"""
import json
import random
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"
VOCAB_SIZE = 512  # below the debug model's 2048-entry embedding
DOCUMENTS = 400
WORDS = ("neuron core tensor engine vector scalar gpsimd sbuf psum hbm collective ring gradient shard "
         "replica layer norm attention rotary embedding feed forward optimizer step loss token batch "
         "sequence compile graph kernel tile partition memory bandwidth latency throughput").split()


def documents(seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))) + "." for _ in range(DOCUMENTS)]


def write_dataset(directory: Path, texts: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "c4_sample.json", "w") as out:
        for text in texts:
            out.write(json.dumps({"text": text}) + "\n")


def write_tokenizer(directory: Path, texts: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "tokenizer_config.json").write_text(json.dumps({"bos_token": BOS, "eos_token": EOS}))


def build(root: Path) -> None:
    texts = documents()
    write_tokenizer(root / "tokenizer", texts)
    write_dataset(root / "c4_test", texts)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python assets.py DIR  (writes DIR/tokenizer and DIR/c4_test)")
    build(Path(sys.argv[1]))
