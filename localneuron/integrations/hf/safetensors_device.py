"""safetensors onto `neuron`: safetensors checks device names itself and refuses `neuron:N` ("device
neuron:0 is invalid"), which breaks Accelerate's `load_state`, PEFT's `torch_device="neuron"` and
Diffusers' `map_location`. For a `neuron` device the file is opened on the host and each tensor is copied
to the device as it is read (what safetensors does for devices without a direct path); every other device
goes to safetensors unchanged."""
import functools

import torch

from . import notes


def _neuron_target(device):
    """The `neuron` device a safetensors `device=` argument names, or None when it names another device."""
    if isinstance(device, int) and not isinstance(device, bool):
        accelerator = torch.accelerator.current_accelerator()
        return torch.device("neuron", device) if accelerator is not None and accelerator.type == "neuron" else None
    if isinstance(device, (str, torch.device)):
        try:
            resolved = torch.device(device)
        except RuntimeError:
            return None  # not a torch device name: safetensors reports it
        return resolved if resolved.type == "neuron" else None
    return None


class _SliceOnDevice:
    def __init__(self, host_slice, device):
        self._host_slice = host_slice
        self._device = device

    def __getitem__(self, index):
        return self._host_slice[index].to(self._device)

    def __getattr__(self, attribute):  # get_shape, get_dtype
        return getattr(self._host_slice, attribute)


class _OpenOnHost:
    """A safetensors file opened on the host whose tensors land on a `neuron` device."""

    def __init__(self, host_file, device):
        self._host_file = host_file
        self._device = device

    def __enter__(self):
        self._host_file.__enter__()
        return self

    def __exit__(self, *exc_info):
        return self._host_file.__exit__(*exc_info)

    def get_tensor(self, name):
        return self._host_file.get_tensor(name).to(self._device)

    def get_tensors(self):
        return {name: tensor.to(self._device) for name, tensor in self._host_file.get_tensors().items()}

    def get_slice(self, name):
        return _SliceOnDevice(self._host_file.get_slice(name), self._device)

    def __getattr__(self, attribute):  # keys, metadata, offset_keys
        return getattr(self._host_file, attribute)


def _neuron_aware(upstream_safe_open):
    @functools.wraps(upstream_safe_open)
    def safe_open(filename, framework, device="cpu", **kwargs):
        target = _neuron_target(device)
        if target is None or framework not in ("pt", "torch"):
            return upstream_safe_open(filename, framework=framework, device=device, **kwargs)
        notes.record("safetensors_device")
        return _OpenOnHost(upstream_safe_open(filename, framework=framework, device="cpu", **kwargs), target)

    safe_open.__localneuron_upstream__ = upstream_safe_open
    return safe_open


def patch_package(safetensors) -> None:
    """Called with `safetensors`: modules importing `safe_open` from it afterwards get the wrapper."""
    if not hasattr(safetensors.safe_open, "__localneuron_upstream__"):
        safetensors.safe_open = _neuron_aware(safetensors.safe_open)


def patch_torch_module(safetensors_torch) -> None:
    """Called with `safetensors.torch` (its `load_file` opens files through the module's `safe_open`)."""
    import safetensors

    patch_package(safetensors)
    safetensors_torch.safe_open = safetensors.safe_open
