"""Diffusers on `neuron`: a tiny DiT pipeline (transformer denoiser, VAE, DDIM scheduler) built from configs
denoises on the device, eagerly and with the denoiser compiled by torch.compile(backend="neuron"), and
produces the CPU's images."""
import sys

import torch

from hf_support import EXAMPLES, require

require("diffusers", "transformers")
sys.path.insert(0, str(EXAMPLES))


def test_pipeline_matches_the_cpu_eager_and_compiled(quiet):
    import torch_neuronx
    from diffusers_pipeline import generate

    reference = generate("cpu")
    assert reference.shape == (2, 8, 8, 3)
    torch.testing.assert_close(generate("neuron"), reference, atol=1e-5, rtol=1e-4)
    torch._dynamo.reset()
    torch_neuronx.reset_dynamo_metrics()
    compiled = generate("neuron", compile_denoiser=True)
    torch.testing.assert_close(compiled, reference, atol=1e-5, rtol=1e-4)
    assert torch_neuronx.get_dynamo_metrics(), "the denoiser was not compiled by the neuron backend"
