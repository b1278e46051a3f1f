"""What `import torch_neuronx` loads: the device and its public API, not the machinery only some programs use.
Every process that imports torch_neuronx pays for what it loads (a script, each torchrun rank, each vLLM worker);
torch._dynamo alone is about a second of start-up, so the compiler stack and the NKI simulator (which needs Dynamo
to trace kernel calls) load when first used."""
import json

from fresh_python import run_python

LOADED = "import sys, json, torch, torch_neuronx; print(json.dumps(sorted(sys.modules)))"


def _modules_after(code: str) -> set[str]:
    run = run_python(code)
    assert run.returncode == 0, run.stderr[-3000:]
    return set(json.loads(run.stdout.splitlines()[-1]))


def test_importing_torch_neuronx_loads_neither_dynamo_nor_the_nki_simulator():
    loaded = _modules_after(LOADED)
    assert "localneuron.device.registration" in loaded  # the device itself is there
    assert not {"torch._dynamo", "torch._inductor", "localneuron.nki"} & loaded


def test_the_nki_names_load_the_simulator_on_first_use():
    loaded = _modules_after("import sys, json, torch, torch_neuronx\n"
                            "from torch_neuronx import nki_op, wrap_nki\n"
                            "import localneuron.nki as nki\n"
                            "assert nki_op is nki.nki_op and wrap_nki is nki.wrap_nki\n"
                            "assert {'nki_op', 'wrap_nki'} <= set(dir(torch_neuronx))\n"
                            "print(json.dumps(sorted(sys.modules)))")
    assert "localneuron.nki.torch_integration" in loaded


def test_an_unknown_name_is_an_attribute_error():
    run = run_python("import torch_neuronx\ntry:\n    torch_neuronx.no_such_name\n"
                     "except AttributeError as e:\n    print(e)")
    assert run.returncode == 0 and "no_such_name" in run.stdout, run.stderr[-2000:]
