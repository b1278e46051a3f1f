"""Streams and events on the neuron device (torch.neuron.Stream / Event / stream(...)).

TorchNeuron runs every stream a program creates as its default stream unless host-mediated collective communication
is enabled (its single-stream mode: NeuronStream::createStream in the source snapshot of 2026-04-21; the Neuron Explorer
variables page documents TORCH_NEURONX_ENABLE_HOST_CC, the runtime reads NEURON_RT_ENABLE_HOST_CC). So here: a new
stream is a queue of its own only while either variable is 1, read at each creation (TorchNeuron's own tests set it
per test); otherwise torch.neuron.Stream() == default_stream(), and work "on" it is ordered with everything else on
the default stream. The C++ guard asks new_streams_are_distinct() for every stream PyTorch creates (csrc/runtime/guard.h).
"""
import sys

import torch

from localneuron.device.devices import device_index
from localneuron.runtime import host_syncs
from localneuron.runtime.environment import read

HOST_CC_VARIABLES = ("NEURON_RT_ENABLE_HOST_CC", "TORCH_NEURONX_ENABLE_HOST_CC")


def new_streams_are_distinct() -> bool:
    return any(read(name) for name in HOST_CC_VARIABLES)


class Stream(torch.Stream):
    """torch.neuron.Stream: a torch.Stream on the neuron device whose events are neuron events (Event below)."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if {"stream_id", "device_index", "device_type"} <= kwargs.keys():  # an existing stream, as PyTorch names it
            return super().__new__(cls, **kwargs)
        device = torch.device("neuron", device_index(device))
        new_streams_are_distinct()  # a bad variable raises here as itself; through the C++ guard, as a RuntimeError
        return super().__new__(cls, device=device, priority=priority, **kwargs)

    @classmethod
    def of(cls, stream: torch.Stream) -> "Stream":
        """The same queue as `stream` (a torch.Stream PyTorch handed out), as a torch.neuron.Stream."""
        return cls(stream_id=stream.stream_id, device_index=stream.device_index, device_type=stream.device_type)

    def wait_event(self, event) -> None:
        event.wait(self)

    def wait_stream(self, stream) -> None:
        self.wait_event(stream.record_event())

    def record_event(self, event=None):
        event = event if event is not None else Event()
        event.record(self)
        return event


class Event:
    """torch.neuron.Event, TorchNeuron's own event type (torch_neuronx.Event in its source snapshot: not a torch.Event).
    Like TorchNeuron's, an event takes its device from the stream it is first recorded on, counts as complete until
    it is recorded (query() is True, synchronize() and wait() return at once), and elapsed_time() raises RuntimeError
    with TorchNeuron's messages (NeuronEvent::elapsed_time's checks, in their order) where PyTorch's own torch.Event
    raises ValueError. The recording itself is a torch.Event on the stream's device, which the device's guard
    records on its queue and times (csrc/runtime/guard.h). Being its own type, it goes to neuron streams
    (torch.neuron.current_stream(), torch.neuron.Stream()), not to PyTorch's generic torch.Stream methods, as on
    Trainium."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        for name, value in (("enable_timing", enable_timing), ("blocking", blocking), ("interprocess", interprocess)):
            if not isinstance(value, bool):
                raise TypeError(f"torch.neuron.Event({name}=...) takes True or False, not {value!r}")
        self.enable_timing, self.blocking, self.interprocess = enable_timing, blocking, interprocess
        self._recording: torch.Event | None = None  # made at the first record(), on the recording stream's device

    def __repr__(self) -> str:
        where = f"recorded on {self.device}" if self._recording is not None else "not recorded"
        return f"<torch.neuron.Event {where}, enable_timing={self.enable_timing}>"

    @property
    def device(self) -> torch.device | None:
        return self._recording.device if self._recording is not None else None

    def record(self, stream=None) -> None:
        stream = current_stream() if stream is None else _neuron_stream(stream)
        if self._recording is None or self._recording.device != stream.device:
            self._recording = torch.Event(device=stream.device, enable_timing=self.enable_timing,
                                          blocking=self.blocking, interprocess=self.interprocess)
        self._recording.record(stream)

    def wait(self, stream=None) -> None:
        stream = current_stream() if stream is None else _neuron_stream(stream)
        if self._recording is not None:
            self._recording.wait(stream)

    def query(self) -> bool:
        return self._recording is None or self._recording.query()

    def synchronize(self) -> None:
        if self._recording is not None:
            self._recording.synchronize()

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds from this event to end_event, once both have completed (it waits for them)."""
        if not isinstance(end_event, Event):
            raise RuntimeError(f"Expected a Neuron event (torch.neuron.Event), got {type(end_event).__name__}")
        for event, which in ((self, "Event"), (end_event, "End event")):
            if not event.enable_timing:
                raise RuntimeError(f"{which} was not created with timing enabled")
        for event, which in ((self, "Event"), (end_event, "End event")):
            if event._recording is None:
                raise RuntimeError(f"{which} has not been recorded")
        if self.device != end_event.device:
            raise RuntimeError("Events must be on the same device")
        return self._recording.elapsed_time(end_event._recording)


def _neuron_stream(stream) -> torch.Stream:
    if not isinstance(stream, torch.Stream) or stream.device.type != "neuron":
        raise TypeError(f"Expected a Neuron stream (torch.neuron.Stream), got {stream!r}")
    return stream


def current_stream(device=None) -> Stream:
    return Stream.of(torch.accelerator.current_stream(device_index(device)))


def default_stream(device=None) -> Stream:
    current = torch.accelerator.current_stream(device_index(device))
    return Stream(stream_id=0, device_index=current.device_index, device_type=current.device_type)


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


def after_blocking_copy(device_index: int) -> None:
    """Called by the device's copy kernels (csrc/aten/blocking_copies.h) after a copy within the device that the user
    asked to block: TorchNeuron's copy_ and _to_copy then wait for the current stream, through this very call to
    torch_neuronx.current_stream. A host synchronisation point, listed in the report by call site; the runtime's own
    copies (a frame of it above the call) neither wait nor count."""
    import torch_neuronx

    if host_syncs.record(host_syncs.BLOCKING_DEVICE_COPY, sys._getframe(0).f_back):
        torch_neuronx.current_stream(device_index).synchronize()
