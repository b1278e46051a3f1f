"""Tiny Llama and Qwen2 checkpoints built offline for the vLLM tests and benchmark: random weights and a
byte-level BPE tokenizer trained here, saved as a Hugging Face model directory.

Head dim 64: vLLM's CPU attention kernels (which `neuron` runs on device memory) accept 32, 64, 80, ...
The weights are drawn with a large spread so that greedy decoding has clear winners: a near-tie between
two logits would make "token for token equal" depend on summation order, not on correctness.
"""
import json
import sys

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a neuron device runs the model and keeps the cache in its memory",
    "serving language models with paged attention and continuous batching",
    "hello world, this is a tiny model with random weights",
] * 50

CHAT_TEMPLATE = ("{% for message in messages %}<|{{ message['role'] }}|> {{ message['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<|assistant|> {% endif %}")

ARCHITECTURES = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
}


def _tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build(directory: str, architecture: str, layers: int = 2, seed: int = 0) -> str:
    """Writes the model to `directory` and returns it."""
    import torch
    import transformers

    config_name, model_name = ARCHITECTURES[architecture]
    tokenizer = _tokenizer(vocab_size=512)
    config = getattr(transformers, config_name)(
        vocab_size=len(tokenizer), hidden_size=256, intermediate_size=512, num_hidden_layers=layers,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=512,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=False, initializer_range=0.2,
        torch_dtype="float32")
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config).eval()
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


def hf_greedy(directory: str, prompts: list[str], max_new_tokens: int) -> list[list[int]]:
    """New token ids of greedy Hugging Face generate on the CPU, no stop at EOS (as vLLM's ignore_eos)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    model = AutoModelForCausalLM.from_pretrained(directory, torch_dtype=torch.float32).eval()
    outputs = []
    for prompt in prompts:
        ids = tokenizer(prompt, return_tensors="pt").input_ids
        with torch.no_grad():
            generated = model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False,
                                       min_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
        outputs.append(generated[0, ids.shape[1]:].tolist())
    return outputs


if __name__ == "__main__":  # python tests/support/vllm_tiny_models.py DIR llama|qwen2
    print(json.dumps(build(sys.argv[1], sys.argv[2])))
