// The contract between the C++ executor and its Python policy (localneuron/ops/policy.py), defined
// once here. Python sees Route as localneuron._C.Route and installs the callbacks with
// localneuron._C.install_executor(on_miss=..., run_python=..., on_device_failure=..., on_kernel_refusal=...,
// on_strided_write=...), once.
#pragma once
#include <pybind11/pybind11.h>

#include <cstdint>

namespace localneuron {

// How an executable runs. Device: the host kernel on zero-copy aliases, in C++ (also the CPU fallbacks
// the policy queues: the device's memory is the host's, so copies would compute the same). Python: a
// Python routine (other CPU fallbacks, float64 computed in float32). DeviceWrapInt64: as Device, then
// int64 results wrap around like the int32 values Neuron computes.
enum class Route : int { Device = 0, Python = 1, DeviceWrapInt64 = 2 };

// When an executable runs. Queued: on the device queue (queue.h) unless NEURON_LAUNCH_BLOCKING=1; the
// policy promises that its output shapes follow from the signature (no data-dependent shapes, no
// out= resizes, no generator whose order the caller observes, only tensor results). Synchronous: the
// device's queue is drained, then it runs on the calling thread. Metadata: a view that reads no device
// data, run at once without waiting for the queue.
enum class Execution : int { Synchronous = 0, Queued = 1, Metadata = 2 };

// What may influence a route, and a queued op's output layout: exactly what its signature covers, listed
// once, in signature.h (tensor metadata, wrapped numbers, list lengths, int and bool values, the kind but not
// the value of Scalar, float and string arguments, the default dtype). Two calls with one signature share an
// executable, and each computes with its own argument values.
struct RouteDecision {
  Route route;
  Execution execution;
  int64_t executable_id;  // the Python policy's handle for it (ops/tracking.py)
  int64_t estimated_ns;   // per call on the simulated target, for the report's time by source line
};

struct ExecutorCallbacks {
  // on_miss(op, args, kwargs) -> RouteDecision as a tuple: the first call of a signature; may raise.
  // The decision holds for every later call with the same signature.
  pybind11::object on_miss;
  // run_python(executable_id, op, args, kwargs) -> result: every call of a Route::Python executable.
  pybind11::object run_python;
  // on_device_failure(executable_id, op, args, kwargs, message) -> result or raises: the host kernel
  // of a device-route executable raised `message`.
  pybind11::object on_device_failure;
  // on_kernel_refusal(op_name, reason) -> None or raises: a kernel of the device's own (aten/kernels.cpp) met a call
  // TorchNeuron's Neuron implementation refuses; the policy raises (fallback disabled) or accounts a CPU fallback,
  // and the kernel then computes what the host would (the device's memory is the host's).
  pybind11::object on_kernel_refusal;
  // on_strided_write(op_name, overload) -> None or raises: a call writes (in place or out=) a tensor that is not contiguous,
  // which TorchNeuron's kernel launch refuses; the policy raises when the CPU fallback is disabled, else the call runs.
  pybind11::object on_strided_write;
};

}  // namespace localneuron
