"""TorchTitan's own entry point (torchtitan.train.main) run under torchrun, once per NeuronCore.

TorchTitan takes the first available accelerator: with localneuron installed that is `neuron`, and
its c10d backend is `neuron` (Backend.default_device_backend_map). `--reference-cpu` (first argument)
runs the same job on the host with Gloo instead, for the loss comparison: TorchTitan 0.3.0 has no
CPU mode (it falls back to "cuda"), so only for that run it is shown the device type "cpu" and a
device module that reports no accelerator memory. compat.py lists what TorchTitan 0.3.0 needs
changed on torch 2.13 (both runs get the same changes).
"""
import os
import sys

import torch
import torch._utils


class HostDeviceModule:
    """torch.cpu plus the memory queries TorchTitan's DeviceMemoryMonitor makes; the host has no
    device allocator, so peak statistics are empty (TorchTitan logs them as -1)."""

    def __getattr__(self, name):
        return getattr(torch.cpu, name)

    @staticmethod
    def current_device():
        return 0  # torch.cpu.current_device() returns "cpu", which TorchTitan passes to barrier(device_ids=...)

    @staticmethod
    def get_device_name(device=None):
        return "cpu"

    @staticmethod
    def get_device_properties(device=None):
        return type("HostProperties", (), {"total_memory": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
                                           "name": "cpu"})()

    @staticmethod
    def memory_stats(device=None):
        return {}

    @staticmethod
    def reset_peak_memory_stats(device=None):
        pass

    @staticmethod
    def empty_cache():
        pass


def show_torchtitan_the_host() -> None:
    device_module = torch._utils._get_device_module
    torch._utils._get_available_device_type = lambda: "cpu"
    torch._utils._get_device_module = lambda device_type=None: (
        HostDeviceModule() if device_type == "cpu" else device_module(device_type))
    sum_gradients_for_gloo()


def sum_gradients_for_gloo() -> None:
    """TorchTitan sets FSDP's gradient divide factor to 1, which FSDP turns into a PREMUL_SUM(1.0)
    reduce-scatter that Gloo refuses; a SUM divided by 1.0 is the same arithmetic."""
    import torchtitan.distributed.fsdp as titan_fsdp

    disable_division = titan_fsdp.disable_fsdp_gradient_division

    def disable_division_with_sum(model):
        disable_division(model)
        for module in model.modules():
            if isinstance(module, titan_fsdp.FSDPModule):
                module.set_force_sum_reduction_for_comms(True)

    titan_fsdp.disable_fsdp_gradient_division = disable_division_with_sum


if __name__ == "__main__":
    if sys.argv[1:2] == ["--reference-cpu"]:
        del sys.argv[1]
        show_torchtitan_the_host()
    import compat
    compat.apply()
    from torchtitan.train import main
    main()
