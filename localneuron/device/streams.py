"""Streams and events on the neuron device (torch.neuron.Stream / Event / stream(...)).

TorchNeuron runs every stream a program creates as its default stream unless host-mediated collective communication
is enabled (its single-stream mode: NeuronStream::createStream in the source snapshot of 2026-04-21; the Neuron Explorer
variables page documents TORCH_NEURONX_ENABLE_HOST_CC, the runtime reads NEURON_RT_ENABLE_HOST_CC). So here: a new
stream is a queue of its own only while either variable is 1, read at each creation (TorchNeuron's own tests set it
per test); otherwise torch.neuron.Stream() == default_stream(), and work "on" it is ordered with everything else on
the default stream. The C++ guard asks new_streams_are_distinct() for every stream PyTorch creates (csrc/runtime/guard.h).
"""
import torch

from localneuron.device.devices import device_index
from localneuron.runtime.environment import read

HOST_CC_VARIABLES = ("NEURON_RT_ENABLE_HOST_CC", "TORCH_NEURONX_ENABLE_HOST_CC")


def new_streams_are_distinct() -> bool:
    return any(read(name) for name in HOST_CC_VARIABLES)


class Stream(torch.Stream):
    def __new__(cls, device=None, priority: int = 0, **kwargs):
        device = torch.device("neuron", device_index(device))
        new_streams_are_distinct()  # a bad variable raises here as itself; through the C++ guard, as a RuntimeError
        return super().__new__(cls, device=device, priority=priority, **kwargs)

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
    """A neuron event (a plain torch.Event: PyTorch's event methods accept no subclasses)."""
    return torch.Event(device="neuron", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(device_index(device))


def default_stream(device=None) -> torch.Stream:
    current = torch.accelerator.current_stream(device_index(device))
    return torch.Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


def set_stream(stream) -> None:
    torch.accelerator.set_stream(stream)


class StreamContext:
    """Makes `stream` current inside the block (None leaves the current stream as it is); on leaving it, the
    stream's device and the device current before the block get back their streams, and the current device is
    the one before the block (setting a stream also makes its device current), as torch.cuda.stream does."""

    def __init__(self, stream):
        self.stream = stream
        self.previous = None  # (the current stream before the block, the stream's device's stream before it)

    def __enter__(self):
        if self.stream is not None:
            self.previous = (torch.accelerator.current_stream(),
                             torch.accelerator.current_stream(self.stream.device_index))
            torch.accelerator.set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.previous is not None:
            current_device_stream, stream_device_stream = self.previous
            torch.accelerator.set_stream(stream_device_stream)
            torch.accelerator.set_stream(current_device_stream)
        return False


def stream(stream) -> StreamContext:
    return StreamContext(stream)
