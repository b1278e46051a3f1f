"""Device selection: torch.neuron.device_count / current_device / set_device / device(...)."""
import torch

from localneuron import _C


def is_available() -> bool:
    try:
        return device_count() > 0
    except Exception:  # TorchNeuron's is_available() never raises
        return False


def device_count() -> int:
    return _C.device_count()


def is_initialized() -> bool:
    return _C.runtime_initialized()


def init() -> None:
    _C.mark_runtime_initialized()


def _index(device) -> int:
    """An int index from an int, 'neuron:1', torch.device or None (the current device)."""
    if device is None:
        return _C.current_device()
    if isinstance(device, str):
        # torch.device keeps the index in 8 bits ("neuron:257" would become neuron:1): read it here
        kind, _, index = device.partition(":")
        if kind == "neuron" and index.isdigit():
            return int(index)
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "neuron":
            raise ValueError(f"Expected a neuron device, got {device}.")
        return _C.current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise ValueError(f"Incorrect device argument found: {device!r} (expected int, str or torch.device).")


def device_index(device) -> int:
    """The index `device` names (see _index), checked against the visible devices."""
    index = _index(device)
    n = device_count()
    if not 0 <= index < n:
        if n == 0:
            raise ValueError(f"Invalid device id: {index}. No Neuron devices are visible (check NEURON_RT_VISIBLE_CORES).")
        raise ValueError(f"Invalid device id: {index}. Valid range is 0 to {n - 1}: this process sees {n} NeuronCores "
                         "(torch.neuron.device_count()); use an index below that, or make more cores visible with "
                         "NEURON_RT_VISIBLE_CORES.")
    return index


def current_device() -> int:
    return _C.current_device()


def set_device(device) -> None:
    _C.set_device(device_index(device))


class device:
    """Context manager that makes `device` current and restores the previous one on exit. None or -1 changes
    nothing (as torch.cuda.device); an index no visible device has raises ValueError here, where it is named."""

    def __init__(self, device):
        self.index = -1 if device is None or device == -1 else device_index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = _C.current_device()
        if self.index >= 0:
            set_device(self.index)

    def __exit__(self, *exc):
        _C.set_device(self.previous)
        return False


def synchronize(device=None) -> None:
    """Waits for the work queued on every stream of the device, and raises the first error in it."""
    _C.synchronize(device_index(device))


def get_device_name(device=0) -> str:
    if isinstance(device, int):
        return f"neuron:{device}"
    if isinstance(device, torch.device):
        return str(device)
    raise ValueError(f"Incorrect device argument found: {device!r} (expected int or torch.device).")


class DeviceProperties:
    def __init__(self, index: int):
        from localneuron.runtime.config import device_config

        config = device_config()
        self.index = index
        generation = {'gen2': 2, 'gen3': 3, 'gen4': 4}[config.target.nc_version]
        self.name = f"NeuronCore-v{generation} ({config.target.name}, LNC={config.target.lnc}, simulated)"
        self.target = config.target.name
        self.total_memory = _C.memory_counters(index)["capacity"]

    def __repr__(self):
        return f"_NeuronDeviceProperties(name='{self.name}', total_memory={self.total_memory // (1 << 20)}MB)"


def get_device_properties(device=None) -> DeviceProperties:
    if isinstance(device, str) and not device.startswith("neuron"):
        raise ValueError(f"Expected a neuron device string like 'neuron:0', got {device!r}.")
    index = device_index(device)
    init()
    return DeviceProperties(index)
