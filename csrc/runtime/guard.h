// Device guard (guard.cpp): current device, streams and events over the device queues.
// Invariant: a stream PyTorch asks for (torch.neuron.Stream(), torch.Stream(device="neuron"), a stream pool's)
// is a queue of its own only when the Python rule set here answers true at that moment; otherwise it is the
// device's default stream, as TorchNeuron's single-stream mode gives (localneuron/device/streams.py holds the rule:
// host collective communication enabled). Without a rule every new stream is a queue of its own.
#pragma once
#include <pybind11/pybind11.h>

namespace localneuron {

// new_streams_are_distinct() -> bool, asked at each stream's creation with the GIL taken; set with the GIL held.
void set_new_stream_rule(pybind11::object new_streams_are_distinct);

}  // namespace localneuron
