"""TorchTitan config registry for the recipe: TorchTitan's own Llama 3 debug config, shrunk to a size
the host-backed device trains in seconds (2 layers, dim 64), everything else (loss, optimizer,
schedule, FSDP2/TP plan, flex attention) unchanged. Select it with
`--module neuron_llama3 --config llama3_debugmodel_tiny` (this directory on PYTHONPATH)."""
import dataclasses

from torchtitan.models.common import ComplexRoPE, compute_ffn_hidden_dim
from torchtitan.models.llama3 import _build_llama3_layers
from torchtitan.models.llama3.config_registry import llama3_debugmodel

DIM, HEADS, LAYERS = 64, 4, 2


def llama3_debugmodel_tiny():
    config = llama3_debugmodel()
    model = config.model_spec.model
    model.dim = DIM
    model.tok_embeddings.embedding_dim = DIM
    model.norm.normalized_shape = DIM
    model.lm_head.in_features = DIM
    model.layers = _build_llama3_layers(
        fuse_qkv=True, n_layers=LAYERS, dim=DIM, n_heads=HEADS,
        hidden_dim=compute_ffn_hidden_dim(DIM, multiple_of=64),
        rope=ComplexRoPE.Config(dim=DIM // HEADS, max_seq_len=131072, theta=500000, scaling="llama"),
        attn_backend="flex")
    config.model_spec = dataclasses.replace(config.model_spec, flavor="debugmodel_tiny")
    return config
