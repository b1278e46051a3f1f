"""`localneuron estimate --script` prices grouped-query attention on the model's kv heads when Transformers repeats
keys and values to every query head before the op (repeat_kv: its sdpa and eager paths do so whenever SDPA's
enable_gqa is not used, which an attention mask prevents). The trace recognises the repeat by the tensors' provenance
(a dense copy of a stride-0 expand, or a stride-0 expand passed as it is: trace.Trace._grouped_attention), not by the
model's name, and records the fused op with the kv heads, as `--hf-config` builds it. Shown where the group changes the
price: a forward over at most DECODE_ATTENTION_MAX_QUERIES positions runs as the token-generation kernel, which stacks
a group's query heads against one read of their kv head (costmodel/engines._attention_gemms)."""
import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from localneuron.costmodel.engines import DECODE_ATTENTION_MAX_QUERIES, Attention, op_work, rule  # noqa: E402
from localneuron.estimate import architecture, plan, recipe, run  # noqa: E402
from localneuron.estimate.layout import Layout, target_chip  # noqa: E402
from localneuron.estimate.trace import Trace, fake_device  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
CONFIG, SCRIPT = DATA / "small_llama.json", DATA / "train_hf_llama.py"
SEQ = 4   # query positions the token-generation kernel takes (at most DECODE_ATTENTION_MAX_QUERIES)


@pytest.fixture(scope="module")
def priced():
    """The script on one trn2 core, without and with an attention mask (the mask makes Transformers repeat k/v)."""
    assert SEQ <= DECODE_ATTENTION_MAX_QUERIES
    chip = target_chip("trn2")
    args = [str(CONFIG), "--micro-batch", "2", "--seq", str(SEQ), "--steps", "2"]
    return chip, {mask: run.estimate_script(str(SCRIPT), args + (["--attention-mask"] if mask else []), chip, world=1,
                                            nodes=1) for mask in (False, True)}


def _recipe_attention_s(chip) -> float:
    config = json.loads(CONFIG.read_text())
    layout = Layout.make(chip, nodes=1, tp=1, pp=1, dp=1)
    request = plan.Request(mode="train", micro_batch=2, seq=SEQ, recompute="none")
    with fake_device():
        stack = recipe.train_stack(architecture.from_config(config), layout, request)
    return sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).compute_s * n
               for part, n in stack.kinds for op in part.graphs.forward + part.graphs.backward
               if isinstance(rule(op.name), Attention))


def test_an_attention_mask_does_not_price_grouped_attention_as_multi_head(priced):
    _, answers = priced
    plain, masked = (answers[mask]["ranks"][0]["attention_s"] for mask in (False, True))
    assert plain > 0
    assert masked == pytest.approx(plain, rel=1e-6)


def test_the_script_prices_attention_as_the_config_path_does(priced):
    chip, answers = priced
    expected = _recipe_attention_s(chip)
    for answer in answers.values():
        assert answer["ranks"][0]["attention_s"] == pytest.approx(expected, rel=0.10)


def _traced_attention(key_of) -> tuple:
    """The fused op's key and value shapes, traced with keys and values made by `key_of` from [b, kv, s, d]."""
    with fake_device():
        q = torch.empty(2, 8, 1, 64, dtype=torch.bfloat16, device="neuron")
        k = torch.empty(2, 2, 4096, 64, dtype=torch.bfloat16, device="neuron")
        v = torch.empty(2, 2, 4096, 64, dtype=torch.bfloat16, device="neuron")
        trace = Trace()
        with trace:
            mask = torch.zeros(2, 1, 1, 4096, dtype=torch.bfloat16, device="neuron")
            torch.nn.functional.scaled_dot_product_attention(q, key_of(k), key_of(v), attn_mask=mask)
    op = next(op for op in trace.phases[0].ops if isinstance(rule(op.name), Attention))
    return tuple(op.inputs[1][1].shape), tuple(op.inputs[2][1].shape)


def test_kv_repeated_by_a_copy_of_an_expand_or_by_an_expand_alone_is_read_as_its_kv_heads():
    def repeat_kv(t):   # transformers' repeat_kv
        b, kv, s, d = t.shape
        return t[:, :, None].expand(b, kv, 4, s, d).reshape(b, kv * 4, s, d)

    assert _traced_attention(repeat_kv) == ((2, 2, 4096, 64),) * 2
    assert _traced_attention(lambda t: t[:, :1].expand(2, 8, 4096, 64)) == ((2, 1, 4096, 64),) * 2
    # a real copy of eight heads (no broadcast behind it) is multi-head attention, priced so
    assert _traced_attention(lambda t: torch.cat([t] * 4, dim=1)) == ((2, 8, 4096, 64),) * 2
