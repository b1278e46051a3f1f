"""The roofline estimate of NeuronCore time per executable (labelled an estimate everywhere)."""
import pytest
import torch

from localneuron.ops import tracking
from localneuron.runtime.cost_model import estimate_seconds
from localneuron.runtime.targets import TARGETS

TRN2 = TARGETS["trn2"]


def test_large_matmul_is_compute_bound_on_the_tensor_engine():
    a, b = torch.empty(4096, 4096, dtype=torch.bfloat16), torch.empty(4096, 4096, dtype=torch.bfloat16)
    seconds = estimate_seconds(TRN2, "aten::mm", (a, b), {}, on_host=False)
    assert seconds == pytest.approx(TRN2.launch_overhead_s + 2 * 4096**3 / TRN2.bf16_flops_per_core)
    fp32 = estimate_seconds(TRN2, "aten::mm", (a.float(), b.float()), {}, on_host=False)
    assert fp32 > 3 * seconds  # fp32 runs at a quarter of the bf16 peak


def test_elementwise_op_is_memory_bound_and_fallback_pays_the_host_link():
    x = torch.empty(64 * 2**20 // 4)  # 64 MiB
    device = estimate_seconds(TRN2, "aten::add", (x, x), {}, on_host=False)
    assert device == pytest.approx(TRN2.launch_overhead_s + 3 * 64 * 2**20 / TRN2.hbm_bytes_per_s_per_core)
    host = estimate_seconds(TRN2, "aten::add", (x, x), {}, on_host=True)
    assert host > 10 * device


def test_estimates_accumulate_per_call(quiet):
    a = torch.randn(256, 256).to("neuron")
    tracking.clear_op_tracking()
    for _ in range(3):
        a @ a
    per_call = estimate_seconds(TRN2, "aten::mm", (a, a), {}, on_host=False)
    assert tracking.estimated_device_seconds()["aten::mm"] == pytest.approx(3 * per_call)
