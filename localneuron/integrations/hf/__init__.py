"""Hugging Face integration: what Accelerate, Transformers, PEFT and safetensors need to treat `neuron` as
they treat a GPU where their own code has no branch for it. Loaded by `localneuron.integrations.import_hooks`
when those libraries are imported; every adaptation it makes is listed in the portability report."""
from localneuron.integrations.hf import report  # noqa: F401,E402  (registers the portability report's section)
