"""The four mixture-of-experts families of issue 9 (Mixtral, Qwen3-MoE, DeepSeek-V3, gpt-oss) build,
train a step and generate on `neuron` exactly as on the CPU. Their routers count tokens per expert with
torch.histc on integer tensors, which the CPU kernel refuses (host_kernel_fixes.HISTC). Tiny configs
built here, offline."""
import copy
import warnings

import pytest

from hf_support import require

require("transformers")
import torch  # noqa: E402
import torch_neuronx  # noqa: E402
import transformers  # noqa: E402

COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=None)
MODELS = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(moe_intermediate_size=32, head_dim=8, num_experts=4, num_experts_per_tok=2, decoder_sparse_step=1)),
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM",
                    dict(moe_intermediate_size=16, first_k_dense_replace=1, num_key_value_heads=4, n_routed_experts=8,
                         n_shared_experts=1, num_experts_per_tok=2, n_group=2, topk_group=1, kv_lora_rank=16,
                         q_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)),
    "gpt_oss": ("GptOssConfig", "GptOssForCausalLM",
                dict(intermediate_size=32, head_dim=8, num_local_experts=4, num_experts_per_tok=2, sliding_window=16)),
}


def build(model_type):
    config_class, model_class, sizes = MODELS[model_type]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gpt-oss: the default YaRN factor does not fit the shrunk context
        config = getattr(transformers, config_class)(**{**COMMON, **sizes})
    config._attn_implementation = "eager"  # the same attention code on both devices
    torch.manual_seed(0)
    return getattr(transformers, model_class)(config)


def train_step_and_generate(model, device):
    ids = torch.randint(3, 128, (2, 12), generator=torch.Generator().manual_seed(1)).to(device)
    model = copy.deepcopy(model).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    model.eval()
    tokens = model.generate(input_ids=ids[:, :6], max_new_tokens=6, min_new_tokens=6, do_sample=False)
    return loss.detach().cpu(), {n: p.detach().cpu() for n, p in model.named_parameters()}, tokens.cpu()


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_moe_model_trains_a_step_and_generates_as_on_cpu(model_type, quiet):
    model = build(model_type)
    torch_neuronx.clear_op_tracking()
    loss, params, tokens = train_step_and_generate(model, "neuron")
    assert "aten::histc" in torch_neuronx.get_executed_ops()  # the router's integer token counts ran on the device
    assert torch_neuronx.get_fallback_ops() == []
    cpu_loss, cpu_params, cpu_tokens = train_step_and_generate(model, "cpu")
    torch.testing.assert_close(loss, cpu_loss, rtol=1e-5, atol=1e-6)
    for name, value in cpu_params.items():
        torch.testing.assert_close(params[name], value, rtol=1e-5, atol=1e-6, msg=f"{model_type}: {name} after the step")
    assert torch.equal(tokens, cpu_tokens)
