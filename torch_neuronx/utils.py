"""torch_neuronx.utils: the questions about the running configuration that TorchNeuron's own tests ask, answered
from what localneuron actually does."""
from localneuron.runtime.environment import read, set_if_unset

# programs (TorchNeuron's tests among them) also read the switch from the environment: it says what the device is
set_if_unset("TORCH_NEURONX_MLIR_ATEN_OPS", "1")
# TorchNeuron's other internal path switch (StableHLO lowering, on by default): localneuron is that path, so a false
# value warns once here, at import, and changes nothing
read("TORCH_NEURONX_ENABLE_STABLEHLO")


def is_sync_mode_enabled() -> bool:
    """True when the device runs blocking (NEURON_LAUNCH_BLOCKING=1): every op runs when it is issued and raises
    there, instead of queueing per NeuronCore and stream while Python runs ahead. The value comes from the
    environment table (localneuron/runtime/environment.py) that also configured the device, with its spellings
    and its error for a bad value."""
    return read("NEURON_LAUNCH_BLOCKING")


def use_mlir_aten_ops() -> bool:
    """Whether ATen ops take TorchNeuron's torch-mlir lowering (its internal TORCH_NEURONX_MLIR_ATEN_OPS switch, not a
    public setting). TorchNeuron's own tests ask it to tell which of two behaviour sets to expect, and localneuron's is
    the torch-mlir one: the op trackers name ops "aten::name[.overload]" (the other path lists bare kernel names),
    errors carry PyTorch's own wording (the other path raises its JAX lowering's texts), and threshold, softplus, eye
    and dtype conversions run on the device (the other path has no kernel for them). So it is always True here: the
    variable's only value is 1 (another warns and is ignored), since the answer describes the device, not a switch
    it has."""
    return read("TORCH_NEURONX_MLIR_ATEN_OPS") == "1"


def is_stablehlo_enabled() -> bool:
    """Whether eager ops lower through StableHLO (TORCH_NEURONX_ENABLE_STABLEHLO): always, as above."""
    return read("TORCH_NEURONX_ENABLE_STABLEHLO") == "1"


def is_neff_cache_disabled() -> bool:
    """Whether compiled graphs skip the persistent compile cache: the compiler's own decision
    (TORCH_NEURONX_DISABLE_NEFF_CACHE, or the older spelling TORCH_NEURONX_NEFF_DISABLE_CACHE)."""
    from localneuron.compiler.settings import cache_settings  # at call time: the compiler loads when asked for

    return not cache_settings().enabled


def get_platform_target() -> str:
    """The platform NKI kernels are built for, "trn1", "trn2" or "trn3": the generation NEURON_PLATFORM_TARGET_OVERRIDE
    names when set (a bad value raises its ConfigurationError), else the simulated device's (LOCALNEURON_TARGET)."""
    from localneuron.nki import generation  # at call time: the NKI layer loads only when it is asked for

    return generation.platform_of(generation.current())


def get_logical_neuron_cores() -> str:
    """The logical NeuronCore configuration in effect, "1" or "2": physical NeuronCores per device (NEURON_LOGICAL_NC_
    CONFIG, else the target's default, 2 on trn2 and trn3). TorchNeuron's own NKI kernels launch on that many cores."""
    from localneuron.runtime.config import selected_target

    return str(selected_target().lnc)


def get_neuron_registered_ops(as_sorted: bool = False, keep_variant: bool = False) -> set | list:
    """The ops with a kernel of the device's own (the PrivateUse1 dispatch key), as the dispatcher lists them, without
    their namespace (aten's and c10d's): "name.overload" with keep_variant, else the bare names; a sorted list with
    as_sorted, else a set. An ATen op that is not here runs PyTorch's composite kernel on the device, or its CPU
    fallback (get_fallback_ops)."""
    import torch

    names = set()
    for registration in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"):
        _, separator, op = registration.partition("::")
        if separator:
            names.add(op if keep_variant else op.partition(".")[0])
    return sorted(names) if as_sorted else names
