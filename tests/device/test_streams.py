"""Streams and events on the neuron device, in TorchNeuron's single-stream mode (the default: every new stream is the
default stream) and with host collective communication enabled (streams of their own)."""
import pytest
import torch

import torch_neuronx
from localneuron.device.streams import HOST_CC_VARIABLES
from localneuron.runtime.environment import ConfigurationError


@pytest.fixture
def single_stream_mode(monkeypatch):
    for name in HOST_CC_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_every_new_stream_is_the_default_stream_in_single_stream_mode(single_stream_mode):
    default = torch.neuron.default_stream()
    made = [torch.neuron.Stream(), torch_neuronx.Stream(), torch.neuron.Stream(priority=-1),
            torch.Stream(device="neuron"), torch.neuron.Stream(device=1)]
    assert all(s.stream_id == 0 for s in made)
    assert made[0] == made[1] == made[2] == made[3] == default and made[4] == torch.neuron.default_stream(1)
    assert isinstance(made[0], torch_neuronx.Stream)
    # work "on" such a stream is work on the default stream: ordered with it, with nothing to wait for
    x = torch.zeros(1000, device="neuron")
    with torch.neuron.stream(made[0]):
        assert torch.neuron.current_stream() == default
        x.add_(1.0)
    x.mul_(3.0)
    assert x[0].item() == 3.0


@pytest.mark.parametrize("name", HOST_CC_VARIABLES)
def test_host_cc_gives_streams_of_their_own_read_at_each_creation(single_stream_mode, monkeypatch, name):
    monkeypatch.setenv(name, "1")
    first, second = torch.neuron.Stream(), torch.Stream(device="neuron")
    assert first != second and 0 not in (first.stream_id, second.stream_id)
    monkeypatch.setenv(name, "0")
    assert torch.neuron.Stream() == torch.neuron.default_stream()
    assert first != torch.neuron.default_stream()  # a stream made meanwhile keeps its own queue


def test_a_bad_host_cc_value_is_refused_where_a_stream_is_made(single_stream_mode, monkeypatch):
    monkeypatch.setenv("NEURON_RT_ENABLE_HOST_CC", "maybe")
    with pytest.raises(ConfigurationError, match="NEURON_RT_ENABLE_HOST_CC='maybe' is not valid"):
        torch.neuron.Stream()


def test_streams_events_and_elapsed_time(host_cc):
    s = torch.neuron.Stream()
    assert s.device == torch.device("neuron:0") and isinstance(s, torch.Stream)
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        start.record()
        x = torch.ones(100, 100, device="neuron") @ torch.ones(100, 100, device="neuron")
        end.record()
    assert torch.neuron.current_stream() != s
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0 and end.query() and s.query()
    torch.neuron.current_stream().wait_stream(s)
    x.record_stream(s)
    s.synchronize()
    assert x[0, 0].item() == 100.0


def test_torch_neuronx_stream_api(host_cc):
    s = torch_neuronx.Stream()
    with torch_neuronx.stream(s):
        assert torch_neuronx.current_stream() == s
    assert torch_neuronx.default_stream().stream_id == 0
    e = torch_neuronx.Event()
    e.record()
    e.wait()
    torch_neuronx.synchronize()


def test_nested_stream_contexts_on_two_devices_restore_the_outer_stream_and_device(host_cc):
    """As torch.cuda.stream: making a stream of another device current also makes its device current; leaving the
    block gives back the stream and the current device from before it."""
    outer, inner = torch.neuron.Stream(device=0), torch.neuron.Stream(device=1)
    torch.neuron.set_device(0)
    before = torch.neuron.current_stream()
    with torch.neuron.stream(outer):
        assert torch.neuron.current_stream() == outer
        with torch.neuron.stream(inner):
            assert torch.neuron.current_stream() == inner and torch.neuron.current_device() == 1
        assert torch.neuron.current_stream() == outer and torch.neuron.current_device() == 0
    assert torch.neuron.current_stream() == before and torch.neuron.current_device() == 0


def test_each_device_has_its_own_current_stream_and_work_goes_to_it(host_cc):
    """Making a stream of core 1 current leaves core 0's current stream as it was (CUDA keeps one per device), and an
    op on core 0 then runs on core 0's stream, in order with what that stream holds."""
    torch.neuron.set_device(0)
    side = torch.neuron.Stream(device=1)
    with torch.neuron.stream(side):
        assert torch.neuron.current_stream(1) == side
        assert torch.neuron.current_stream(0) == torch.neuron.default_stream(0)
        x = torch.arange(4.0, device="neuron:0")
        y = (x * 2).sum()  # queued on core 0's default stream, not on a stream of side's id made for core 0
    torch.neuron.synchronize()
    assert y.item() == 12.0 and torch.neuron.current_stream(1) == torch.neuron.default_stream(1)


