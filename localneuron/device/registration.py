"""Makes the PrivateUse1 slot the `neuron` device: configures the C++ core from the environment,
renames the backend, registers torch.neuron and the Tensor/Module methods, installs the executor."""
import os

import torch
from torch._C._dynamo import eval_frame

from localneuron import _C
from localneuron.adaptive_eager import engine as adaptive_eager
from localneuron.device import neuron_module, shutdown, streams
from localneuron.ops import op_records, policy, queueing, tracking
from localneuron.ops.decompositions import register_decompositions
from localneuron.ops.op_records import DECOMPOSITIONS, UNSUPPORTED
from localneuron.ops.refusals import register_refusals
from localneuron.ops.whole_ops import route_whole_ops
from localneuron.runtime import call_sites, host_heap, host_syncs, line_time
from localneuron.runtime.config import device_config
from localneuron.runtime.environment import read

_registered = False


def executor_callbacks() -> dict:
    """The policy the C++ executor calls (csrc/executor/executor_contract.h). They are the device's runtime, not
    user code: inside a compiled region Dynamo must neither trace them nor what they call."""
    callbacks = {"on_miss": policy.on_miss, "run_python": policy.run_python,
                 "on_device_failure": policy.on_device_failure, "on_kernel_refusal": policy.on_kernel_refusal,
                 "on_strided_write": policy.on_strided_write}
    skip = eval_frame._FrameExecStrategy(eval_frame._FrameAction.SKIP, eval_frame._FrameAction.SKIP)
    for fn in callbacks.values():
        eval_frame.set_code_exec_strategy(fn.__code__, skip)
    return callbacks


def executor_contract() -> dict:
    """What install_executor takes: the policy's callbacks, and from the op records the ops whose Scalar values
    set their output shape (those values are part of their signatures, csrc/executor/signature.h) and the ops
    with unboxed entry points (csrc/executor/fast_ops.cpp)."""
    return {**executor_callbacks(), "ops_shaped_by_scalars": sorted(queueing.SHAPE_FROM_SCALARS),
            "fast_ops": op_records.fast_ops()}


def register() -> None:
    global _registered
    if _registered:
        return
    name = torch._C._get_privateuse1_backend_name()
    if name not in ("privateuseone", "neuron"):
        raise RuntimeError(f"The PrivateUse1 device slot is already taken by '{name}'; localneuron needs it for "
                           "'neuron'. Only one PrivateUse1 backend can be loaded in a process.")
    config = device_config()
    host_heap.keep_heap_for_reuse()
    launch_blocking = read("NEURON_LAUNCH_BLOCKING")
    _C.configure_devices(len(config.visible_cores), config.hbm_bytes_per_core, config.target.name)
    if name != "neuron":
        torch.utils.rename_privateuse1_backend("neuron")
    torch._register_device_module("neuron", neuron_module)
    torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
    _C.set_launch_blocking(launch_blocking)
    _C.set_library_rule(call_sites.is_library)  # which frames are the user's: errors' lines and the report's
    _C.set_new_stream_rule(streams.new_streams_are_distinct)  # TorchNeuron's single-stream mode
    _C.install_executor(**executor_contract())
    tracking.register_kernel_executables()
    adaptive_eager.install()
    _C.set_host_sync_observer(host_syncs.observe)
    line_time.install()
    route_whole_ops()
    register_decompositions(DECOMPOSITIONS)
    register_refusals(UNSUPPORTED)
    os.register_at_fork(before=_C.drain_all_queues, after_in_child=neuron_module._mark_forked_child)
    shutdown.register()
    _registered = True
