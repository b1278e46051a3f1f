"""Makes the PrivateUse1 slot the `neuron` device: configures the C++ core from the environment,
renames the backend, registers torch.neuron and the Tensor/Module methods, installs the executor."""
import os

import torch

from localneuron import _C
from localneuron.device import neuron_module, shutdown
from localneuron.ops import policy
from localneuron.ops.decompositions import register_decompositions
from localneuron.ops.op_records import DECOMPOSITIONS, UNSUPPORTED
from localneuron.ops.refusals import register_refusals
from localneuron.ops.whole_ops import route_whole_ops
from localneuron.profiler import line_time
from localneuron.runtime import host_syncs
from localneuron.runtime.config import device_config

_registered = False


def register() -> None:
    global _registered
    if _registered:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        raise RuntimeError(f"The PrivateUse1 device slot is already taken by '{name}'; localneuron needs it for "
                           "'neuron'. Only one PrivateUse1 backend can be loaded in a process.")
    config = device_config()
    _C.configure_devices(len(config.visible_cores), config.hbm_bytes_per_core, config.target.name)
    if name != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", neuron_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    _C.set_executor_callbacks(policy.on_miss, policy.run_python, policy.on_device_failure)
    _C.install_executor()
    _C.set_host_sync_observer(host_syncs.observe)
    line_time.install()
    route_whole_ops()
    register_decompositions(DECOMPOSITIONS)
    register_refusals(UNSUPPORTED)
    os.register_at_fork(after_in_child=neuron_module._mark_forked_child)
    shutdown.register()
    _registered = True