@pytest.mark.parametrize("index", [257, -5, 4, "neuron:9"])
def test_stream_functions_refuse_an_invalid_device_index(index):
    for make in (torch.neuron.current_stream, torch.neuron.default_stream, lambda d: torch.neuron.Stream(device=d)):
        with pytest.raises(ValueError, match=r"Invalid device id: -?\d+\. Valid range is 0 to 3"):
            make(index)
    with pytest.raises(RuntimeError, match="Device index 9 is out of range. Valid range is 0 to 3 for this process"):
        torch.Stream(device="neuron:9")  # PyTorch's own constructor reaches the device guard


def test_a_neuron_event_is_torchneurons_own_type_and_counts_as_complete_until_recorded(host_cc):
    """TorchNeuron's event is not a torch.Event: unrecorded it has no device, query() is True, and synchronize() and
    a stream's wait for it return at once."""
    event = torch.neuron.Event()
    assert isinstance(event, torch_neuronx.Event) and not isinstance(event, torch.Event)
    assert event.device is None and event.query()
    event.synchronize()
    torch.neuron.current_stream().wait_event(event)
    event.wait()
    assert "not recorded" in repr(event)


def test_elapsed_time_raises_torchneurons_runtime_errors_in_its_order(host_cc):
    timed, untimed = torch.neuron.Event(enable_timing=True), torch.neuron.Event()
    with pytest.raises(RuntimeError, match="^Event was not created with timing enabled$"):
        untimed.elapsed_time(timed)  # before anything is recorded: timing is checked first
    with pytest.raises(RuntimeError, match="^End event was not created with timing enabled$"):
        timed.elapsed_time(untimed)
    end = torch.neuron.Event(enable_timing=True)
    with pytest.raises(RuntimeError, match="^Event has not been recorded$"):
        timed.elapsed_time(end)
    timed.record()
    with pytest.raises(RuntimeError, match="^End event has not been recorded$"):
        timed.elapsed_time(end)
    with pytest.raises(RuntimeError, match="Expected a Neuron event"):
        timed.elapsed_time(torch.Event(device="neuron", enable_timing=True))
    other_core = torch.neuron.Stream(device=1)
    end.record(other_core)
    assert end.device == torch.device("neuron:1")  # an event takes its device from the stream it is recorded on
    with pytest.raises(RuntimeError, match="^Events must be on the same device$"):
        timed.elapsed_time(end)
    end.record()  # recorded again on core 0: its device follows
    assert end.device == torch.device("neuron:0") and timed.elapsed_time(end) >= 0.0


def test_neuron_streams_hand_out_and_take_neuron_events(host_cc):
    """The current, default and new streams are torch.neuron.Streams: record_event() gives a torch.neuron.Event, and
    wait_event() takes one (or PyTorch's own torch.Event); the wait orders the waiting stream after the event."""
    side = torch.neuron.Stream()
    for stream in (torch.neuron.current_stream(), torch.neuron.default_stream(), side, torch_neuronx.current_stream()):
        assert isinstance(stream, torch.neuron.Stream)
    x = torch.zeros(256, 256, device="neuron")
    with torch.neuron.stream(side):
        y = x + 1
        done = side.record_event()
    assert isinstance(done, torch.neuron.Event) and done.device == torch.device("neuron:0")
    torch.neuron.current_stream().wait_event(done)
    z = y * 2  # on the default stream, after side's y
    assert z[0, 0].item() == 2.0
    generic = side.record_event(torch.Event(device="neuron"))
    torch.neuron.current_stream().wait_event(generic)
    torch.neuron.synchronize()


def test_a_neuron_event_refuses_what_is_not_a_flag_or_a_neuron_stream():
    with pytest.raises(TypeError, match=r"Event\(enable_timing=...\) takes True or False, not 'yes'"):
        torch.neuron.Event(enable_timing="yes")
    event = torch.neuron.Event()
    for stream in (3, torch.Stream(device="cpu")):
        for use in (event.record, event.wait):
            with pytest.raises(TypeError, match="Expected a Neuron stream"):
                use(stream)
    event.record(torch.accelerator.current_stream())  # PyTorch's own handle on a neuron stream is one
    event.synchronize()
