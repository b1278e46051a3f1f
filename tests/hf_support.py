"""Shared by the tests/test_hf_*.py files: skip cleanly without the `hf` extra, and tiny offline models."""
import importlib.util

import pytest

HF_EXTRA = ("transformers", "accelerate", "peft", "trl", "diffusers", "safetensors", "tokenizers")


def require(*libraries: str) -> None:
    """Skips the calling test module when a library of the `hf` extra is missing."""
    missing = [name for name in libraries if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the Hugging Face extra is not installed (missing {', '.join(missing)}); "
                    "install it with `pip install -c scripts/constraints.txt -e .[hf]`", allow_module_level=True)


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig

    sizes = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=128, max_position_embeddings=128, eos_token_id=None,
                 pad_token_id=0, bos_token_id=1)
    return LlamaConfig(**{**sizes, **overrides})


def tiny_llama(seed: int = 0, **overrides):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(**overrides)).eval()
