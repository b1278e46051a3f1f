"""Diffusers on `neuron`: tiny text-to-image (CLIP text encoder, cross-attention UNet) and DiT pipelines built
from configs denoise on the device, eagerly (and DiT's denoiser compiled by torch.compile(backend="neuron")), and
produce the CPU's images; the example runs as a script."""
import sys

import pytest
import torch

from hf_support import EXAMPLES, python_script, require

require("diffusers", "transformers")
sys.path.insert(0, str(EXAMPLES))


# The denoiser compiled: DiT's transformer (attention, adaptive norms, patching). The UNet's convolutions, group norms
# and upsampling compile through the same backend as tests/compile's graphs do, at half a minute of CPU more here.
@pytest.mark.parametrize("pipeline_kind, compiled", [("text-to-image", False), ("dit", True)])
def test_pipeline_matches_the_cpu_eager_and_compiled(quiet, pipeline_kind, compiled):
    import torch_neuronx
    from diffusers_pipeline import generate

    reference = generate("cpu", pipeline_kind)
    assert reference.shape == (2, 8, 8, 3)
    torch_neuronx.clear_op_tracking()
    torch.testing.assert_close(generate("neuron", pipeline_kind), reference, atol=1e-5, rtol=1e-4)
    assert torch_neuronx.get_fallback_ops() == []
    if not compiled:
        return
    torch._dynamo.reset()
    torch_neuronx.reset_dynamo_metrics()
    compiled = generate("neuron", pipeline_kind, compile_denoiser=True)
    torch.testing.assert_close(compiled, reference, atol=1e-5, rtol=1e-4)
    assert torch_neuronx.get_dynamo_metrics(), "the denoiser was not compiled by the neuron backend"


def test_example_script_prints_images_equal_to_the_cpu():
    (result,) = python_script(EXAMPLES / "diffusers_pipeline.py")
    assert result["shape"] == [2, 8, 8, 3] and result["max_diff_vs_cpu"] < 1e-5
