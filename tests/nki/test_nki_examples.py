"""The examples in examples/nki run, match PyTorch on fresh random inputs, and print estimates."""
import importlib
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "nki"
sys.path.insert(0, str(EXAMPLES))


@pytest.mark.parametrize("name", ["tensor_add", "matmul", "softmax", "rmsnorm", "flash_attention",
                                  "rmsnorm_training"])
def test_example_checks_against_pytorch_and_reports_latency(name, capsys):
    importlib.import_module(name).main()
    printed = capsys.readouterr().out
    assert "bottleneck" in printed
    if name != "rmsnorm_training":
        assert "matches PyTorch" in printed and " us on gen" in printed
    else:
        assert "compiled" in printed and "loss" in printed


@pytest.mark.parametrize("target", ["gen2", "gen4"])
@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "flash_attention"])
def test_examples_run_on_every_generation(name, target, monkeypatch, capsys):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)
    importlib.import_module(name).main()
    assert f"on {target}" in capsys.readouterr().out
