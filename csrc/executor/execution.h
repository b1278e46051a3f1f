// Running executables: the boxed entry every neuron op without its own kernel reaches.
#pragma once
#include "runtime/device_state.h"
#include "executor/executable_cache.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

namespace localneuron {

// The executor's boxed kernel: finds or compiles the op's executable and runs it.
void execute(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack);

// Makes `device` current for the host kernel (generators, allocations) and restores the caller's.
struct CurrentDeviceScope {
  c10::DeviceIndex saved;
  explicit CurrentDeviceScope(c10::DeviceIndex d) : saved(current_device()) {
    if (d != saved) set_current_device(d);
  }
  ~CurrentDeviceScope() {
    if (current_device() != saved) set_current_device(saved);
  }
};

struct AliasedInput {
  at::Tensor device_tensor;
  at::Tensor alias;
};
struct HostArguments {
  c10::SmallVector<AliasedInput, 8> inputs;
  c10::DeviceIndex device = -1;  // where the op runs: its first device tensor, else the current device
};
// Replaces the device tensors and devices among the arguments stack[begin:] by their host counterparts
// (zero-copy aliases, cpu), ready for the op's host kernel. Generators stay as given: a random op draws from
// the CPU's generators (localneuron/device/random.py).
HostArguments to_host_arguments(torch::jit::Stack* stack, size_t begin);
// The device an op on the arguments stack[begin:] runs on.
c10::DeviceIndex device_of(const torch::jit::Stack& stack, size_t begin);
// Whether a write into `out` that reads `read` must run at the call, never queued: it writes repeated elements of
// `out`, or `read` partly covers `out` (the CPU refuses most such writes before it reads a byte; queued, the refusal
// would surface at a synchronisation). A write into the very tensor it reads (x.add_(x)) overlaps fully, which the
// CPU allows. `read` may be undefined or a host tensor.
bool write_must_run_at_call(const at::Tensor& out, const at::Tensor& read);
// int64 results wrap around like the int32 values Neuron computes (Route::DeviceWrapInt64).
void wrap_to_int32(const at::Tensor& t);

}  // namespace localneuron
