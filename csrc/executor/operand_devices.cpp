#include "executor/operand_devices.h"

#include <c10/util/Exception.h>

#include <map>
#include <mutex>

namespace localneuron {
namespace {

std::mutex g_errors_mutex;
std::map<std::string, int64_t> g_cross_device_errors;

void count_cross_device_error(const std::string& op) {
  std::lock_guard<std::mutex> lock(g_errors_mutex);
  g_cross_device_errors[op]++;
}

// visit(tensor, argument index, is_index): is_index marks the Tensor?[] indices of advanced indexing
// (index, index_put_ and their backwards), which may stay on the host, as CUDA accepts them.
template <typename Visit>
void for_each_tensor(const torch::jit::Stack& stack, size_t begin, Visit&& visit) {
  for (size_t i = begin; i < stack.size(); i++) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      visit(v.toTensor(), i - begin, false);
    } else if (v.isTensorList() || v.isOptionalTensorList()) {
      const bool indices = v.isOptionalTensorList();
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) visit(e.toTensor(), i - begin, indices);
      }
    }
  }
}

[[noreturn]] void raise_cross_device(const c10::OperatorHandle& op, c10::DeviceIndex a, c10::DeviceIndex b) {
  count_cross_device_error(op.schema().name());
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, neuron:",
              static_cast<int>(a), " and neuron:", static_cast<int>(b), "! (", op.schema().name(),
              "). Move the operands to one NeuronCore with .to('neuron:", static_cast<int>(a), "').");
}

}  // namespace

void check_operand_devices(const c10::OperatorHandle& op, const torch::jit::Stack& stack, size_t begin,
                           bool refuse_host) {
  c10::DeviceIndex core = -1, other = -1;
  for_each_tensor(stack, begin, [&](const at::Tensor& t, size_t index, bool is_index) {
    if (!t.defined()) return;
    if (t.is_privateuseone()) {
      const c10::DeviceIndex d = t.device().index();
      if (core < 0) core = d;
      else if (d != core && other < 0) other = d;
    } else if (refuse_host && t.dim() > 0 && !is_index) {
      TORCH_CHECK(false, "Non-scalar tensor arg", index, " is on ", t.device().type(), " device, expected neuron (",
                  op.schema().name(), "). Move it with .to('neuron'); only 0-dim CPU tensors may be mixed in as "
                  "scalars.");
    }
  });
  // Foreach lists spanning cores too: the executor puts all results on one core (PyTorch's optimizers
  // group tensors by device before such calls).
  if (other >= 0) raise_cross_device(op, core, other);
}

std::vector<std::pair<std::string, int64_t>> cross_device_errors() {
  std::lock_guard<std::mutex> lock(g_errors_mutex);
  return {g_cross_device_errors.begin(), g_cross_device_errors.end()};
}

void reset_cross_device_errors() {
  std::lock_guard<std::mutex> lock(g_errors_mutex);
  g_cross_device_errors.clear();
}

}  // namespace localneuron
