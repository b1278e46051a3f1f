// Invariant: a copy within the device that the user asks to block (copy_ or _to_copy with non_blocking=False, both
// tensors on Neuron) returns only after the current stream of its destination's device has finished, as TorchNeuron's
// copy kernels do (its source snapshot, python_ops/torch_mlir/ops/copy.py and to_copy.py: the kernel, then
// torch_neuronx.current_stream(device).synchronize(), skipped for the dtypes and tensors those kernels leave to its
// other paths). Copies a device kernel makes as part of one op are not the user's and do not wait: TorchNeuron runs
// those ops as single kernels. _to_copy's own copy_ says so with InsideOneDeviceOp; for Python kernels
// (decompositions, the float64 route) the Python side sees the runtime's frame above the copy.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace localneuron {

// Held by a device kernel while it copies on the device as part of one op: its copies do not wait (thread-local).
class InsideOneDeviceOp {
 public:
  InsideOneDeviceOp();
  ~InsideOneDeviceOp();
  InsideOneDeviceOp(const InsideOneDeviceOp&) = delete;
  InsideOneDeviceOp& operator=(const InsideOneDeviceOp&) = delete;

 private:
  bool previous_;
};

// After copy_ (dst <- src): waits as TorchNeuron's copy_ does, when the rule says so.
void after_blocking_copy(const at::Tensor& dst, const at::Tensor& src, bool non_blocking);
// After _to_copy (src -> result): waits as TorchNeuron's _to_copy does, when the rule says so.
void after_blocking_to_copy(const at::Tensor& src, const at::Tensor& result, bool non_blocking);

}  // namespace localneuron
