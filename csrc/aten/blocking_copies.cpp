// Blocking copies within the device wait for the current stream, as TorchNeuron's do (blocking_copies.h).
#include "aten/blocking_copies.h"

#include "queue/queue.h"

#include <pybind11/pybind11.h>

namespace localneuron {
namespace {

thread_local bool t_inside_one_device_op = false;

// The dtypes each of TorchNeuron's copy kernels leaves to its other (runtime-level) implementation, which does not
// wait: float64 and bool for copy_; int32 too for _to_copy.
bool copy_kernel_dtype(c10::ScalarType t) { return t != c10::kDouble && t != c10::kBool; }
bool to_copy_kernel_dtype(c10::ScalarType t) { return copy_kernel_dtype(t) && t != c10::kInt; }

// The Python side decides whether the user made the copy (a runtime frame above it means not) and waits through
// torch_neuronx.current_stream(device).synchronize(), the call TorchNeuron makes (localneuron/device/streams.py).
void wait_for_current_stream(c10::DeviceIndex device) {
  // a copy on a queue's worker belongs to queued work (an op already issued), and waiting there would wait for itself
  if (on_queue_worker() || !Py_IsInitialized()) return;
  pybind11::gil_scoped_acquire gil;
  pybind11::module_::import("localneuron.device.streams").attr("after_blocking_copy")(static_cast<int>(device));
}

}  // namespace

InsideOneDeviceOp::InsideOneDeviceOp() : previous_(t_inside_one_device_op) { t_inside_one_device_op = true; }
InsideOneDeviceOp::~InsideOneDeviceOp() { t_inside_one_device_op = previous_; }

void after_blocking_copy(const at::Tensor& dst, const at::Tensor& src, bool non_blocking) {
  // an empty or non-contiguous destination returns before TorchNeuron's copy_ kernel waits
  if (non_blocking || t_inside_one_device_op || !dst.is_privateuseone() || !src.is_privateuseone() ||
      !copy_kernel_dtype(dst.scalar_type()) || !copy_kernel_dtype(src.scalar_type()) || dst.numel() == 0 ||
      !dst.is_contiguous()) {
    return;
  }
  wait_for_current_stream(dst.device().index());
}

void after_blocking_to_copy(const at::Tensor& src, const at::Tensor& result, bool non_blocking) {
  // an empty source returns before TorchNeuron's _to_copy kernel waits
  if (non_blocking || t_inside_one_device_op || !src.is_privateuseone() || !result.is_privateuseone() ||
      !to_copy_kernel_dtype(src.scalar_type()) || !to_copy_kernel_dtype(result.scalar_type()) || src.numel() == 0) {
    return;
  }
  wait_for_current_stream(result.device().index());
}

}  // namespace localneuron
