"""The Hugging Face integration loads only when the library it adapts is imported, whichever comes first
(the library or localneuron), and never by importing localneuron alone."""
from fresh_python import run_python
from hf_support import require

require("accelerate", "safetensors")

LAZY = """
import sys, torch
assert "localneuron.integrations.hf" not in sys.modules, "imported eagerly"
import accelerate.utils
assert "localneuron.integrations.hf.accelerate_memory" in sys.modules
print(hasattr(accelerate.utils.get_max_memory, "__localneuron_upstream__"))
"""

# accelerate/__init__ imports accelerate.accelerator, which imports torch, which autoloads localneuron: the
# module to patch is half-executed when the hooks are installed
IMPORTING_TORCH_LOADS_LOCALNEURON = """
import warnings
warnings.simplefilter("error", RuntimeWarning)
import accelerate
from accelerate import Accelerator
print(hasattr(Accelerator.__init__, "__localneuron_upstream__"), type(accelerate.accelerator).__name__)
"""

LIBRARY_FIRST = """
import torch, safetensors.torch as st
path = {path!r}
st.save_file({{"w": torch.arange(6.0)}}, path)
import localneuron  # installs the hooks and patches the modules imported before it
print(st.load_file(path, device="neuron:0")["w"].device)
"""


def test_integration_is_imported_with_the_library_not_with_localneuron():
    result = run_python(LAZY, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["True"]


def test_modules_imported_before_localneuron_are_patched_when_it_loads(tmp_path):
    code = LIBRARY_FIRST.format(path=str(tmp_path / "t.safetensors"))
    result = run_python(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["neuron:0"]


def test_a_module_still_importing_when_localneuron_loads_is_patched_once_imported():
    result = run_python(IMPORTING_TORCH_LOADS_LOCALNEURON, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["True", "module"]
