"""The example GPT trains identically on the device and on the CPU (fp32)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import train_gpt  # noqa: E402


def test_twenty_steps_match_cpu_losses_and_parameters(quiet):
    cpu_model, cpu_losses = train_gpt.train("cpu", steps=20, log=lambda _: None)
    dev_model, dev_losses = train_gpt.train("neuron", steps=20, log=lambda _: None)
    assert dev_losses == pytest.approx(cpu_losses, abs=1e-4)
    assert dev_losses[-1] < dev_losses[0]  # it learns
    for (name, c), (_, d) in zip(cpu_model.named_parameters(), dev_model.named_parameters()):
        assert d.device.type == "neuron"
        torch.testing.assert_close(d.detach().cpu(), c.detach(), atol=1e-3, rtol=0, msg=name)
