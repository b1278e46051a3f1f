"""localneuron: TorchNeuron's `neuron` device, simulated on any machine.

Importing this package (PyTorch does it on `import torch` through the torch.backends entry point)
registers the device; `torch_neuronx` holds TorchNeuron's public API names.
"""
import torch  # noqa: F401  (the C++ core links against torch's libraries)

from localneuron import _C  # noqa: F401,E402  (loads the C++ core: allocator, guard, hooks, kernels)
from localneuron.device.registration import register as _register  # noqa: E402
from localneuron.runtime.checked_files import OutputError as _OutputError  # noqa: E402
from localneuron.runtime.environment import ConfigurationError as _ConfigurationError  # noqa: E402
from localneuron.runtime.version import VERSION as __version__  # noqa: E402,F401

try:
    _register()
except _ConfigurationError as _error:
    # A bad variable is the user's to fix: the package stays importable so that `localneuron info`
    # can show every variable, and the device stays unregistered.
    import warnings

    warnings.warn(f"localneuron: the neuron device is not available: {_error} `localneuron info` lists every "
                  "variable localneuron reads.", RuntimeWarning, stacklevel=2)
import localneuron.distributed  # noqa: E402,F401  (registers the c10d backend "neuron")
from localneuron.integrations import import_hooks as _import_hooks  # noqa: E402
from localneuron.profiler import inspect_env as _inspect_env  # noqa: E402
from localneuron.profiler import kineto_bridge as _kineto_bridge  # noqa: E402

_kineto_bridge.install()  # the device's part of torch.profiler traces
try:
    _inspect_env.start_from_environment()  # NEURON_RT_INSPECT_ENABLE
except (_ConfigurationError, _OutputError) as _error:
    # The device works: only the environment route's profile is off, and the message says which variable.
    import warnings

    warnings.warn(f"localneuron: no NEURON_RT_INSPECT_* profile will be written: {_error} The neuron device works; "
                  "fix the variable or unset NEURON_RT_INSPECT_ENABLE.", RuntimeWarning, stacklevel=2)
_import_hooks.install()  # integrations load only when the library they adapt is imported

