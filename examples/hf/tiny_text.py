"""Offline building blocks shared by the Hugging Face examples: a character-level tokenizer built in
memory (no Hub access), a small corpus and a tiny Llama configuration sized for it."""
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

CORPUS = [
    "the neuron device runs pytorch code unchanged",
    "trainium cores keep weights in high bandwidth memory",
    "a compiled graph is cached and reused for the same shapes",
    "collectives move gradients between ranks after each step",
    "small models train in seconds on two cores",
    "the report lists every operation that fell back to the host",
    "bf16 is the native low precision of the accelerator",
    "static shapes avoid recompiling the forward pass",
]
SPECIAL = ["<pad>", "<s>", "</s>", "<unk>"]


def char_tokenizer(texts=CORPUS) -> PreTrainedTokenizerFast:
    characters = sorted({c for text in texts for c in text})
    vocab = {token: index for index, token in enumerate(SPECIAL + characters)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")


def tiny_llama(tokenizer, seed=0, **sizes) -> LlamaForCausalLM:
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, **sizes)
    torch.manual_seed(seed)
    return LlamaForCausalLM(config)


class TokenizedTexts(torch.utils.data.Dataset):
    """Causal-LM examples: padded token ids, their attention mask, and labels (-100 on padding)."""

    def __init__(self, tokenizer, texts=CORPUS, length=48):
        encoded = tokenizer(list(texts), padding="max_length", max_length=length, truncation=True,
                            return_tensors="pt")
        self.input_ids, self.attention_mask = encoded["input_ids"], encoded["attention_mask"]

    def __len__(self):
        return len(self.input_ids)

    def __getitem__(self, index):
        ids = self.input_ids[index]
        mask = self.attention_mask[index]
        return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}
